"""The ViT shapes sweep's five models (vit_shapes_cpu.py) on all of `synthetic_shapes`, each
trained to three budgets of 100, 200 and 400 steps with a cosine schedule per budget: a run per
(model, budget), 15 in all. The cooldown-branch sweep beside it (vit_budgets_cooldown_cpu.py)
reads the same 15 points off one rsqrt run per model. Runs on 2 CPU cores:

  python -m vit_jax.sweep all experiments/sweeps/vit_budgets_cosine_cpu.py \\
      --root=workdirs/vit_budgets_cosine --out=experiments/results/vit_budgets_cosine_cpu

Measured beside the cooldown sweep: experiments/results/vit_budgets_cooldown_cpu/README.md.
"""

import ml_collections

from vit_jax.config import args

shapes = args.load_beside(__file__, "vit_shapes_cpu.py")
BUDGET_STEPS = (100, 200, 400)
FIXED = {
    **shapes.SHAPES_TRAINING,
    "optimizer.warmup_steps": 25,  # a quarter of the smallest budget
    "checkpoint_every": 400,
}
del FIXED["total_steps"], FIXED["eval_every"], FIXED["log_every"]


def budget_settings(steps: int) -> dict:
  """A budget's length and its reporting: an eval at the end of each run (and one mid-run)."""
  return {"total_steps": steps, "eval_every": steps // 2, "log_every": steps // 2}


# What the two sweeps of the comparison share beside their runs and schedule.
SHARED = dict(
    config="configs/vit.py:dataset=synthetic_shapes",
    name="vit-w{model.width}d{model.depth}-s{total_steps}",
    metric="error",
    fits=("compute",),
)


def get_sweep():
  runs = [
      {**shapes.vit(width, depth), **budget_settings(steps)}
      for width, depth in shapes.MODELS
      for steps in BUDGET_STEPS
  ]
  return ml_collections.ConfigDict(dict(SHARED, fixed=FIXED, runs=runs), allow_dotted_keys=True)
