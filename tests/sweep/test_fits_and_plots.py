"""fit.json from eval points (frontier, data and model axes) and the PNGs, on synthetic sweeps."""

import itertools
import json
import os

import numpy as np
import pytest

from vit_jax import errors
from vit_jax.sweep import fits
from vit_jax.sweep import plots
from vit_jax.sweep import spec

PARAMS = (1e5, 4e5, 1.6e6, 6.4e6, 2.56e7)
SIZES = (1000, 2000, 4000, 8000, 16000)


def synthetic_evals(sizes=SIZES, seed=0):
  """Eval rows as collect writes them: error falls with compute, saturating per model and data."""
  rng = np.random.default_rng(seed)
  rows = []
  for params, size in itertools.product(PARAMS, sizes):
    run = f"n{params:g}-d{size}"
    for step in (100, 200, 300, 400):
      seen = step * 32
      flops = 6 * params * seen
      error = 0.05 + 30 * flops**-0.25 + 20 / params**0.5 + 2 / size**0.5
      rows.append(
          {
              "run": run,
              "model": f"vit n{params:g}",
              "params": int(params),
              "train_examples": size,
              "step": step,
              "flops": flops,
              "error": error * np.exp(rng.normal(0, 0.005)),
              "final": step == 400,
          }
      )
  return rows


def sweep(fit_names=("compute", "data", "params")):
  return spec.expand({"config": "configs/vit.py", "fits": fit_names})


def test_fit_all_uses_the_frontier_and_the_largest_model_and_data():
  evals = synthetic_evals()
  result = fits.fit_all(sweep(), evals, samples=20)
  compute = result["fits"]["compute"]
  xs = [p["x"] for p in compute["points"]]
  ys = [p["y"] for p in compute["points"]]
  assert xs == sorted(xs) and ys == sorted(ys, reverse=True)  # a lower envelope
  every = sorted((r["flops"], r["error"]) for r in evals)
  assert all(
      min(e for f, e in every if f <= x) == pytest.approx(y) for x, y in zip(xs, ys)
  )  # nothing beats a frontier point at its compute
  data = result["fits"]["data"]
  assert [p["x"] for p in data["points"]] == list(SIZES)
  assert all(p["run"].startswith("n2.56e+07") for p in data["points"])  # the largest model
  model = result["fits"]["params"]
  assert [p["x"] for p in model["points"]] == [int(p) for p in PARAMS]
  assert all(p["run"].endswith("-d16000") for p in model["points"])  # the largest data
  assert compute["x_unit_name"].endswith("FLOPs") and compute["formula"].startswith("error = ")
  low, high = compute["ci95"]["b"]
  assert low <= compute["constants"]["b"] <= high


def test_a_requested_fit_with_too_few_points_names_itself():
  with pytest.raises(errors.DataError, match=r"fit 'data'.*3 distinct.*at least 5"):
    fits.fit_all(sweep(("compute", "data")), synthetic_evals(sizes=(1000, 4000, 16000)), samples=5)


def test_plots_are_written_beside_the_fit(tmp_path):
  evals = synthetic_evals()
  result = fits.fit_all(sweep(("compute", "data")), evals, samples=10)
  out = str(tmp_path)
  fits.write(result, out)
  assert json.load(open(os.path.join(out, fits.FIT_JSON)))["fits"]["compute"]["points"]
  paths = plots.plot_all(sweep(), evals, fits.read(out), out)
  assert sorted(os.path.basename(p) for p in paths) == ["compute.png", "data.png", "params.png"]
  for path in paths:
    with open(path, "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 10_000


def test_no_model_size_plot_when_one_model_has_the_largest_set(tmp_path):
  evals = [r for r in synthetic_evals() if r["train_examples"] < SIZES[-1] or r["params"] == 1e5]
  paths = plots.plot_all(sweep(("data",)), evals, None, str(tmp_path))
  # params.png would show one point: only the smallest model trained on the largest set
  assert sorted(os.path.basename(p) for p in paths) == ["compute.png", "data.png"]
