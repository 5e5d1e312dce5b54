"""DRAFT (not run yet): tiny ViTs on `synthetic_shapes` (32 px, 10 classes, 50k train / 10k
test, generated offline): error vs compute, and error vs training-set size per model size.

Needs the `synthetic_shapes` dataset and its configs/vit.py recipe (`dataset=synthetic_shapes`),
which are being added beside this sweep; the lead tunes the grid to the 30-minute CPU budget:

  python -m vit_jax.sweep all experiments/sweeps/vit_shapes_cpu.py --root=workdirs/vit_shapes \
      --out=experiments/results/vit_shapes_cpu

Axes: 4 model sizes (width x depth, heads of 16 channels, patch 4 -> 64 tokens) x 5 training
fractions spanning 16x (1/16 ... 1 of the 50k) x 2 step budgets = 40 runs. At ~30-45 s per run
on 2 CPU cores (start-up and compile included) that is 20-30 minutes; cut the longer budget or
the largest model first if it runs over. The compute fit uses the frontier of every eval point;
the data fit the largest model's best error per fraction (5 points, the minimum for 4 free
constants). A params fit would need a fifth model size.
"""

import ml_collections

from vit_jax.sweeps import spec

MODELS = ((32, 2), (48, 3), (64, 4), (96, 4))  # (width, depth)
FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1)
STEPS = (300, 900)


def get_sweep():
  return ml_collections.ConfigDict(
      dict(
          config="configs/vit.py:dataset=synthetic_shapes",
          fixed={"eval_every": 150, "checkpoint_every": 300},
          runs=[
              {
                  "model.width": w,
                  "model.depth": d,
                  "model.num_heads": w // 16,
                  "model.mlp_dim": 2 * w,
              }
              for w, d in MODELS
          ],
          grid={"train_split": [spec.train_slice(f) for f in FRACTIONS], "total_steps": STEPS},
          name="w{model.width}d{model.depth}-{train_split}-{total_steps}",
          metric="error",
          fits=("compute", "data"),
      ),
      allow_dotted_keys=True,
  )
