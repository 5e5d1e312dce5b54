"""Which points each fit uses, and fit.json.

compute  every eval point of every run (compute = training FLOPs up to that point), reduced to
         its Pareto frontier: the lowest error reached at or below each compute. That is the
         envelope over runs of Zhai et al.; a run's intermediate evals join it where no other
         run did better with that compute (they are pessimistic, as the learning rate had not
         decayed, so the frontier is an upper bound on the best error).
data     the largest model (by parameters): its best final error at each training-set size.
params   the largest training set: the best final error of each model size.
joint    the final eval of every finished run, at its parameters N and examples seen D
         (vit_jax/sweep/joint.py). Intermediate evals are left out: as in Hoffmann et al. each
         run's loss counts only at the end of its own schedule, where its learning rate has
         decayed; mid-run losses lie above the law (and would weigh long runs more).
isoflop  the final eval of every finished run with a `budget_flops`, by budget
         (vit_jax/sweep/isoflop.py).
With both joint and isoflop, fit.json's `optimal_size_exponent` puts their two estimates of a
(N_opt ~ C^a) side by side.
"""

import json
import math

import numpy as np

from vit_jax import errors
from vit_jax import storage
from vit_jax.sweep import isoflop
from vit_jax.sweep import joint
from vit_jax.sweep import powerlaw

FIT_JSON = "fit.json"
AXES = {  # fit -> (x column, symbol, unit base, axis label)
    "compute": ("flops", "C", "FLOPs", "training compute (FLOPs)"),
    "data": ("train_examples", "D", "examples", "training-set size (examples)"),
    "params": ("params", "N", "params", "model size (parameters)"),
}
METRIC_LABELS = {
    "error": "eval error (1 - accuracy)",
    "prec1_error": "eval error (1 - prec@1: top-1 among the labels)",
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
    if name == "joint":
      result["fits"][name] = joint_entry(sweep.metric, evals, samples=samples, seed=seed)
      continue
    if name == "isoflop":
      found = isoflop.profiles(_finals(evals, sweep.metric), sweep.metric)
      result["fits"][name] = {
          "x": "model size N (parameters), per compute budget C (FLOPs)",
          "points_from": "final eval of every finished run, grouped by its budget_flops",
          "formula": "N_opt = G C^a, C in FLOPs; per budget, a parabola of "
          f"{sweep.metric} in log10 N",
          **isoflop.fit(found, samples=samples, seed=seed),
      }
      continue
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
  if "joint" in result["fits"] and "isoflop" in result["fits"]:
    result["optimal_size_exponent"] = {
        "isoflop (approach 2)": {
            "a": result["fits"]["isoflop"]["a"],
            "ci95": result["fits"]["isoflop"]["ci95"]["a"],
        },
        "joint (approach 3)": {
            "a": result["fits"]["joint"]["optimal"]["a"],
            "ci95": result["fits"]["joint"]["optimal"]["ci95"]["a"],
        },
    }
  return result


def _finals(evals: list[dict], metric: str) -> list[dict]:
  return [
      r
      for r in evals
      if r["final"] and r.get(metric) is not None and r.get("params") and r.get("examples_seen")
  ]


def joint_entry(metric: str, evals: list[dict], *, samples: int = 200, seed: int = 0) -> dict:
  """fit.json's "joint": the law over every run's final eval, and N*(C), D*(C) from it."""
  rows = _finals(evals, metric)
  what = "joint fit (final evals of finished runs with parameters and examples seen)"
  if any(not r.get("flops") for r in rows):
    raise errors.DataError(f"{what}: a run has no FLOP count; k = FLOPs / (N D) needs one.")
  n = np.array([r["params"] for r in rows], np.float64)
  d = np.array([r["examples_seen"] for r in rows], np.float64)
  y = np.array([r[metric] for r in rows], np.float64)
  best = joint.fit(n, d, y, what=what)
  per_param_example = np.array([r["flops"] for r in rows]) / (n * d)
  k = float(np.median(per_param_example))
  budgets = sorted({r["budget_flops"] for r in rows if r.get("budget_flops")})
  flops = [r["flops"] for r in rows]
  computes = np.array(
      budgets or np.logspace(np.log10(min(flops)), np.log10(max(flops)), 3), np.float64
  )
  intervals, failed = joint.bootstrap(n, d, y, best, computes, k, samples=samples, seed=seed)
  n_opt, d_opt = best.optimal(computes, k)
  c = best.constants()
  g = lambda v: f"{v:.3g}"
  return {
      "x": "parameters N and training examples seen D",
      "points_from": "final eval of every finished run (intermediate evals left out)",
      "formula": (
          f"{metric} = {g(c['E'])} + {g(c['A'])} / N^{g(c['alpha'])} + "
          f"{g(c['B'])} / D^{g(c['beta'])}"
      ),
      "constants": c,
      "ci95": {k_: intervals[k_] for k_ in joint.NAMES},
      "k_flops_per_param_example": k,
      "k_range": [float(per_param_example.min()), float(per_param_example.max())],
      "optimal": {
          "formula": "N*(C) = G (C / k)^a, D*(C) = (C / k)^b / G, C in FLOPs",
          **best.exponents(),
          "ci95": {k_: intervals[k_] for k_ in ("a", "b", "G")},
          "at": [
              {
                  "C": float(cv),
                  "N_opt": float(n_opt[i]),
                  "N_opt_ci95": intervals[f"N_opt_{i}"],
                  "D_opt": float(d_opt[i]),
                  "D_opt_ci95": intervals[f"D_opt_{i}"],
                  "loss_opt": float(best.predict(n_opt[i], d_opt[i])),
                  "loss_opt_ci95": intervals[f"L_opt_{i}"],
              }
              for i, cv in enumerate(computes)
          ],
      },
      "huber": best.huber,
      "rmse_log": best.rmse_log,
      "bootstrap": "pairs (runs resampled)",
      "bootstrap_samples": samples,
      "bootstrap_failed": failed,
      "points": [
          {
              "run": r["run"],
              "N": r["params"],
              "D": r["examples_seen"],
              "C": r["flops"],
              "y": r[metric],
          }
          for r in rows
      ],
  }


def write(result: dict, out: str) -> str:
  path = storage.join(out, FIT_JSON)
  storage.write_text(path, json.dumps(result, indent=2))
  return path


def read(out: str) -> dict | None:
  path = storage.join(out, FIT_JSON)
  if not storage.isfile(path):
    return None
  return json.loads(storage.read_text(path))


def curve(fit_entry: dict, x_low: float, x_high: float, count: int = 200):
  """(x, y) of a fitted curve from fit.json, over [x_low, x_high] log-spaced."""
  x = np.logspace(math.log10(x_low), math.log10(x_high), count)
  c = fit_entry["constants"]
  return x, powerlaw.saturating(x / fit_entry["x_unit"], c["a"], c["b"], c["c"], c["d"])


def joint_curve(entry: dict, c_low: float, c_high: float, count: int = 200):
  """(C, L(N*(C), D*(C))): the joint fit's compute-optimal loss, over [c_low, c_high]."""
  compute = np.logspace(math.log10(c_low), math.log10(c_high), count)
  c = entry["constants"]
  n_opt, d_opt = joint.optimal_size(
      compute, entry["k_flops_per_param_example"], c["A"], c["B"], c["alpha"], c["beta"]
  )
  return compute, joint.law(n_opt, d_opt, *(c[k] for k in joint.NAMES))


def _interval(value: float, ci: list[float]) -> str:
  return f"{value:.3g} [{ci[0]:.3g}, {ci[1]:.3g}]"


def summary(result: dict) -> list[str]:
  """One line per fit (two for joint and isoflop): formulas, exponents and their intervals."""
  lines = []
  for name, entry in result["fits"].items():
    if name == "joint":
      c, ci, opt = entry["constants"], entry["ci95"], entry["optimal"]
      lines.append(
          f"joint: {entry['formula']}; 95% bootstrap intervals: "
          + ", ".join(f"{k} {_interval(c[k], ci[k])}" for k in joint.NAMES)
          + f"; {len(entry['points'])} runs"
      )
      at = "; ".join(
          f"C = {p['C']:.3g}: N* {_interval(p['N_opt'], p['N_opt_ci95'])}, "
          f"D* {_interval(p['D_opt'], p['D_opt_ci95'])}"
          for p in opt["at"]
      )
      lines.append(
          f"joint: N*(C) = G (C / k)^a with a = {_interval(opt['a'], opt['ci95']['a'])}, "
          f"k = {entry['k_flops_per_param_example']:.4g} FLOPs per parameter per example; {at}"
      )
      continue
    if name == "isoflop":
      lines.append(f"isoflop: N_opt = G C^a, a = {_interval(entry['a'], entry['ci95']['a'])}")
      lines.append(
          "isoflop: "
          + "; ".join(
              f"C = {b['budget_flops']:.3g}: N_opt {_interval(b['N_opt'], b['N_opt_ci95'])}"
              + ("" if b["interior"] else " (outside the sizes run)")
              for b in entry["budgets"]
          )
      )
      continue
    low, high = entry["ci95"]["b"]
    lines.append(
        f"{name}: {entry['formula']}; exponent b = {entry['constants']['b']:.3g} "
        f"(95% bootstrap interval {low:.3g} to {high:.3g}), {len(entry['points'])} points"
    )
  both = result.get("optimal_size_exponent")
  if both:
    lines.append(
        "optimal-size exponent a (N_opt ~ C^a): "
        + " vs ".join(f"{k} {_interval(v['a'], v['ci95'])}" for k, v in both.items())
    )
  return lines
