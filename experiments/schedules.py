"""Plots the learning-rate schedules the trainer offers, as `training/optimizer.py` computes them.

  python -m experiments.schedules --out=docs/images/schedules.png

Left: every schedule over one 10,000-step run (peak 1e-3, 1,000 warmup steps, cosine and linear to
10% of the peak, rsqrt with a timescale of 1,000, cooldowns over the last 2,000 steps). Right:
one rsqrt run cooled down at its end and branched at three earlier budgets
(`--config.branch_from`): each branch follows the long run until its own cooldown.
"""

import argparse

import matplotlib

matplotlib.use("Agg")  # files only, no display
# pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.pyplot as plt
import numpy as np

from vit_jax.config import defaults
from vit_jax.training import optimizer

TOTAL, WARMUP, COOLDOWN = 10_000, 1_000, 2_000


def schedule(total_steps: int, **settings):
  config = defaults.training_defaults().optimizer
  config.update(
      dict(lr=1e-3, warmup_steps=WARMUP, end_lr_ratio=0.1, rsqrt_timescale=1_000, **settings)
  )
  return optimizer.learning_rate_schedule(config, total_steps)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", default="docs/images/schedules.png")
  options = parser.parse_args()
  steps = np.arange(TOTAL + 1)
  shapes = {
      "cosine": dict(schedule="cosine"),
      "linear": dict(schedule="linear"),
      "rsqrt": dict(schedule="rsqrt"),
      "rsqrt + linear cooldown (big_vision)": dict(schedule="rsqrt", cooldown_steps=COOLDOWN),
      "wsd, linear decay": dict(schedule="wsd", cooldown_steps=COOLDOWN),
      "wsd, cosine decay": dict(schedule="wsd", cooldown_steps=COOLDOWN, cooldown_shape="cosine"),
      "wsd, 1-sqrt decay": dict(schedule="wsd", cooldown_steps=COOLDOWN, cooldown_shape="1-sqrt"),
  }
  figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
  for label, settings in shapes.items():
    left.plot(steps, schedule(TOTAL, **settings)(steps) * 1e3, label=label)
  left.set_title(f"One run of {TOTAL:,} steps")

  long_run = dict(schedule="rsqrt", cooldown_steps=COOLDOWN)
  right.plot(steps, schedule(TOTAL, **long_run)(steps) * 1e3, color="black", label="long run")
  for budget in (2_500, 5_000, 7_500):
    cooldown = budget // 5
    own = np.arange(budget - cooldown, budget + 1)
    rate = schedule(budget, schedule="rsqrt", cooldown_steps=cooldown)(own) * 1e3
    right.plot(own, rate, linestyle="--", label=f"branch at {budget - cooldown:,} to {budget:,}")
  right.set_title("rsqrt: one long run and cooldown branches (20% of each budget)")
  for axes in (left, right):
    axes.set_xlabel("training step")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
  left.set_ylabel("learning rate (x 1e-3)")
  figure.tight_layout()
  figure.savefig(options.out, dpi=110)
  print(f"wrote {options.out}")


if __name__ == "__main__":
  main()
