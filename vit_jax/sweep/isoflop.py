"""IsoFLOP profiles (Hoffmann et al. 2022, approach 2): per compute budget, the final loss of each
model size trained on that budget, a parabola in log10 N through them and its minimum N_opt; then
N_opt = G C^a across budgets, by least squares in log-log.

Intervals: a residual bootstrap. The parabolas' residuals, pooled over budgets and inflated by
sqrt(n / (n - p)) for the p constants fitted, are resampled onto the fitted losses; every parabola,
its minimum and the exponent are refit. That covers the scatter of the runs about their
parabolas (seed noise, and how far a parabola is from the profile), not a bias common to a whole
profile. A resample whose parabola for some budget opens downwards has no minimum and is counted
as failed.
"""

import dataclasses

import numpy as np

from vit_jax import errors

MIN_SIZES = 3  # a parabola has 3 constants; more sizes leave residuals to judge it by
MIN_BUDGETS = 2


@dataclasses.dataclass
class Profile:
  budget_flops: float
  log_n: np.ndarray  # log10 parameters, one per run
  loss: np.ndarray
  runs: list[str]


def parabola(log_n, loss) -> np.ndarray:
  """(c0, c1, c2) of loss = c0 + c1 x + c2 x^2, x = log10 N, by least squares."""
  return np.polynomial.polynomial.polyfit(np.asarray(log_n), np.asarray(loss), 2)


def minimum(coeffs) -> tuple[float, float] | None:
  """(log10 N_opt, loss there) of an upward-opening parabola; None if it has no minimum."""
  c0, c1, c2 = coeffs
  if c2 <= 0:
    return None
  x = -c1 / (2 * c2)
  return float(x), float(c0 + c1 * x + c2 * x * x)


def power_law(budgets, log_n_opt) -> tuple[float, float]:
  """(a, log10 G) of N_opt = G C^a, least squares in log10."""
  a, log_g = np.polyfit(np.log10(np.asarray(budgets, np.float64)), np.asarray(log_n_opt), 1)
  return float(a), float(log_g)


def profiles(rows: list[dict], metric: str) -> list[Profile]:
  """Final evals (evals.csv rows) grouped by `budget_flops`, smallest budget first."""
  by_budget = {}
  for row in rows:
    if row.get("budget_flops") and row.get("params") and row.get(metric) is not None:
      by_budget.setdefault(row["budget_flops"], []).append(row)
  out = []
  for budget in sorted(by_budget):
    members = sorted(by_budget[budget], key=lambda r: r["params"])
    out.append(
        Profile(
            budget,
            np.log10([r["params"] for r in members]),
            np.array([r[metric] for r in members], np.float64),
            [r["run"] for r in members],
        )
    )
  return out


def _check(found: list[Profile]) -> None:
  small = [p for p in found if len(np.unique(p.log_n)) < MIN_SIZES]
  if small:
    raise errors.DataError(
        f"isoflop fit: budget(s) {', '.join(f'{p.budget_flops:.3g}' for p in small)} FLOPs have "
        f"fewer than {MIN_SIZES} finished model sizes; a parabola needs {MIN_SIZES}."
    )
  if len(found) < MIN_BUDGETS:
    raise errors.DataError(
        f"isoflop fit: {len(found)} compute budget(s) with finished runs; N_opt = G C^a needs at "
        f"least {MIN_BUDGETS}. Runs need a `budget_flops` in the sweep file "
        "(experiments/sweeps/gpt_isoflop_cpu.py)."
    )


def fit(found: list[Profile], *, samples: int = 200, seed: int = 0) -> dict:
  """Each profile's parabola and minimum, the exponent a, and their 95% bootstrap intervals."""
  _check(found)
  coeffs = [parabola(p.log_n, p.loss) for p in found]
  minima = [minimum(c) for c in coeffs]
  downward = [p.budget_flops for p, m in zip(found, minima) if m is None]
  if downward:
    raise errors.DataError(
        "isoflop fit: the loss-vs-size parabola of budget(s) "
        f"{', '.join(f'{b:.3g}' for b in downward)} FLOPs opens downwards (no minimum): the "
        "sizes do not bracket that budget's optimum. Add smaller and larger models to it."
    )
  a, log_g = power_law([p.budget_flops for p in found], [m[0] for m in minima])

  fitted = [np.polynomial.polynomial.polyval(p.log_n, c) for p, c in zip(found, coeffs)]
  residuals = np.concatenate([p.loss - f for p, f in zip(found, fitted)])
  dof = len(residuals) - 3 * len(found)
  residuals = residuals * np.sqrt(len(residuals) / dof) if dof > 0 else residuals
  rng = np.random.default_rng(seed)
  draws, failed = [], 0
  for _ in range(samples):
    redo = [
        minimum(parabola(p.log_n, f + rng.choice(residuals, len(f)))) for p, f in zip(found, fitted)
    ]
    if any(m is None for m in redo):
      failed += 1
      continue
    a_s, log_g_s = power_law([p.budget_flops for p in found], [m[0] for m in redo])
    draws.append([a_s, log_g_s, *(m[0] for m in redo), *(m[1] for m in redo)])
  if not draws:
    raise errors.DataError("isoflop bootstrap: no resample had a minimum in every profile.")
  low, high = np.percentile(np.array(draws), [2.5, 97.5], axis=0)
  k = len(found)
  return {
      "a": a,
      "G": 10**log_g,
      "ci95": {"a": [low[0], high[0]], "G": [10 ** low[1], 10 ** high[1]]},
      "bootstrap": "residuals",
      "bootstrap_samples": samples,
      "bootstrap_failed": failed,
      "budgets": [
          {
              "budget_flops": p.budget_flops,
              "parabola": [float(c) for c in coeff],  # c0 + c1 x + c2 x^2, x = log10 N
              "N_opt": 10 ** m[0],
              "N_opt_ci95": [10 ** low[2 + i], 10 ** high[2 + i]],
              "loss_opt": m[1],
              "loss_opt_ci95": [low[2 + k + i], high[2 + k + i]],
              "interior": bool(p.log_n.min() <= m[0] <= p.log_n.max()),
              "points": [
                  {"run": run, "N": 10**x, "y": float(y)}
                  for run, x, y in zip(p.runs, p.log_n, p.loss)
              ],
          }
          for i, (p, coeff, m) in enumerate(zip(found, coeffs, minima))
      ],
  }
