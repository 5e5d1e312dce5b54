"""ImageNet-1k from scratch: ViT S/16, B/16, L/16 x 90, 150 and 300 epochs (not run here).

Ready for a pod, not for 2 CPU cores: the smallest run is ViT-S/16 for 90 epochs, about 7 hours
on a TPU v3-8 (big_vision's report, below). Print the commands for a queue with

  python -m vit_jax.sweep run experiments/sweeps/vit_i1k_paper.py --root=/shared/sweeps/vit_i1k \
      --print_commands

then, once the runs are done, `collect`, `fit` and `plot` with the same --root.

Recipe: configs/vit.py:dataset=imagenet2012, big_vision's plain ViT baseline (Beyer et al.,
"Better plain ViT baselines for ImageNet-1k", 2022): batch 1024, Adam lr 1e-3, decoupled weight
decay 1e-4, 10k warmup steps, cosine, RandAugment(2, 10), mixup 0.2, global average pooling,
2-D sin-cos position embeddings; trained on train[:99%], evaluated on the validation split. The
same recipe serves every size here, as in a scaling study; it is tuned for S/16 only.

Expected (published; not reproduced here):
- ViT-S/16, 90 epochs: 76.5% top-1 ("This should take 6-7h to finish 90ep on a TPU-v3-8 and
  reach 76.5%", big_vision/configs/vit_s16_i1k.py).
- ViT-S/16, 300 epochs: about 80% ("300 epochs of training reach 80% in less than one day",
  the abstract of Beyer et al. 2022).
- B/16 and L/16 from scratch on ImageNet-1k need stronger regularization than this recipe:
  big_vision's AugReg config (vit_i1k.py) notes that dropout and stochastic depth "was shown to
  help with B/32, B/16, L/16 models in the paper (Figure 4)" of Steiner et al., "How to train
  your ViT?" (2021). Expect the error to stop falling with model size here: that saturation on
  1.28M images is what the params axis of this sweep measures.
"""

import ml_collections

EPOCHS = (90, 150, 300)
IMAGENET_TRAIN = 1_268_355  # examples in train[:99%], the split trained on (configs/vit.py)
BATCH = 1024
TOPOLOGY = {"S/16": "v5p-8", "B/16": "v5p-8", "L/16": "v5p-32"}  # where batch 1024 fits


def get_sweep():
  return ml_collections.ConfigDict(
      dict(
          config="configs/vit.py:dataset=imagenet2012",
          fixed={"eval_every": 5_000, "checkpoint_every": 2_000},
          # target_topology: the slice vit_jax.compile checks by default (README.md, "Before you
          # spend pod hours").
          runs=[
              {"model.variant": v, "target_topology": TOPOLOGY[v]} for v in ("S/16", "B/16", "L/16")
          ],
          grid={"total_steps": [e * IMAGENET_TRAIN // BATCH for e in EPOCHS]},
          name="{model.variant}-{total_steps}steps",
          metric="error",
          fits=("compute",),
      ),
      allow_dotted_keys=True,
  )
