"""ImageNet-21k pretraining: ViT S/16, B/16, L/16 x 30, 90 and 300 epochs (not run here).

The 30- and 300-epoch budgets are AugReg's (Steiner et al., "How to train your ViT?", 2021; its
checkpoint index names the runs' data "i21k_30" and "i21k" (300 epochs), vision_transformer's
vit_jax/checkpoint.py lines 259-260, and big_vision's vit_i21k.py calls its augmentation choice
"a good average between 30ep and 300ep"); 90 epochs is a midpoint on the compute axis. Print the
commands for a queue:

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

Metric: prec@1 on the held-out full[:25600], the top-1 class counted right when it is any of the
image's labels (big_vision's classification evaluator, evaluators/classification.py:47-51, which
vit_i21k.py's evals use); the sweep's `prec1_error` is 1 - eval/prec@1.

Expected (published; not reproduced here), for this recipe only:
- Upstream, 30 and 300 epochs: the AugReg runs are released with their ImageNet-21k accuracy on
  held-out images (gs://vit_models/augreg/index.csv, rows `ds` "i21k_30" and "i21k" with this
  size's aug, do 0.0, sd 0.0; columns `final_val` and `final_test`, described by get_augreg_df in
  vision_transformer's vit_jax/checkpoint.py, lines 241-276).
- ImageNet-1k after fine-tuning at 384 px, 300 epochs: the checkpoints of the AugReg paper's
  Table 3, column i21k_300, which vision_transformer's README lists as those "that have the best
  pre-training metrics" (the "recommended" table): S/16 83.73%
  (S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03), B/16 85.49% (aug_medium1-wd_0.1), L/16 85.59%
  (aug_strong1-wd_0.1). Being the best of AugReg's grid, they are the recipe family's best rather
  than this exact setting's: vit_i21k.py picks light2 for B/16 and medium2 for L/16, and one
  weight decay (1e-4) for every size.
- 90 epochs: no published figure for this recipe. The ViT paper's 90-epoch ImageNet-21k
  checkpoints (vision_transformer README, "replicated" table: B/16 84.53%, L/16 84.47% on
  ImageNet at 384 px) used another recipe (ViT paper, Table 3, the training hyperparameters:
  linear decay, weight decay 0.03, dropout 0.1; no RandAugment or mixup) and are no target for
  these runs.
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
          metric="prec1_error",
          fits=("compute",),
      ),
      allow_dotted_keys=True,
  )
