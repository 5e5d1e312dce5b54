"""ImageNet-1k from scratch: ViT S/16, B/16, L/16 x 90, 150 and 300 epochs (not run here).

Ready for a pod, not for 2 CPU cores: the smallest run, ViT-S/16 for 90 epochs, sees as many
images as big_vision's plain S/16 baseline, about 7 hours on a TPU v3-8 (below). Print the
commands for a queue with

  python -m vit_jax.sweep run experiments/sweeps/vit_i1k_paper.py --root=/shared/sweeps/vit_i1k \
      --print_commands

then, once the runs are done, `collect`, `fit` and `plot` with the same --root.

Recipe: one for every size, so that the frontier's fit compares sizes and nothing else:
configs/vit.py:dataset=imagenet2012,variant=V,recipe=augreg, big_vision's AugReg recipe
(vit_i1k.py; Steiner et al., "How to train your ViT?", 2021), whose per-size augmentation gives
S/16, B/16 and L/16 the same "medium2" (vit_i1k.py lines 77-84): batch 4096, sigmoid
cross-entropy with head bias -6.9, cls token, pre-logits, learned position embeddings,
RandAugment(2, 15), mixup 0.5, Adam lr 1e-3, decoupled weight decay 1e-4, 10k warmup steps,
cosine, trained on train[:99%], evaluated on the validation split. Only the epochs vary here.
(S/16's default recipe, the plain baseline of vit_s16_i1k.py at batch 1024 with a softmax loss,
is another recipe: mixing it into one compute fit would fit the recipe change along with size.)

Expected (published; not reproduced here):
- 300 epochs, this recipe: the AugReg runs on ImageNet-1k are released with their accuracy
  on the validation split, the one evaluated here (gs://vit_models/augreg/index.csv, rows
  `ds == "i1k"` with aug "medium2", do 0.0, sd 0.0, column `final_test`; the columns are
  described by get_augreg_df in vision_transformer's vit_jax/checkpoint.py, lines 241-276).
  vit_i1k.py itself quotes no figure; it notes that dropout and stochastic depth, which it
  leaves out, "was shown to help with B/32, B/16, L/16 models in the paper (Figure 4)".
- 90 and 150 epochs: no published figure for this recipe.
- For scale, S/16 on its plain recipe (not this sweep): 76.5% top-1 after 90 epochs ("This
  should take 6-7h to finish 90ep on a TPU-v3-8 and reach 76.5%", vit_s16_i1k.py) and about 80%
  after 300 (Beyer et al. 2022, abstract).
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
    arg = f"dataset=imagenet2012,variant={variant},recipe=augreg"
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
          config="configs/vit.py:dataset=imagenet2012,recipe=augreg",
          fixed={"eval_every": 5_000, "checkpoint_every": 2_000},
          runs=runs,
          name="{model.variant}-{total_steps}steps",
          metric="error",
          fits=("compute",),
      ),
      allow_dotted_keys=True,
  )
