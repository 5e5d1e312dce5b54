"""The ViT budgets sweep (vit_budgets_cosine_cpu.py: the same five models, budgets and settings)
read off one run per model: big_vision's reciprocal-square-root schedule (the scaling-law recipe
of Zhai et al. 2022, big_vision configs/proj/scaling_laws/train_vit_g.py) to the largest budget
with a linear cooldown over its last 20%, and a cooldown branch of it for each smaller budget, at
80% of the budget's steps (the sweep's budgets axis: vit_jax/sweep/spec.py). Runs on 2 CPU cores:

  python -m vit_jax.sweep all experiments/sweeps/vit_budgets_cooldown_cpu.py \\
      --root=workdirs/vit_budgets_cooldown --out=experiments/results/vit_budgets_cooldown_cpu

Measured beside the cosine sweep: experiments/results/vit_budgets_cooldown_cpu/README.md.
"""

import ml_collections

from vit_jax.config import args

cosine = args.load_beside(__file__, "vit_budgets_cosine_cpu.py")
FIXED = {
    **cosine.FIXED,
    "optimizer.schedule": "rsqrt",
    "optimizer.rsqrt_timescale": 25,  # the warmup's length, as train_vit_g.py sets both to 10k
    "optimizer.cooldown_shape": "linear",  # big_vision's cooldown
}


def get_sweep():
  runs = [
      {
          **cosine.shapes.vit(width, depth),
          "budgets": [cosine.budget_settings(steps) for steps in cosine.BUDGET_STEPS],
      }
      for width, depth in cosine.shapes.MODELS
  ]
  return ml_collections.ConfigDict(
      dict(cosine.SHARED, fixed=FIXED, runs=runs, cooldown_fraction=0.2), allow_dotted_keys=True
  )
