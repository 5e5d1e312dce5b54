"""The data axis at a fixed number of epochs: tiny ViTs on subsets of `synthetic_shapes`, each
trained for the same number of epochs of its own subset, so that a small subset is trained to
convergence rather than stopped where a larger one would be.

  python -m vit_jax.sweep all experiments/sweeps/vit_shapes_data_cpu.py \
      --root=workdirs/vit_shapes_data --out=experiments/results/vit_shapes_data_cpu

Runs: three ViT sizes with 8x8 patches (widths 32, 64, 96; the smallest, a middle and the largest
model of experiments/sweeps/vit_shapes_cpu.py). The largest trains on seven subsets, 781 to all
50,000 training images (64x), the other two on the six from 781 to 25,000 (32x). Each run takes
EPOCHS passes over its subset, and at least MIN_STEPS steps: a subset of a few hundred images
would otherwise stop inside the warmup, long before it is fitted. The training recipe is
vit_shapes_cpu.py's (AdamW, cosine, flips only, no RandAugment or mixup).

The fit over data uses each run's final eval (fits.py: "best final"), not its best: with a fixed
budget and no held-out split to pick a step on, the final eval is the reading that does not
choose on the test images. runs.csv also records each run's best eval. Every run is evaluated
EVALS_PER_RUN times on the first 5,000 test images (standard error about 0.6 points).

Measured: experiments/results/vit_shapes_data_cpu/README.md. Larger models are better on every
subset, but 8 epochs is convergence only up to about 1,562 images: the larger subsets are
compute-bound, and the data fit's exponent is not determined.
"""

import ml_collections

from vit_jax.config import args
from vit_jax.sweep import spec

MODELS = ((32, 2), (64, 3), (96, 4))  # (width, depth); heads of 16 channels
SPLIT_SIZE = 50_000  # synthetic_shapes' train split
LARGEST_SIZES = (781, 1_562, 3_125, 6_250, 12_500, 25_000, 50_000)  # 1/64 .. all
OTHER_SIZES = LARGEST_SIZES[:-1]  # 1/64 .. 1/2
# The same number of epochs for every model: a smaller model given more epochs than a larger one
# wins on the large subsets by its extra steps, not its size
# (experiments/results/vit_shapes_data_cpu/README.md).
EPOCHS = 8
MIN_STEPS = 400
EVALS_PER_RUN = 8


def schedule(examples: int, epochs: int, batch_size: int) -> dict:
  """`epochs` over `examples` (at least MIN_STEPS steps), evaluated EVALS_PER_RUN times."""
  steps = spec.steps_for_epochs(epochs, examples, batch_size, min_steps=MIN_STEPS)
  every = -(-steps // EVALS_PER_RUN)  # the trainer also evaluates the last step
  return {
      "train_split": "train" if examples == SPLIT_SIZE else f"train[:{examples}]",
      "total_steps": steps,
      "eval_every": every,
      "log_every": every,
      "checkpoint_every": 2 * every,
  }


def get_sweep():
  scaling = args.load_beside(__file__, "vit_shapes_cpu.py")
  # The scaling sweep's recipe, its step counts replaced by each run's own.
  steps = ("total_steps", "eval_every", "log_every", "checkpoint_every")
  training = {k: v for k, v in scaling.SHAPES_TRAINING.items() if k not in steps}
  runs = []
  for width, depth in MODELS:
    sizes = LARGEST_SIZES if (width, depth) == MODELS[-1] else OTHER_SIZES
    runs += [
        {**scaling.vit(width, depth), **schedule(n, EPOCHS, training["batch_size"])} for n in sizes
    ]
  return ml_collections.ConfigDict(
      dict(
          config="configs/vit.py:dataset=synthetic_shapes",
          fixed=training,
          runs=runs,
          name="vit-w{model.width}d{model.depth}-{train_split}",
          metric="error",
          fits=("data",),
      ),
      allow_dotted_keys=True,
  )
