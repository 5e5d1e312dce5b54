"""Compute-optimal model size: the joint law L(N, D) = E + A / N^alpha + B / D^beta (approach 3),
IsoFLOP profiles (approach 2), run lengths from a compute budget, on synthetic points with known
answers."""

import dataclasses
import itertools
import os

import numpy as np
import pytest

from tests.sweep import helpers
from vit_jax import errors
from vit_jax.sweep import budget
from vit_jax.sweep import fits
from vit_jax.sweep import isoflop
from vit_jax.sweep import joint
from vit_jax.sweep import plots
from vit_jax.sweep import spec

# Chinchilla's published constants (Hoffmann et al. 2022, eq. 10), N in parameters, D in tokens.
TRUE = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
K = 6.0  # FLOPs per parameter per token


def law_points(n, d, noise: float, seed: int = 0):
  rng = np.random.default_rng(seed)
  return joint.law(n, d, **TRUE) * np.exp(rng.normal(0.0, noise, np.shape(n)))


def test_joint_fit_recovers_known_constants():
  # 36 runs over three decades of N and D (1e6 to 1e9 and 1e8 to 1e11), 0.2% noise on the loss.
  n, d = map(np.ravel, np.meshgrid(np.logspace(6, 9, 6), np.logspace(8, 11, 6)))
  f = joint.fit(n, d, law_points(n, d, noise=0.002))
  # Tolerances: exponents within 0.03, E within 3%, A and B within a factor 1.5 (A and alpha
  # trade off against each other, so A moves far more than alpha for the same fit).
  assert f.alpha == pytest.approx(TRUE["alpha"], abs=0.03)
  assert f.beta == pytest.approx(TRUE["beta"], abs=0.03)
  assert f.E == pytest.approx(TRUE["E"], rel=0.03)
  assert 1 / 1.5 < f.A / TRUE["A"] < 1.5 and 1 / 1.5 < f.B / TRUE["B"] < 1.5
  assert f.rmse_log < 0.004  # about the noise put in


def test_joint_bootstrap_intervals_cover_every_constant_and_the_exponent():
  n, d = map(np.ravel, np.meshgrid(np.logspace(6, 9, 5), np.logspace(8, 11, 4)))
  loss = law_points(n, d, noise=0.002, seed=1)
  best = joint.fit(n, d, loss)
  computes = np.array([1e20, 1e22])
  intervals, failed = joint.bootstrap(n, d, loss, best, computes, K, samples=30, seed=0)
  assert failed == 0
  for name in joint.NAMES:
    low, high = intervals[name]
    assert low <= best.constants()[name] <= high
  true_a = TRUE["beta"] / (TRUE["alpha"] + TRUE["beta"])
  assert intervals["a"][0] < true_a < intervals["a"][1]
  assert intervals["N_opt_1"][0] < best.optimal(computes, K)[0][1] < intervals["N_opt_1"][1]


def test_the_bootstrap_restarts_from_a_floor_that_underflowed_to_zero():
  """A fit whose floor E ran to 0 (its log far below -700) has E == 0.0: the bootstrap still
  refits every resample."""
  n, d = map(np.ravel, np.meshgrid(np.logspace(6, 9, 5), np.logspace(8, 11, 4)))
  loss = joint.law(n, d, **{**TRUE, "E": 0.0})
  best = dataclasses.replace(joint.fit(n, d, loss), E=0.0)
  intervals, failed = joint.bootstrap(n, d, loss, best, np.array([1e20]), K, samples=10, seed=0)
  assert failed == 0 and intervals["E"][0] >= 0 and intervals["alpha"][0] > 0


def test_compute_optimal_size_matches_the_closed_form_and_a_brute_force_search():
  compute = np.array([1e18, 5.76e23])  # 5.76e23: Chinchilla's own budget
  n_opt, d_opt = joint.optimal_size(compute, K, **{k: TRUE[k] for k in ("A", "B", "alpha", "beta")})
  np.testing.assert_allclose(n_opt * d_opt, compute / K, rtol=1e-12)  # on the budget
  a = TRUE["beta"] / (TRUE["alpha"] + TRUE["beta"])
  g = (TRUE["alpha"] * TRUE["A"] / (TRUE["beta"] * TRUE["B"])) ** (
      1 / (TRUE["alpha"] + TRUE["beta"])
  )
  np.testing.assert_allclose(n_opt, g * (compute / K) ** a, rtol=1e-12)
  for c, n_star in zip(compute, n_opt):  # no size on the budget does better
    n = np.logspace(np.log10(n_star) - 2, np.log10(n_star) + 2, 40001)
    losses = joint.law(n, c / K / n, **TRUE)
    assert n[np.argmin(losses)] == pytest.approx(n_star, rel=1e-3)
  # Chinchilla's approach-3 estimate at its own budget: about 40B parameters (their Table 3).
  assert 3e10 < n_opt[1] < 5e10


def test_parabola_minimum_recovers_a_known_minimum():
  log_n = np.log10([1e3, 3e3, 1e4, 3e4, 1e5])
  loss = 3.1 + 0.4 * (log_n - 3.7) ** 2
  x, y = isoflop.minimum(isoflop.parabola(log_n, loss))
  assert x == pytest.approx(3.7, abs=1e-9) and y == pytest.approx(3.1, abs=1e-9)
  assert isoflop.minimum(isoflop.parabola(log_n, -loss)) is None  # opens downwards


def isoflop_rows(budgets=(1e18, 1e19, 1e20, 1e21), noise=0.001, seed=0):
  """Final-eval rows of an IsoFLOP sweep drawn from the joint law: 7 sizes per budget spaced
  0.2 decades around that budget's optimum, D = C / (K N)."""
  rng = np.random.default_rng(seed)
  rows = []
  for c in budgets:
    n_star, _ = joint.optimal_size(c, K, **{k: TRUE[k] for k in ("A", "B", "alpha", "beta")})
    for i, offset in enumerate(np.arange(-3, 4) * 0.2):
      n = float(n_star * 10**offset)
      d = c / (K * n)
      rows.append(
          {
              "run": f"c{c:.0e}-n{i}",
              "model": f"n{i}",
              "params": n,
              "examples_seen": d,
              "flops": c,
              "budget_flops": c,
              "step": 100,
              "final": True,
              "loss": float(joint.law(n, d, **TRUE) * np.exp(rng.normal(0, noise))),
          }
      )
  return rows


def test_isoflop_exponent_is_recovered_from_synthetic_profiles():
  result = isoflop.fit(isoflop.profiles(isoflop_rows(), "loss"), samples=100)
  true_a = TRUE["beta"] / (TRUE["alpha"] + TRUE["beta"])  # 0.452
  # A parabola in log N is only the profile's second-order approximation: within 0.02.
  assert result["a"] == pytest.approx(true_a, abs=0.02)
  assert result["ci95"]["a"][0] < result["a"] < result["ci95"]["a"][1]
  for entry in result["budgets"]:
    n_star, _ = joint.optimal_size(
        entry["budget_flops"], K, **{k: TRUE[k] for k in ("A", "B", "alpha", "beta")}
    )
    assert entry["N_opt"] == pytest.approx(n_star, rel=0.1) and entry["interior"]


def test_isoflop_refuses_profiles_without_a_minimum():
  rows = isoflop_rows(budgets=(1e18, 1e19))
  for row in rows:
    row["loss"] = -row["loss"] + 10  # every profile now peaks instead
  with pytest.raises(errors.DataError, match="opens downwards"):
    isoflop.fit(isoflop.profiles(rows, "loss"), samples=5)


def test_fit_json_puts_both_exponents_side_by_side_and_plots_them(tmp_path):
  sweep = spec.expand({"config": "configs/gpt.py", "metric": "loss", "fits": ("joint", "isoflop")})
  evals = isoflop_rows()
  result = fits.fit_all(sweep, evals, samples=20)
  both = result["optimal_size_exponent"]
  assert set(both) == {"isoflop (approach 2)", "joint (approach 3)"}
  joint_entry = result["fits"]["joint"]
  assert joint_entry["k_flops_per_param_example"] == pytest.approx(K)
  assert [p["C"] for p in joint_entry["optimal"]["at"]] == [1e18, 1e19, 1e20, 1e21]
  assert both["joint (approach 3)"]["a"] == pytest.approx(0.452, abs=0.02)
  lines = fits.summary(result)
  assert lines[-1].startswith("optimal-size exponent a (N_opt ~ C^a): isoflop (approach 2) 0.4")
  assert any(line.startswith("joint: N*(C) = G (C / k)^a with a = 0.45") for line in lines)
  fits.write(result, str(tmp_path))
  paths = plots.plot_all(sweep, evals, fits.read(str(tmp_path)), str(tmp_path))
  assert {"compute.png", "isoflop.png"} <= {os.path.basename(p) for p in paths}


def test_budget_flops_is_recorded_not_passed_to_the_run():
  sweep = spec.expand(
      {
          "config": "configs/gpt.py",
          "runs": [{"budget_flops": 1e12, "total_steps": 10}, {"budget_flops": 3e12}],
          "name": "c{budget_flops:.0e}",
      }
  )
  assert [r.name for r in sweep.runs] == ["c1e+12", "c3e+12"]
  assert [r.budget_flops for r in sweep.runs] == [1e12, 3e12]
  assert not any("budget" in flag for r in sweep.runs for flag in r.flags())
  with pytest.raises(errors.ConfigError, match="budget_flops=-1"):
    spec.expand({"config": "configs/gpt.py", "runs": [{"budget_flops": -1}]})


GPT = "configs/gpt.py:variant=pico"
W32 = {"model.width": 32, "model.depth": 2, "model.num_heads": 1, "tokenizer.vocab_size": 117}


def test_steps_for_budget_uses_the_trainers_flop_count():
  per_step, params = budget.model_cost(GPT, W32)
  # The char GPT width sweep's w32 run (experiments/results/gpt_width_cpu/runs.csv): 33,312
  # parameters and 329,593,651,200 training FLOPs over 600 steps, as its trainer recorded them.
  assert params == 33_312
  assert per_step == pytest.approx(329_593_651_200 / 600)
  assert budget.steps_for_budget(GPT, W32, 1e12, run="r") == round(1e12 / per_step)  # 1820


def test_a_budget_below_the_warmup_is_refused_in_one_line(tmp_path):
  sweep_file = tmp_path / "tiny_budget.py"
  sweep_file.write_text(
      "from vit_jax.sweep import budget\n"
      f"OVERRIDES = {dict(W32, **{'optimizer.warmup_steps': 20})!r}\n"
      "def get_sweep():\n"
      "  steps = budget.steps_for_budget(\n"
      f"      {GPT!r}, OVERRIDES, 1e10, run='c1e+10-w32')\n"
      f"  return {{'config': {GPT!r}, 'fixed': OVERRIDES, 'runs': [{{'total_steps': steps}}]}}\n"
  )
  root = tmp_path / "root"
  result = helpers.cli("all", sweep_file, f"--root={root}", timeout=300)
  assert result.returncode == 2, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr
  assert lines[0].startswith("error: run 'c1e+10-w32': a budget of 1e+10 FLOPs buys 18.2 steps")
  assert (
      "minimum of 20 (warmup)" in lines[0]
      and "smallest budget for this model is 1.1e+10" in lines[0]
  )
  assert not root.exists()


@pytest.mark.parametrize("fraction", [0.1, 0.6, 0.999])
def test_less_than_one_step_is_refused_even_without_warmup(fraction):
  per_step, _ = budget.model_cost(GPT, W32)
  overrides = dict(W32, **{"optimizer.warmup_steps": 0})
  with pytest.raises(errors.ConfigError, match=r"minimum of 1 \(warmup\)"):
    budget.steps_for_budget(GPT, overrides, fraction * per_step, run="r")
  assert budget.steps_for_budget(GPT, overrides, per_step, run="r") == 1


def test_the_isoflop_sweep_file_gives_every_run_its_budget():
  sweep = spec.load(os.path.join(helpers.ROOT, "experiments/sweeps/gpt_isoflop_cpu.py"))
  assert len(sweep.runs) >= 15 and len({r.budget_flops for r in sweep.runs}) >= 3
  for run in sweep.runs:
    overrides = dict(run.overrides)
    model = {k: v for k, v in overrides.items() if k != "total_steps"}
    per_step, _ = budget.model_cost(sweep.config, model)
    # Within half a step of the budget: the rounding, nothing more.
    assert abs(overrides["total_steps"] * per_step - run.budget_flops) <= 0.5 * per_step
  for c, group in itertools.groupby(sweep.runs, key=lambda r: r.budget_flops):
    assert len(list(group)) >= 5, c
