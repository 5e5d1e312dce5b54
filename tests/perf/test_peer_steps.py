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


@pytest.mark.slow
def test_gpu_benchmark_quick_run_reports_step_time_and_mfu(tmp_path):
  """benchmarks/gpu_steps.py runs on any device: on a CPU its MFU is against a measured matmul."""
  out = tmp_path / "gpu_steps.json"
  done = subprocess.run(
      [sys.executable, "-m", "benchmarks.gpu_steps", "--quick", "--rounds", "1", "--steps", "1"]
      + ["--json", str(out)],
      env={**helpers.env(), "BIG_VISION": "", "NANODO": ""},
      cwd=helpers.ROOT,
      capture_output=True,
      text=True,
      timeout=1200,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  results = json.loads(out.read_text())
  assert set(results["workloads"]) == {"vit_b16", "gpt2"}
  for workload in results["workloads"].values():
    rows = {k: v for k, v in workload.items() if isinstance(v, dict)}
    assert len(rows) >= 2 and all(name.startswith("ours, ") for name in rows)
    assert all(row["ms"] > 0 and 0 < row["mfu"] < 1.5 for row in rows.values())
