"""The CPU step benchmark against the JAX peers (benchmarks/cpu_steps.py) runs our rows end to end
at tiny sizes, and a folder that is no peer checkout is one error line before anything compiles.
The peers' own rows need their checkouts (BIG_VISION, NANODO), which CI does not have."""

import json
import re
import subprocess
import sys

import pytest

from tests import helpers


def run_module(*args, **env):
  return subprocess.run(
      [sys.executable, "-m", "benchmarks.cpu_steps", *args],
      env={**helpers.env(), **env},
      cwd=helpers.ROOT,
      capture_output=True,
      text=True,
      timeout=900,
  )


@pytest.mark.parametrize("variable", ["BIG_VISION", "NANODO"])
def test_a_folder_that_is_no_checkout_is_one_error_line(tmp_path, variable):
  done = run_module("--quick", **{variable: str(tmp_path)})
  assert done.returncode == 2
  assert done.stdout == ""
  errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
  assert errors == [
      f"error: {variable}={tmp_path} has no "
      + ("big_vision/models/vit.py" if variable == "BIG_VISION" else "nanodo/model.py")
      + "; give the root folder of a "
      + ("big_vision" if variable == "BIG_VISION" else "nanodo")
      + " checkout"
  ], done.stderr


@pytest.mark.slow
def test_quick_run_times_the_trainer_beside_its_bare_step():
  env = {"BIG_VISION": "", "NANODO": ""}
  done = run_module("--quick", "--rounds", "1", "--steps", "1", **env)
  assert done.returncode == 0, done.stderr[-3000:]
  rows = re.findall(
      r"^\| (ours, [^|]+) \| ([\d.]+) \| ([\d,.]+) \| ([\d,.]+) \| - \|$", done.stdout, re.M
  )
  names = [row[0] for row in rows]
  assert (
      names
      == [
          "ours, the trainer's step",
          "ours, the guard as a select (as on TPU)",
          "ours, without the non-finite guard",
          "ours, bare (loss, gradients, update)",
      ]
      * 2
  ), done.stdout
  assert all(float(ms) > 0 for _, ms, _, _ in rows)


def run_gpu_benchmark(module, *args):
  """A GPU benchmark's --quick smoke run on this CPU (no peer checkouts: our rows only)."""
  return subprocess.run(
      [sys.executable, "-m", f"benchmarks.{module}", "--quick", *args],
      env={**helpers.env(), "BIG_VISION": "", "NANODO": "", "NANOGPT": ""},
      cwd=helpers.ROOT,
      capture_output=True,
      text=True,
      timeout=1200,
  )


def check_gpu_benchmark_json(out, workloads):
  results = json.loads(out.read_text())
  assert set(results["workloads"]) == set(workloads)
  assert results["versions"]["jax"] and results["versions"]["flax"]
  for workload in results["workloads"].values():
    rows = {k: v for k, v in workload.items() if isinstance(v, dict)}
    assert list(rows) == ["ours, the recipe", "ours, XLA attention"]
    assert all(row["ms"] > 0 and 0 < row["mfu"] < 1.5 for row in rows.values())


def test_gpu_benchmark_quick_run_reports_step_time_and_mfu(tmp_path):
  """benchmarks/gpu_steps.py runs on any device: on a CPU its MFU is against a measured matmul,
  and the PyTorch peers, which need a CUDA device, are left out with a line."""
  out = tmp_path / "gpu_steps.json"
  done = run_gpu_benchmark(
      "gpu_steps", "--only", "gpt2", "--rounds", "1", "--steps", "1", "--json", str(out)
  )
  assert done.returncode == 0, done.stderr[-3000:]
  assert "gpt2: nanoGPT, torch.compile left out" in done.stdout
  check_gpu_benchmark_json(out, ["gpt2"])


@pytest.mark.slow
def test_gpu_benchmark_and_profile_quick_runs_cover_both_workloads(tmp_path):
  out = tmp_path / "gpu_steps.json"
  done = run_gpu_benchmark("gpu_steps", "--rounds", "1", "--steps", "1", "--json", str(out))
  assert done.returncode == 0, done.stderr[-3000:]
  check_gpu_benchmark_json(out, ["vit_b16", "gpt2"])
  profile = tmp_path / "gpu_profile.json"
  done = run_gpu_benchmark("gpu_profile", "--steps", "1", "--json", str(profile))
  assert done.returncode == 0, done.stderr[-3000:]
  summaries = json.loads(profile.read_text())
  assert set(summaries) == {"vit_b16", "gpt2"}
  for rows in summaries.values():
    assert rows["ours, the recipe"]["ms"] > 0  # a CPU has no GPU kernels: all of it is idle
