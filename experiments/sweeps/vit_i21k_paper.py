"""ImageNet-21k pretraining: ViT S/16, B/16, L/16 x 30, 90 and 300 epochs (not run here).

The step budgets are the published ones: 30 and 300 epochs are AugReg's (Steiner et al., "How to
train your ViT?", 2021; its released checkpoints are named `*-i21k-300ep-*`, and big_vision's
vit_i21k.py calls its augmentation choice "a good average between 30ep and 300ep"); 90 epochs is
the original ViT paper's (Dosovitskiy et al. 2021; "num_epochs=90" for the released ImageNet-21k
checkpoints, in google-research/vision_transformer issue #2). Print the commands for a queue:

  python -m vit_jax.sweep run experiments/sweeps/vit_i21k_paper.py --root=/shared/sweeps/vit_i21k \
      --print_commands

Data: ImageNet-21k is not in public TFDS (big_vision's vit_i21k.py says so too). Register a TFDS
builder named `imagenet21k` with a `full` split (big_vision's layout: the first 25,600 images
held out for testing, training on full[51200:]). Where its examples carry a `labels` feature (a
list of class ids), the sigmoid loss trains on those multi-hot targets, as big_vision does on
its internal copy; a single `label` trains one-hot.

Recipe: configs/vit.py:dataset=imagenet21k,variant=V, big_vision's AugReg pretraining
(vit_i21k.py): batch 4096, Adam lr 1e-3, decoupled weight decay 1e-4, 10k warmup steps, cosine,
gradient clipping at 1, sigmoid cross-entropy with head bias -10, global average pooling, learned
position embeddings, and the augmentation that config picks per size (S/16 "light1":
RandAugment(2, 0); B/16 "light2": RandAugment(2, 10) + mixup 0.2; L/16 "medium2":
RandAugment(2, 15) + mixup 0.5). Only the epochs vary here.

Expected (published; not reproduced here). The sweep measures upstream error on the held-out
ImageNet-21k images; the papers quote ImageNet-1k accuracy after fine-tuning at 384 px:
- after 300 epochs (AugReg, google-research/vision_transformer README, recommended checkpoints):
  S/16 83.73%, B/16 85.49%, L/16 85.59%;
- after 90 epochs (the ViT paper's checkpoints, same README, "replicated" table, dropout 0.0 /
  0.1): B/16 84.53% / 84.12%, L/16 84.47% / 85.05%.
"""

import ml_collections

from vit_jax.config import args

EPOCHS = (30, 90, 300)
VARIANTS = ("S/16", "B/16", "L/16")
CONFIG = "../../configs/vit.py"


def vit_config(arg: str):
  """configs/vit.py's config, for its batch size and epoch constants (one home for each)."""
  module = args.load_beside(__file__, CONFIG)
  return module, module.get_config(arg)


def get_sweep():
  runs = []
  for variant in VARIANTS:
    arg = f"dataset=imagenet21k,variant={variant}"
    module, config = vit_config(arg)
    for epochs in EPOCHS:
      steps = epochs * module.I21K_TRAIN // config.batch_size
      # target_topology: the config's slice, which vit_jax.compile checks by default
      # (docs/pod.md, "Before you spend pod hours").
      runs.append(
          {"config": f"configs/vit.py:{arg}", "model.variant": variant, "total_steps": steps}
      )
  return ml_collections.ConfigDict(
      dict(
          config="configs/vit.py:dataset=imagenet21k",
          runs=runs,
          name="{model.variant}-{total_steps}steps",
          metric="error",
          fits=("compute",),
      ),
      allow_dotted_keys=True,
  )
