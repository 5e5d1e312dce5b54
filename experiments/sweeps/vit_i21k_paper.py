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
held out for testing, training on full[51200:]), or point DATASET at `folder:/path` with train/
and test/ class folders and set the two splits below accordingly.

Recipe, big_vision's AugReg pretraining (vit_i21k.py): batch 4096, Adam lr 1e-3, decoupled
weight decay 1e-4, 10k warmup steps, cosine, gradient clipping at 1, global average pooling,
learned position embeddings, head bias -10, and the augmentation that config picks per size
(S/16 "light1": RandAugment(2, 0); B/16 "light2": RandAugment(2, 10) + mixup 0.2; L/16
"medium2": RandAugment(2, 15) + mixup 0.5). One difference: AugReg trains with a sigmoid
cross-entropy, our trainer with softmax cross-entropy.

Expected (published; not reproduced here). The sweep measures upstream error on the held-out
ImageNet-21k images; the papers quote ImageNet-1k accuracy after fine-tuning at 384 px:
- after 300 epochs (AugReg, google-research/vision_transformer README, recommended checkpoints):
  S/16 83.73%, B/16 85.49%, L/16 85.59%;
- after 90 epochs (the ViT paper's checkpoints, same README, "replicated" table, dropout 0.0 /
  0.1): B/16 84.53% / 84.12%, L/16 84.47% / 85.05%.
"""

import ml_collections

DATASET, TRAIN_SPLIT, EVAL_SPLIT = "imagenet21k", "full[51200:]", "full[:25600]"
EPOCHS = (30, 90, 300)
# ~12.4M training images ("12.4M examples for training", vision_transformer issue #2); set it
# to your copy's count, it only sets the step budgets.
I21K_TRAIN = 12_400_000
BATCH = 4096
# Slices where `python -m vit_jax.compile` finds each run's step (batch 4096, bf16, splash
# attention, no remat) fits: README.md, "Before you spend pod hours", has the measured rows.
TOPOLOGY = {"S/16": "v5p-32", "B/16": "v5p-32", "L/16": "v5p-64"}
AUGMENT = {  # big_vision vit_i21k.py: RANDAUG_DEF / MIXUP_DEF of each size's setting
    "S/16": {"augment.randaugment_magnitude": 0, "augment.mixup_alpha": 0.0},
    "B/16": {"augment.randaugment_magnitude": 10, "augment.mixup_alpha": 0.2},
    "L/16": {"augment.randaugment_magnitude": 15, "augment.mixup_alpha": 0.5},
}


def get_sweep():
  return ml_collections.ConfigDict(
      dict(
          config="configs/vit.py:dataset=imagenet2012",
          fixed={
              "dataset": DATASET,
              "train_split": TRAIN_SPLIT,
              "eval_split": EVAL_SPLIT,
              "num_classes": 21843,
              "batch_size": BATCH,
              "model.classifier": "gap",
              "model.posemb": "learn",
              "model.head_bias_init": -10.0,
              "augment.randaugment_layers": 2,
              "optimizer.lr": 1e-3,
              "optimizer.weight_decay": 1e-4,
              "optimizer.decoupled_weight_decay": True,
              "optimizer.warmup_steps": 10_000,
              "optimizer.grad_clip_norm": 1.0,
              "eval_every": 10_000,
              "checkpoint_every": 5_000,
          },
          # target_topology: the slice vit_jax.compile checks by default (README.md, "Before you
          # spend pod hours").
          runs=[
              {"model.variant": v, "target_topology": TOPOLOGY[v], **aug}
              for v, aug in AUGMENT.items()
          ],
          grid={"total_steps": [e * I21K_TRAIN // BATCH for e in EPOCHS]},
          name="{model.variant}-{total_steps}steps",
          metric="error",
          fits=("compute",),
      ),
      allow_dotted_keys=True,
  )
