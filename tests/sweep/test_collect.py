"""collect on fabricated run dirs: every column from config.json, run_info.json and metrics."""

import os

import pytest

from tests.sweep import helpers
from vit_jax import errors
from vit_jax.sweep import collect
from vit_jax.sweep import runner
from vit_jax.sweep import spec

SWEEP = {
    "config": "configs/vit.py:runlocal",
    "runs": [{"seed": 0}, {"seed": 1}, {"seed": 2}],
    "name": "s{seed}",
}
CONFIG = {
    "model": {"name": "vit", "variant": "Ti/4", "width": 32, "depth": 2},
    "train_split": "train[:50%]",
    "batch_size": 10,
    "total_steps": 100,
    "optimizer": {"lr": 0.001},
    "seed": 0,
}
INFO = {"num_params": 12345, "train_flops_per_example": 1000.0, "train_examples": 500}


def eval_row(step, accuracy, elapsed):
  return {"step": step, "eval/accuracy": accuracy, "eval/loss": 1 - accuracy, "elapsed_s": elapsed}


@pytest.fixture
def root(tmp_path):
  sweep = spec.expand(SWEEP)
  root = str(tmp_path / "root")
  runner.check_root(sweep, root, create=True)
  train = {"step": 50, "train_loss": 2.0, "elapsed_s": 4.0}
  # s0 finished, with step 50 evaluated twice (resumed after a crash past that eval).
  helpers.fake_run(
      os.path.join(root, "s0"),
      config={**CONFIG, "seed": 0},
      info=INFO,
      rows=[train, eval_row(50, 0.5, 5.0), eval_row(50, 0.6, 9.0), eval_row(100, 0.8, 14.0)],
  )
  # s1 stopped at step 50 of 100.
  helpers.fake_run(
      os.path.join(root, "s1"), config={**CONFIG, "seed": 1}, info=INFO, rows=[eval_row(50, 0.7, 6)]
  )
  return sweep, root


def test_collect_writes_one_row_per_run_and_per_eval_point(root, tmp_path):
  sweep, root_dir = root
  out = str(tmp_path / "out")
  collect.collect(sweep, root_dir, out)
  runs = {r["run"]: r for r in collect.read_csv(os.path.join(out, collect.RUNS_CSV))}
  evals = collect.read_csv(os.path.join(out, collect.EVALS_CSV))

  s0 = runs["s0"]
  assert s0["status"] == "finished" and s0["model"] == "vit Ti/4 w32 d2"
  assert (s0["params"], s0["train_examples"], s0["train_split"]) == (12345, 500, "train[:50%]")
  assert (s0["steps_done"], s0["examples_seen"], s0["flops"]) == (100, 1000, 1e6)
  assert s0["final_error"] == pytest.approx(0.2) and s0["best_error"] == pytest.approx(0.2)
  assert s0["final_loss"] == pytest.approx(0.2) and s0["wall_s"] == 14.0
  assert s0["final_bits_per_char"] is None  # not an LM

  assert runs["s1"]["status"] == "partial" and runs["s1"]["final_error"] is None
  assert runs["s1"]["best_error"] == pytest.approx(0.3)
  assert runs["s2"]["status"] == "not started"

  s0_evals = [e for e in evals if e["run"] == "s0"]
  assert [e["step"] for e in s0_evals] == [50, 100]  # the re-evaluated step counted once
  first, last = s0_evals
  assert first["error"] == pytest.approx(0.4) and first["wall_s"] == 9.0  # the later record
  assert (first["final"], last["final"]) == (False, True)
  assert (last["examples_seen"], last["epochs"], last["flops"]) == (1000, 2.0, 1e6)
  assert first["flops"] == 5e5


def test_collect_refuses_a_root_of_another_sweep(root, tmp_path):
  _, root_dir = root
  other = spec.expand({**SWEEP, "fixed": {"total_steps": 8}})
  before = helpers.snapshot(root_dir)
  with pytest.raises(errors.WorkdirError, match="another sweep"):
    collect.collect(other, root_dir, str(tmp_path / "out"))
  assert helpers.snapshot(root_dir) == before and not os.path.exists(tmp_path / "out")


def test_collect_needs_a_run_sweep(tmp_path):
  with pytest.raises(errors.MissingFileError, match="run the sweep first"):
    collect.collect(spec.expand(SWEEP), str(tmp_path / "nothing"), str(tmp_path / "out"))


def test_a_resnet_with_custom_stages_is_labelled_by_its_stages(tmp_path):
  workdir = str(tmp_path / "r")
  model = {"name": "resnet", "variant": "50x1", "block_counts": [1, 1, 1], "width": 32}
  helpers.fake_run(workdir, config={**CONFIG, "model": model}, info=INFO, rows=[])
  assert collect.describe("r", workdir)["model"] == "resnet blocks 1-1-1 w32"
