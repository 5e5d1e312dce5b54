"""Which points each power law is fit to, and fit.json.

compute  every eval point of every run (compute = training FLOPs up to that point), reduced to
         its Pareto frontier: the lowest error reached at or below each compute. That is the
         envelope over runs of Zhai et al.; a run's intermediate evals join it where no other
         run did better with that compute (they are pessimistic, as the learning rate had not
         decayed, so the frontier is an upper bound on the best error).
data     the largest model (by parameters): its best final error at each training-set size.
params   the largest training set: the best final error of each model size.
"""

import json
import math
import os

import numpy as np

from vit_jax.sweep import powerlaw

FIT_JSON = "fit.json"
AXES = {  # fit -> (x column, symbol, unit base, axis label)
    "compute": ("flops", "C", "FLOPs", "training compute (FLOPs)"),
    "data": ("train_examples", "D", "examples", "training-set size (examples)"),
    "params": ("params", "N", "params", "model size (parameters)"),
}
METRIC_LABELS = {
    "error": "eval error (1 - accuracy)",
    "loss": "eval loss (nats per token)",
    "bits_per_char": "eval loss (bits per character)",
}


def points(fit_name: str, metric: str, evals: list[dict]) -> tuple[list[dict], str]:
  """(the rows the fit uses, a sentence saying which), from evals.csv rows."""
  usable = [r for r in evals if r.get(metric) is not None and r.get("flops") is not None]
  if fit_name == "compute":
    if not usable:
      return [], "no eval point with a metric and a FLOP count"
    keep = powerlaw.pareto_frontier([r["flops"] for r in usable], [r[metric] for r in usable])
    return [usable[i] for i in keep], "Pareto frontier of all eval points over compute"
  finals = [r for r in usable if r["final"] and r.get("params")]
  if fit_name == "data":
    finals = [r for r in finals if r.get("train_examples")]
    if not finals:
      return [], "no finished run with a counted training set"
    largest = max(r["params"] for r in finals)
    chosen, key = [r for r in finals if r["params"] == largest], "train_examples"
    what = f"best final {metric} per training-set size of the largest model ({largest:,} params)"
  else:  # runs without a counted training set (text) all count as the largest
    if not finals:
      return [], "no finished run with a parameter count"
    largest = max(r.get("train_examples") or 0 for r in finals)
    chosen = [r for r in finals if (r.get("train_examples") or 0) == largest]
    key, what = "params", f"best final {metric} per model size on the largest training set"
  best = {}
  for row in chosen:
    if row[key] not in best or row[metric] < best[row[key]][metric]:
      best[row[key]] = row
  return [best[k] for k in sorted(best)], what


def fit_all(sweep, evals: list[dict], *, samples: int = 200, seed: int = 0) -> dict:
  """Every fit the sweep asks for; a DataError (naming the fit) if one has too few points."""
  result = {"metric": sweep.metric, "metric_label": METRIC_LABELS[sweep.metric], "fits": {}}
  for name in sweep.fits:
    column, symbol, base, label = AXES[name]
    rows, what = points(name, sweep.metric, evals)
    x = np.array([r[column] for r in rows], np.float64)
    y = np.array([r[sweep.metric] for r in rows], np.float64)
    best = powerlaw.fit(x, y, what=f"fit {name!r} ({what})")
    intervals, method, failed = powerlaw.bootstrap(x, y, best, samples=samples, seed=seed)
    unit_label = powerlaw.unit_name(best.unit, base)
    result["fits"][name] = {
        "x": label,
        "points_from": what,
        "x_unit": best.unit,
        "x_unit_name": unit_label,
        "formula": f"{sweep.metric} = " + powerlaw.formula(best, symbol, unit_label),
        "constants": best.constants(),
        "ci95": intervals,
        "bootstrap": method,
        "bootstrap_samples": samples,
        "bootstrap_failed": failed,
        "rmse_log10": best.rmse_log10,
        "points": [
            {"run": r["run"], "step": r["step"], "x": r[column], "y": r[sweep.metric]} for r in rows
        ],
    }
  return result


def write(result: dict, out: str) -> str:
  path = os.path.join(out, FIT_JSON)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=2)
  return path


def read(out: str) -> dict | None:
  path = os.path.join(out, FIT_JSON)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def curve(fit_entry: dict, x_low: float, x_high: float, count: int = 200):
  """(x, y) of a fitted curve from fit.json, over [x_low, x_high] log-spaced."""
  x = np.logspace(math.log10(x_low), math.log10(x_high), count)
  c = fit_entry["constants"]
  return x, powerlaw.saturating(x / fit_entry["x_unit"], c["a"], c["b"], c["c"], c["d"])


def summary(result: dict) -> list[str]:
  """One line per fit: the formula and the exponent with its interval."""
  lines = []
  for name, entry in result["fits"].items():
    low, high = entry["ci95"]["b"]
    lines.append(
        f"{name}: {entry['formula']}; exponent b = {entry['constants']['b']:.3g} "
        f"(95% bootstrap interval {low:.3g} to {high:.3g}), {len(entry['points'])} points"
    )
  return lines
