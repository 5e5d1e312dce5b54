"""Plots one sweep's budgets trained two ways side by side: a schedule per budget, and one long run
per model with cooldown branches (the sweep's budgets axis).

  python -m experiments.budget_compare --per_budget=experiments/results/gpt_isoflop_cpu \\
      --branches=experiments/results/gpt_isoflop_cooldown_cpu --metric=bits_per_char \\
      --out=experiments/results/gpt_isoflop_cooldown_cpu

Reads the two `runs.csv` that `python -m vit_jax.sweep collect` wrote; the runs must share their
names (the same models and budgets). Writes budget_compare.png (each run's final metric against
its training compute, one colour per model, per-budget runs solid and branches dashed) and
budget_compare.json: each sweep's cost (the FLOPs its runs trained themselves, `own_flops`; a run
with no such column trained all of its own) and the final metric per run, both ways.
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")  # files only, no display
# pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.pyplot as plt

from vit_jax import errors
from vit_jax.sweep import collect

LABELS = {
    "bits_per_char": "final eval loss (bits per character)",
    "error": "final eval error",
    "loss": "final eval loss",
}


def cost(rows: list[dict]) -> float:
  """FLOPs the sweep's runs trained themselves."""
  return sum(r["own_flops"] if r.get("own_flops") is not None else r["flops"] for r in rows)


def compare(per_budget: list[dict], branches: list[dict], metric: str) -> dict:
  ours = {r["run"]: r for r in branches}
  missing = sorted({r["run"] for r in per_budget} ^ set(ours))
  if missing:
    raise errors.DataError(
        f"the sweeps' runs differ ({', '.join(missing[:4])}); compare two sweeps of the same runs."
    )
  key = f"final_{metric}"
  runs = {
      r["run"]: {
          "model": r["model"],
          "flops": r["flops"],
          "per_budget": r[key],
          "branch": ours[r["run"]][key],
          "branched_at": ours[r["run"]].get("branched_at"),
      }
      for r in per_budget
  }
  return {
      "metric": metric,
      "cost_flops": {"per_budget": cost(per_budget), "branches": cost(branches)},
      "cost_ratio": cost(branches) / cost(per_budget),
      "runs": runs,
  }


def plot(result: dict, path: str) -> None:
  figure, axes = plt.subplots(figsize=(11, 5.5))
  models = sorted({r["model"] for r in result["runs"].values()}, key=lambda m: (len(m), m))
  colours = plt.cm.viridis([i / max(len(models) - 1, 1) for i in range(len(models))])
  for model, colour in zip(models, colours):
    points = sorted(
        (r["flops"], r["per_budget"], r["branch"])
        for r in result["runs"].values()
        if r["model"] == model
    )
    flops = [p[0] for p in points]
    axes.plot(
        flops, [p[1] for p in points], "o-", color=colour, label=f"{model}: schedule per budget"
    )
    axes.plot(
        flops, [p[2] for p in points], "s--", color=colour, label=f"{model}: cooldown branches"
    )
  ratio, per_budget = result["cost_ratio"], result["cost_flops"]["per_budget"]
  axes.set_title(
      f"Each budget trained alone (solid) or branched from one run per model (dashed)\n"
      f"branches cost {ratio:.0%} of the per-budget runs' {per_budget:.3g} FLOPs",
      fontsize=10,
  )
  axes.set_xscale("log")
  axes.set_xlabel("training compute of the run (FLOPs)")
  axes.set_ylabel(LABELS.get(result["metric"], result["metric"]))
  axes.grid(alpha=0.3, which="both")
  axes.legend(fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
  figure.tight_layout()
  figure.savefig(path, dpi=110)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument(
      "--per_budget", required=True, help="collect's output of the per-budget sweep"
  )
  parser.add_argument("--branches", required=True, help="collect's output of the branch sweep")
  parser.add_argument("--metric", default="error", choices=tuple(collect.METRIC_KEYS))
  parser.add_argument("--out", required=True)
  options = parser.parse_args()
  with errors.exit_on_user_error():
    result = compare(
        collect.read_csv(os.path.join(options.per_budget, collect.RUNS_CSV)),
        collect.read_csv(os.path.join(options.branches, collect.RUNS_CSV)),
        options.metric,
    )
  os.makedirs(options.out, exist_ok=True)
  plot(result, os.path.join(options.out, "budget_compare.png"))
  with open(os.path.join(options.out, "budget_compare.json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
  print(f"branches cost {result['cost_ratio']:.1%} of the per-budget runs; wrote {options.out}")


if __name__ == "__main__":
  main()
