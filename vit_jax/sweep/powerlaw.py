"""The saturating power law of Zhai et al., "Scaling Vision Transformers" (2022):

    E(x) = a * (x + d)^(-b) + c

E an error (or loss), x compute, data or model size. c is the irreducible error the curve
saturates to at large x; d shifts small x, where the curve flattens towards a * d^(-b) + c.

x is divided by a unit (a power of 1000 near the points' median, e.g. PFLOPs) so the fit is well
conditioned and a and d are quoted in that unit. The fit minimizes the residuals of log E
(the points span decades, and a relative error weighs every decade alike) with scipy's bounded
trust-region least squares from a grid of starting points. Confidence intervals come from a
bootstrap: points resampled with replacement (or, for fewer than 10 points, the log residuals),
refit, percentile interval of each constant.
"""

import dataclasses
import math

import numpy as np
from scipy import optimize

from vit_jax import errors

NAMES = ("a", "b", "c", "d")
MIN_POINTS = len(NAMES) + 1  # more points than free constants, or the fit says nothing
_PREFIXES = {0: "", 1: "k", 2: "M", 3: "G", 4: "T", 5: "P", 6: "E", 7: "Z", 8: "Y"}


@dataclasses.dataclass
class Fit:
  a: float
  b: float
  c: float
  d: float
  unit: float  # x is measured in multiples of this
  rmse_log10: float  # root mean square residual of log10 E

  def predict(self, x):
    return saturating(np.asarray(x, np.float64) / self.unit, self.a, self.b, self.c, self.d)

  def constants(self) -> dict:
    return {k: getattr(self, k) for k in NAMES}


def saturating(x, a, b, c, d):
  return a * (x + d) ** (-b) + c


def unit_for(x) -> float:
  """A power of 1000 at or below the median of x (1 for x < 1000)."""
  median = float(np.median(np.asarray(x, np.float64)))
  return 1000.0 ** max(0, min(8, math.floor(math.log10(median) / 3))) if median > 0 else 1.0


def unit_name(unit: float, base: str) -> str:
  """1e15, "FLOPs" -> "PFLOPs"."""
  return _PREFIXES.get(round(math.log10(unit) / 3), f"1e{math.log10(unit):.0f} ") + base


def _check(x, y, what: str):
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if x.shape != y.shape or x.ndim != 1:
    raise ValueError(f"x and y must be 1-D and alike, got {x.shape} and {y.shape}")
  if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0) and np.all(y > 0)):
    raise errors.DataError(f"{what}: every x and every error must be finite and > 0.")
  if len(np.unique(x)) < MIN_POINTS:
    raise errors.DataError(
        f"{what}: {len(np.unique(x))} distinct point(s); a * (x + d)^-b + c has {len(NAMES)} "
        f"free constants, so the fit needs at least {MIN_POINTS}. Add runs along this axis to "
        "the sweep, or drop this fit from its `fits`."
    )
  return x, y


def _solve(xs, y, starts):
  """Best bounded least-squares solution of log E over `starts` (scaled x)."""
  log_y = np.log(y)
  y_min = float(np.min(y))

  def residuals(p):
    return np.log(saturating(xs, *p)) - log_y

  def jacobian(p):
    a, b, c, d = p
    power = (xs + d) ** (-b)
    total = a * power + c
    return (
        np.stack(
            [power, -a * power * np.log(xs + d), np.ones_like(xs), -a * b * power / (xs + d)],
            axis=1,
        )
        / total[:, None]
    )

  lower = [1e-12, 1e-3, 0.0, 0.0]
  upper = [np.inf, 5.0, y_min * (1 - 1e-9), 100.0 * float(np.max(xs))]
  best = None
  for start in starts:
    start = np.clip(start, lower, [u if np.isfinite(u) else 1e30 for u in upper])
    try:
      result = optimize.least_squares(
          residuals, start, jac=jacobian, bounds=(lower, upper), method="trf"
      )
    except (ValueError, FloatingPointError):
      continue
    if np.all(np.isfinite(result.fun)) and (best is None or result.cost < best.cost):
      best = result
  return best


def _starts(xs, y):
  y_max, y_min, x_mid = float(np.max(y)), float(np.min(y)), float(np.median(xs))
  for b in (0.2, 0.6):
    for c in (0.0, 0.7 * y_min):
      for d in (0.0, x_mid):
        a = max(y_max - c, 1e-6) * (float(np.min(xs)) + d) ** b  # passes near the first point
        yield np.array([a, b, c, d])


def fit(x, y, *, unit: float | None = None, what: str = "fit") -> Fit:
  """The least-squares saturating power law through (x, y); a DataError if too few points."""
  x, y = _check(x, y, what)
  unit = unit_for(x) if unit is None else unit
  xs = x / unit
  best = _solve(xs, y, list(_starts(xs, y)))
  if best is None:
    raise errors.DataError(f"{what}: the power law fit did not converge from any start.")
  rmse = float(np.sqrt(np.mean(best.fun**2))) / math.log(10)
  return Fit(*(float(v) for v in best.x), unit=unit, rmse_log10=rmse)


def bootstrap(x, y, best: Fit, *, samples: int = 200, seed: int = 0, level: float = 0.95):
  """Percentile intervals of the constants: ({name: [low, high]}, method, failed resamples).

  With 2 x MIN_POINTS points or more, points are resampled with replacement ("pairs"). With
  fewer, most such resamples repeat points until fewer than MIN_POINTS distinct ones are left, so
  the fitted curve's log residuals are resampled instead ("residuals", x kept fixed).
  """
  x, y = _check(x, y, "bootstrap")
  xs = x / best.unit
  rng = np.random.default_rng(seed)
  method = "pairs" if len(np.unique(xs)) >= 2 * MIN_POINTS else "residuals"
  log_fit = np.log(best.predict(x))
  residuals = np.log(y) - log_fit
  fitted, failed = [], 0
  start = np.array([best.a, best.b, best.c, best.d])
  for _ in range(samples):
    pick = rng.integers(0, len(x), len(x))
    if method == "pairs":
      sample_x, sample_y = xs[pick], y[pick]
    else:
      sample_x, sample_y = xs, np.exp(log_fit + residuals[pick])
    if len(np.unique(sample_x)) < MIN_POINTS:  # a degenerate resample says nothing
      failed += 1
      continue
    result = _solve(sample_x, sample_y, [start, next(_starts(sample_x, sample_y))])
    if result is None:
      failed += 1
      continue
    fitted.append(result.x)
  if not fitted:
    raise errors.DataError("bootstrap: no resample could be fit; add points.")
  tail = 100 * (1 - level) / 2
  low, high = np.percentile(np.array(fitted), [tail, 100 - tail], axis=0)
  return {k: [float(lo), float(hi)] for k, lo, hi in zip(NAMES, low, high)}, method, failed


def pareto_frontier(x, y) -> np.ndarray:
  """Indices of the points no other point beats at equal or lower x, in increasing x."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  order = np.lexsort((y, x))
  keep, best = [], np.inf
  for i in order:
    if y[i] < best:
      keep.append(i)
      best = y[i]
  return np.array(keep, dtype=int)


def formula(f: Fit, symbol: str, unit_label: str, digits: int = 3) -> str:
  """E.g. "0.52 (C + 0.31)^-0.29 + 0.041, C in PFLOPs"."""
  g = lambda v: f"{v:.{digits}g}"
  return f"{g(f.a)} ({symbol} + {g(f.d)})^-{g(f.b)} + {g(f.c)}, {symbol} in {unit_label}"
