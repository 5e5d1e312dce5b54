"""Tiny ViTs on `synthetic_shapes` (32 px, 10 classes, 50k train / 10k test, generated offline):
error vs compute, vs training-set size and vs model size, with saturating power-law fits.

  python -m vit_jax.sweep all experiments/sweeps/vit_shapes_cpu.py --root=workdirs/vit_shapes \
      --out=experiments/results/vit_shapes_cpu

Runs: five ViT sizes with 8x8 patches (16 tokens + cls), widths 32..96. The largest trains on five
training-set sizes spanning 16x (1/16 .. all of the 50k), the others on three (1/16, 1/4, all).
Every run takes the same 400 steps of batch 128 (51,200 examples, AdamW, cosine) and evaluates
every 100 steps on the first 5,000 test images, so each run adds four points on the compute axis.
The ResNet half of the ViT-vs-ResNet crossover (experiments/sweeps/crossover_cpu.py) trains with
exactly these settings. Measured wall time and results:
experiments/results/vit_shapes_cpu/README.md.
"""

import ml_collections

from vit_jax.sweep import spec

MODELS = ((32, 2), (48, 2), (64, 3), (80, 4), (96, 4))  # (width, depth); heads of 16 channels
ALL_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1)
FEW_FRACTIONS = (1 / 16, 1 / 4, 1)

# The training recipe both this sweep and the crossover use (no RandAugment or mixup: the data
# axis should show what more data does, not what augmentation can stand in for).
SHAPES_TRAINING = {
    "image_size": 32,
    "batch_size": 128,
    "total_steps": 400,
    "eval_every": 100,
    "log_every": 100,
    "checkpoint_every": 200,
    "eval_split": "test[:5000]",
    "optimizer.name": "adamw",
    "optimizer.schedule": "cosine",
    "optimizer.lr": 1e-3,
    "optimizer.weight_decay": 0.05,
    "optimizer.warmup_steps": 50,
    "augment.inception_crop": False,
    "augment.flip": True,
    "augment.randaugment_layers": 0,
    "augment.mixup_alpha": 0.0,
    "augment.label_smoothing": 0.0,
}


def vit(width: int, depth: int) -> dict:
  return {
      "model.variant": "Ti/8",
      "model.width": width,
      "model.depth": depth,
      "model.num_heads": width // 16,
      "model.mlp_dim": 2 * width,
      # GELU's exact (erf) form, as the results were measured: the sweep fixes its models
      # rather than follow the config's default (the tanh form).
      "model.activation": "gelu",
  }


def get_sweep():
  largest = MODELS[-1]
  runs = []
  for width, depth in MODELS:
    fractions = ALL_FRACTIONS if (width, depth) == largest else FEW_FRACTIONS
    runs += [{**vit(width, depth), "train_split": spec.train_slice(f)} for f in fractions]
  return ml_collections.ConfigDict(
      dict(
          config="configs/vit.py:dataset=synthetic_shapes",
          fixed=SHAPES_TRAINING,
          runs=runs,
          name="vit-w{model.width}d{model.depth}-{train_split}",
          metric="error",
          fits=("compute", "data", "params"),
      ),
      allow_dotted_keys=True,
  )
