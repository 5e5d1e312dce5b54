"""The GPT IsoFLOP sweep (gpt_isoflop_cpu.py: the same models, budgets and settings) trained as one
warmup-stable-decay run per model size plus cooldown branches (Hägele et al. 2024), instead of a
cosine schedule per budget.

Each model size trains once, to the largest budget it takes part in, at a constant learning rate
after the warmup, cooling down over the last 20% of its steps with the 1-sqrt shape (Hägele et
al.'s best); every smaller budget is a branch of that run at 80% of the budget's steps that cools
down the same way over the rest (the sweep's budgets axis: vit_jax/sweep/spec.py). Runs on 2 CPU
cores:

  python -m vit_jax.sweep all experiments/sweeps/gpt_isoflop_cooldown_cpu.py \\
      --root=workdirs/gpt_isoflop_cooldown --out=experiments/results/gpt_isoflop_cooldown_cpu

Measured beside the cosine sweep: experiments/results/gpt_isoflop_cooldown_cpu/README.md.
"""

import ml_collections

from vit_jax.config import args
from vit_jax.sweep import budget

cosine = args.load_beside(__file__, "gpt_isoflop_cpu.py")
FIXED = {
    **cosine.FIXED,
    "optimizer.schedule": "wsd",
    "optimizer.cooldown_shape": "1-sqrt",
}


def get_sweep():
  runs = []
  for w, width in enumerate(cosine.WIDTHS):
    model = {"model.width": width, "model.num_heads": max(1, width // 16)}
    budgets = []
    for i, budget_flops in enumerate(cosine.BUDGETS_FLOPS):
      if not i <= w < i + cosine.SIZES_PER_BUDGET:  # the cosine sweep's windows of sizes
        continue
      steps = budget.steps_for_budget(
          cosine.CONFIG,
          {**cosine.FIXED, **model},
          budget_flops,
          run=f"c{budget_flops:.3g}-w{width}",
      )
      every = max(1, steps // 4)
      budgets.append(
          {
              "total_steps": steps,
              "budget_flops": budget_flops,
              "eval_every": every,
              "log_every": every,
              "checkpoint_every": steps,
          }
      )
    runs.append({**model, "budgets": budgets})
  return ml_collections.ConfigDict(
      dict(
          config=cosine.CONFIG,
          fixed=FIXED,
          runs=runs,
          name="c{budget_flops:.3g}-w{model.width}",
          metric="bits_per_char",
          fits=("compute", "joint", "isoflop"),
          cooldown_fraction=0.2,
      ),
      allow_dotted_keys=True,
  )
