"""ImageNet-1k from scratch: ViT S/16, B/16, L/16 x 90, 150 and 300 epochs (not run here).

Ready for a pod, not for 2 CPU cores: the smallest run is ViT-S/16 for 90 epochs, about 7 hours
on a TPU v3-8 (big_vision's report, below). Print the commands for a queue with

  python -m vit_jax.sweep run experiments/sweeps/vit_i1k_paper.py --root=/shared/sweeps/vit_i1k \
      --print_commands

then, once the runs are done, `collect`, `fit` and `plot` with the same --root.

Recipes: configs/vit.py:dataset=imagenet2012,variant=V, each size on its published recipe
(the docstring of configs/vit.py lists every value and its source):
- S/16: big_vision's plain ViT baseline (vit_s16_i1k.py; Beyer et al., "Better plain ViT
  baselines for ImageNet-1k", 2022): batch 1024, softmax cross-entropy, RandAugment(2, 10),
  mixup 0.2, GAP, pre-logits, sin-cos position embeddings.
- B/16, L/16: big_vision's AugReg recipe (vit_i1k.py; Steiner et al., "How to train your ViT?",
  2021): batch 4096, sigmoid cross-entropy with head bias -6.9, cls token, pre-logits,
  RandAugment(2, 15), mixup 0.5.
Both: Adam lr 1e-3, decoupled weight decay 1e-4, 10k warmup steps, cosine, trained on
train[:99%], evaluated on the validation split. Only the epochs vary here.

Expected (published; not reproduced here):
- ViT-S/16, 90 epochs: 76.5% top-1 ("This should take 6-7h to finish 90ep on a TPU-v3-8 and
  reach 76.5%", big_vision/configs/vit_s16_i1k.py).
- ViT-S/16, 300 epochs: about 80% ("300 epochs of training reach 80% in less than one day",
  the abstract of Beyer et al. 2022).
- B/16 and L/16: vit_i1k.py quotes no figure; it notes that dropout and stochastic depth, which
  it leaves out, "was shown to help with B/32, B/16, L/16 models in the paper (Figure 4)".
"""

import ml_collections

from vit_jax.config import args

EPOCHS = (90, 150, 300)
VARIANTS = ("S/16", "B/16", "L/16")
CONFIG = "../../configs/vit.py"


def vit_config(arg: str):
  """configs/vit.py's config, for its batch size and epoch constants (one home for each)."""
  module = args.load_beside(__file__, CONFIG)
  return module, module.get_config(arg)


def get_sweep():
  runs = []
  for variant in VARIANTS:
    arg = f"dataset=imagenet2012,variant={variant}"
    module, config = vit_config(arg)
    for epochs in EPOCHS:
      steps = epochs * module.IMAGENET_TRAIN_EXAMPLES // config.batch_size
      # target_topology: the config's slice, which vit_jax.compile checks by default
      # (docs/pod.md, "Before you spend pod hours").
      runs.append(
          {"config": f"configs/vit.py:{arg}", "model.variant": variant, "total_steps": steps}
      )
  return ml_collections.ConfigDict(
      dict(
          config="configs/vit.py:dataset=imagenet2012",
          fixed={"eval_every": 5_000, "checkpoint_every": 2_000},
          runs=runs,
          name="{model.variant}-{total_steps}steps",
          metric="error",
          fits=("compute",),
      ),
      allow_dotted_keys=True,
  )
