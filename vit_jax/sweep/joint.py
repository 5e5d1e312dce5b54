"""The joint scaling law of Hoffmann et al., "Training Compute-Optimal Large Language Models"
(2022), their approach 3, and the compute-optimal model size it implies:

    L(N, D) = E + A / N^alpha + B / D^beta

N the parameters, D the training examples seen, L the final eval loss. As in the paper (their
appendix D.2) the constants are fitted in log space, L = exp(LSE(a - alpha log N, b - beta log D,
e)) with A = e^a, B = e^b, E = e^e, minimizing the Huber loss (delta = 1e-3) of the residuals of
log L with L-BFGS from a grid of starts (alpha, beta in {0, 0.5, ..., 2}, e in {-1, -0.5, ...,
1}, a, b in {0, 5, ..., 25}). Two departures, for speed and safety: L-BFGS starts from 50 of the
grid's 4,500 points (for each of its 25 (alpha, beta) pairs the (a, b, e) with the lowest
objective, and the 25 best points overall), and the paper's unbounded L-BFGS becomes L-BFGS-B with
alpha and beta kept in [0, 10].

With training compute C = k N D (k training FLOPs per parameter per example, ~6 per token for a
transformer), minimizing L at fixed C gives

    N*(C) = G (C / k)^a,  D*(C) = G^-1 (C / k)^b,  a = beta / (alpha + beta),
    b = alpha / (alpha + beta),  G = (alpha A / (beta B))^(1 / (alpha + beta)).

Intervals: a bootstrap over runs (resampled with replacement, refit), percentiles of every
constant and derived quantity.
"""

import dataclasses
import itertools
import math

import numpy as np
from scipy import optimize
import threadpoolctl

from vit_jax import errors

NAMES = ("E", "A", "B", "alpha", "beta")
MIN_POINTS = len(NAMES) + 1
HUBER_DELTA = 1e-3
EXPONENT_BOUNDS = (0.0, 10.0)
# The paper's grid of starts, (a, b, e, alpha, beta) with A = e^a, B = e^b, E = e^e: 4,500 starts.
GRID = np.array(
    list(
        itertools.product(
            np.arange(0, 30, 5.0),
            np.arange(0, 30, 5.0),
            np.arange(-1, 1.5, 0.5),
            np.arange(0, 2.5, 0.5),
            np.arange(0, 2.5, 0.5),
        )
    )
)
GRID_STARTS = 25  # starts per kind: the best per (alpha, beta) pair, and the best overall
BOOTSTRAP_STARTS = 5  # per resample: the full fit's constants and the best 4 grid starts


@dataclasses.dataclass
class Fit:
  E: float  # pylint: disable=invalid-name  (the paper's names)
  A: float  # pylint: disable=invalid-name
  B: float  # pylint: disable=invalid-name
  alpha: float
  beta: float
  huber: float  # the objective at the optimum: sum of Huber losses of log residuals
  rmse_log: float  # root mean square residual of ln L

  def constants(self) -> dict:
    return {k: getattr(self, k) for k in NAMES}

  def predict(self, n, d):
    return law(np.asarray(n, np.float64), np.asarray(d, np.float64), *self.constants().values())

  def exponents(self) -> dict:
    """a, b and G of the compute-optimal frontier."""
    return optimal_exponents(self.A, self.B, self.alpha, self.beta)

  def optimal(self, compute, k: float):
    """(N*(C), D*(C)) for training compute C (FLOPs) and k FLOPs per parameter per example."""
    return optimal_size(compute, k, self.A, self.B, self.alpha, self.beta)


def law(n, d, E, A, B, alpha, beta):  # pylint: disable=invalid-name
  return E + A / n**alpha + B / d**beta


def optimal_exponents(A, B, alpha, beta) -> dict:  # pylint: disable=invalid-name
  total = alpha + beta
  return {"a": beta / total, "b": alpha / total, "G": (alpha * A / (beta * B)) ** (1 / total)}


def optimal_size(compute, k, A, B, alpha, beta):  # pylint: disable=invalid-name
  e = optimal_exponents(A, B, alpha, beta)
  scaled = np.asarray(compute, np.float64) / k
  return e["G"] * scaled ** e["a"], scaled ** e["b"] / e["G"]


def _lse(terms):
  top = np.max(terms, axis=0)
  return top + np.log(np.sum(np.exp(terms - top), axis=0))


def _objective(theta, log_n, log_d, log_l):
  """Sum of Huber losses of LSE(a - alpha log N, b - beta log D, e) - log L, and its gradient,
  both over delta^2: the optimum is the same, and L-BFGS's tolerances (relative to max(|f|, 1))
  then act on a sum of order the point count rather than of order 1e-4."""
  a, b, e, alpha, beta = theta
  terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
  lse = _lse(terms)
  r = lse - log_l
  small = np.abs(r) <= HUBER_DELTA
  loss = np.where(small, 0.5 * r**2, HUBER_DELTA * (np.abs(r) - 0.5 * HUBER_DELTA))
  dloss = np.where(small, r, HUBER_DELTA * np.sign(r))
  weights = np.exp(terms - lse)  # softmax: d lse / d term
  grad = np.array(
      [
          np.sum(dloss * weights[0]),
          np.sum(dloss * weights[1]),
          np.sum(dloss * weights[2]),
          -np.sum(dloss * weights[0] * log_n),
          -np.sum(dloss * weights[1] * log_d),
      ]
  )
  return float(np.sum(loss)) / HUBER_DELTA**2, grad / HUBER_DELTA**2


def _grid_objective(log_n, log_d, log_l) -> np.ndarray:
  """The objective at every grid start at once (to rank them)."""
  a, b, e, alpha, beta = (GRID[:, i : i + 1] for i in range(5))
  terms = np.stack(
      [a - alpha * log_n, b - beta * log_d, np.broadcast_to(e, (len(GRID), len(log_n)))]
  )
  r = np.abs(_lse(terms) - log_l)
  huber = np.where(r <= HUBER_DELTA, 0.5 * r**2, HUBER_DELTA * (r - 0.5 * HUBER_DELTA))
  return huber.sum(axis=1)


def _minimize(starts, log_n, log_d, log_l):
  bounds = [(None, None)] * 3 + [EXPONENT_BOUNDS] * 2
  best = None
  # One BLAS thread: L-BFGS-B's tiny vector updates go 20x slower when OpenBLAS wakes its
  # threads for each one (measured on 2 shared CPU cores).
  with threadpoolctl.threadpool_limits(1, user_api="blas"):
    results = [_minimize_from(start, bounds, log_n, log_d, log_l) for start in starts]
  for result in results:
    if np.isfinite(result.fun) and (best is None or result.fun < best.fun):
      best = result
  return best


def _minimize_from(start, bounds, log_n, log_d, log_l):
  return optimize.minimize(
      _objective,
      start,
      args=(log_n, log_d, log_l),
      jac=True,
      method="L-BFGS-B",
      bounds=bounds,
      options={"ftol": 1e-12, "gtol": 1e-8, "maxiter": 1000},
  )


def _check(n, d, loss, what: str):
  n, d, loss = (np.asarray(v, np.float64) for v in (n, d, loss))
  if not n.shape == d.shape == loss.shape or n.ndim != 1:
    raise ValueError(f"N, D and L must be 1-D and alike, got {n.shape}, {d.shape}, {loss.shape}")
  if not all(np.all(np.isfinite(v)) and np.all(v > 0) for v in (n, d, loss)):
    raise errors.DataError(f"{what}: every N, D and loss must be finite and > 0.")
  distinct = len(set(zip(n.tolist(), d.tolist())))
  if distinct < MIN_POINTS:
    raise errors.DataError(
        f"{what}: {distinct} distinct (N, D) run(s); E + A / N^alpha + B / D^beta has "
        f"{len(NAMES)} free constants, so the fit needs at least {MIN_POINTS}. Add runs, or drop "
        "'joint' from the sweep's `fits`."
    )
  return n, d, loss


def _to_fit(result, log_n, log_d, log_l) -> Fit:
  a, b, e, alpha, beta = (float(v) for v in result.x)
  log_fit = _lse(np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)]))
  rmse = float(np.sqrt(np.mean((log_fit - log_l) ** 2)))
  huber = float(result.fun) * HUBER_DELTA**2
  return Fit(math.exp(e), math.exp(a), math.exp(b), alpha, beta, huber, rmse)


def _grid_starts(log_n, log_d, log_l, overall: int = GRID_STARTS) -> np.ndarray:
  """For each (alpha, beta) of the grid its best (a, b, e), then the `overall` best points."""
  objective = _grid_objective(log_n, log_d, log_l)
  order = np.argsort(objective)
  per_pair = {}
  for i in order:  # best first, so the first point seen of each pair is its best
    per_pair.setdefault((GRID[i, 3], GRID[i, 4]), i)
  picked = list(dict.fromkeys([*per_pair.values(), *order[:overall]]))
  return GRID[picked]


def fit(n, d, loss, *, what: str = "joint fit") -> Fit:
  """The Huber/L-BFGS fit from the grid's starts (`_grid_starts`)."""
  n, d, loss = _check(n, d, loss, what)
  log_n, log_d, log_l = np.log(n), np.log(d), np.log(loss)
  best = _minimize(_grid_starts(log_n, log_d, log_l), log_n, log_d, log_l)
  if best is None:
    raise errors.DataError(f"{what}: L-BFGS did not converge from any start.")
  return _to_fit(best, log_n, log_d, log_l)


def _derived(constants: dict, computes, k: float) -> dict:
  """a, b, G and N*, D*, L* at each of `computes`, from one set of constants."""
  out = optimal_exponents(constants["A"], constants["B"], constants["alpha"], constants["beta"])
  n_opt, d_opt = optimal_size(
      computes, k, constants["A"], constants["B"], constants["alpha"], constants["beta"]
  )
  loss_opt = law(n_opt, d_opt, *constants.values())
  for i in range(len(computes)):
    out[f"N_opt_{i}"], out[f"D_opt_{i}"], out[f"L_opt_{i}"] = n_opt[i], d_opt[i], loss_opt[i]
  return out


def bootstrap(n, d, loss, best: Fit, computes, k: float, *, samples: int = 200, seed: int = 0):
  """95% percentile intervals ({name: [low, high]}) of the constants and of `_derived` (runs
  resampled with replacement; each refit from the full fit and the resample's best grid starts),
  and the number of resamples that could not be fitted (fewer distinct runs than MIN_POINTS)."""
  n, d, loss = _check(n, d, loss, "bootstrap")
  rng = np.random.default_rng(seed)
  # E = exp(e) with e unbounded: a floor fitted to 0 can underflow to 0.0 exactly, whose log the
  # restart takes as the smallest positive float's (the same fit: E adds nothing to the loss).
  floor = max(best.E, np.finfo(np.float64).tiny)
  full = np.array([math.log(best.A), math.log(best.B), math.log(floor), best.alpha, best.beta])
  rows, failed = [], 0
  for _ in range(samples):
    pick = rng.integers(0, len(n), len(n))
    if len(set(zip(n[pick].tolist(), d[pick].tolist()))) < MIN_POINTS:
      failed += 1
      continue
    log_n, log_d, log_l = np.log(n[pick]), np.log(d[pick]), np.log(loss[pick])
    ranked = GRID[np.argsort(_grid_objective(log_n, log_d, log_l))[: BOOTSTRAP_STARTS - 1]]
    result = _minimize([full, *ranked], log_n, log_d, log_l)
    if result is None:
      failed += 1
      continue
    constants = _to_fit(result, log_n, log_d, log_l).constants()
    rows.append({**constants, **_derived(constants, computes, k)})
  if not rows:
    raise errors.DataError("joint bootstrap: no resample could be fitted; add runs.")
  intervals = {}
  for key in rows[0]:
    values = np.array([r[key] for r in rows], np.float64)
    low, high = np.percentile(values[np.isfinite(values)], [2.5, 97.5])
    intervals[key] = [float(low), float(high)]
  return intervals, failed
