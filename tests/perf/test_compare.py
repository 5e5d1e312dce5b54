"""The side-by-side benchmark runs end to end at tiny sizes and writes its table and JSON."""

import json
import re
import subprocess
import sys

import pytest

from tests import helpers

pytest.importorskip("timm")
pytest.importorskip("transformers")


def run_module(*args):
  done = subprocess.run(
      [sys.executable, "-m", *args],
      env=helpers.env(),
      cwd=helpers.ROOT,
      capture_output=True,
      text=True,
      timeout=900,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  return done.stdout


@pytest.mark.slow
def test_quick_compare_prints_table_and_json(tmp_path):
  out = tmp_path / "results.json"
  stdout = run_module(
      "benchmarks.compare",
      "--quick",
      "--only",
      "vit_ti16_train",
      "gpt_decode_b1",
      "input_pipeline",
      "--json",
      str(out),
  )
  assert "vit_ti16_train" in stdout and "input_pipeline" in stdout
  rows = {r["workload"]: r for r in json.loads(out.read_text())["results"]}
  assert set(rows) == {"vit_ti16_train", "gpt_decode_b1", "input_pipeline"}
  assert all(r["ours"] > 0 and r["peer"] > 0 for r in rows.values())


def table_rows(stdout, names):
  return {
      line.split()[0]: line.split() for line in stdout.splitlines() if line.split()[:1] in names
  }


@pytest.mark.slow
def test_quick_flag_ab_runs_each_setting_in_its_own_process():
  stdout = run_module(
      "benchmarks.flag_ab", "--quick", "--only", "matmul_fp32", "--rounds", "1", "--steps", "1"
  )
  row = table_rows(stdout, [["matmul_fp32"]])["matmul_fp32"]
  flag, no_flag = float(row[2]), float(row[3])
  assert flag > 0 and no_flag > 0
  assert abs(float(row[4].rstrip("x")) - flag / no_flag) < 0.02 * flag / no_flag + 0.01


@pytest.mark.slow
def test_quick_guard_cost_times_both_steps():
  stdout = run_module("benchmarks.guard_cost", "--quick")
  rows = table_rows(stdout, [["vit_ti16_train"], ["gpt_train"]])
  assert set(rows) == {"vit_ti16_train", "gpt_train"}
  assert all(float(r[1]) > 0 and float(r[2]) > 0 for r in rows.values())


@pytest.mark.slow
def test_quick_op_profile_ranks_labelled_ops():
  stdout = run_module("benchmarks.op_profile", "gpt_train", "--quick", "--top", "5")
  rows = [
      line for line in stdout.splitlines() if re.match(r"\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+%", line)
  ]
  assert len(rows) == 5, stdout
  assert any("dot_general" in row for row in rows), stdout  # ops carry their op_name
