"""The saturating power law fit: known constants recovered from noisy points, too few refused."""

import numpy as np
import pytest

from vit_jax import errors
from vit_jax.sweep import powerlaw

TRUE = {"a": 1.0, "b": 0.4, "c": 0.05, "d": 2.0}  # in units of 1e12 (TFLOPs)


def noisy_points(count=30, noise=0.01, seed=1):
  rng = np.random.default_rng(seed)
  x = np.logspace(12, 16, count)  # FLOPs
  y = powerlaw.saturating(x / 1e12, **TRUE) * np.exp(rng.normal(0.0, noise, count))
  return x, y


def test_fit_recovers_known_constants_within_stated_bounds():
  x, y = noisy_points()
  fit = powerlaw.fit(x, y)
  assert fit.unit == 1e12  # a power of 1000 at or below the median compute
  # 1% multiplicative noise on 30 points spanning four decades: the exponent to +-0.02, the
  # floor to +-0.003, a and d to 10% and 25%.
  assert abs(fit.b - TRUE["b"]) < 0.02
  assert abs(fit.c - TRUE["c"]) < 0.003
  assert abs(fit.a - TRUE["a"]) < 0.1
  assert abs(fit.d - TRUE["d"]) < 0.5
  assert fit.rmse_log10 < 0.01
  intervals, method, failed = powerlaw.bootstrap(x, y, fit, samples=40, seed=0)
  assert (method, failed) == ("pairs", 0)
  for name, (low, high) in intervals.items():
    assert low <= TRUE[name] <= high, (name, low, high)
    assert low <= getattr(fit, name) <= high
  assert intervals["b"][1] - intervals["b"][0] < 0.05  # the interval is informative


def test_few_points_bootstrap_their_residuals():
  x, y = noisy_points(count=6, noise=0.02)
  fit = powerlaw.fit(x, y)
  intervals, method, failed = powerlaw.bootstrap(x, y, fit, samples=30, seed=0)
  assert (method, failed) == ("residuals", 0)
  assert intervals["b"][0] < intervals["b"][1]  # the noise shows as a non-empty interval


def test_fit_ignores_where_the_points_start():
  x, y = noisy_points(noise=0.0)
  for scale in (1.0, 1e-9):  # the same law, x in other units
    fit = powerlaw.fit(x * scale, y)
    assert fit.b == pytest.approx(TRUE["b"], abs=1e-3)
    assert fit.predict(x[5] * scale) == pytest.approx(y[5], rel=1e-3)


@pytest.mark.parametrize("count", [1, 4])
def test_too_few_points_are_refused_with_a_user_error(count):
  x, y = noisy_points(count=count)
  with pytest.raises(errors.UserError, match="at least 5"):
    powerlaw.fit(x, y, what="fit 'compute'")


def test_repeated_x_counts_once():
  x, y = noisy_points(count=4)
  with pytest.raises(errors.DataError, match="4 distinct"):
    powerlaw.fit(np.concatenate([x, x]), np.concatenate([y, y]))


def test_nonpositive_error_is_refused():
  x, y = noisy_points(count=6)
  y[2] = 0.0
  with pytest.raises(errors.DataError, match="> 0"):
    powerlaw.fit(x, y)


def test_pareto_frontier_keeps_the_lower_envelope():
  x = [1, 2, 2, 3, 4, 5]
  y = [0.9, 0.7, 0.8, 0.75, 0.5, 0.6]
  assert list(powerlaw.pareto_frontier(x, y)) == [0, 1, 4]


def test_formula_and_unit_names():
  fit = powerlaw.Fit(a=0.5, b=0.3, c=0.04, d=0.2, unit=1e15, rmse_log10=0.0)
  assert powerlaw.formula(fit, "C", powerlaw.unit_name(1e15, "FLOPs")) == (
      "0.5 (C + 0.2)^-0.3 + 0.04, C in PFLOPs"
  )
  assert powerlaw.unit_name(1.0, "examples") == "examples"
  assert powerlaw.unit_for([3e4, 5e4, 1e5]) == 1e3
