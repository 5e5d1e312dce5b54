"""Where a run's time goes, in real runs: the breakdown of each log window (an input slowed on
purpose shows up as input wait), profiles of chosen steps that xprof reads, and goodput read back
over a resume (the SIGKILL case is in test_resume_and_devices.py)."""

import gzip
import json
import os
import re
import shutil
import time

import pytest

from tests import helpers
from tests import tiny_configs as configs
from vit_jax import errors
from vit_jax import workdir as workdir_lib
from vit_jax.config import checks
from vit_jax.training import host_input
from vit_jax.training import metrics_log
from vit_jax.training import profiling
from vit_jax.training import train


def train_records(workdir) -> list[dict]:
  return [r for r in helpers.read_metrics(workdir) if "train_loss" in r]


def test_a_slowed_input_shows_as_input_wait(tmp_path, digits_dir, monkeypatch):
  batches_of = host_input.train_batches

  def slowed(make_iterator, input_shards):  # an input pipeline that cannot keep up
    for batch in batches_of(make_iterator, input_shards):
      time.sleep(0.2)
      yield batch

  monkeypatch.setattr(host_input, "train_batches", slowed)
  config = configs.tiny_vit(digits_dir, steps=8)
  config.log_every = 2
  train.train_and_evaluate(config, str(tmp_path))
  records = train_records(tmp_path)
  assert [r["step"] for r in records] == [2, 4, 6, 8]
  assert all(set(helpers.BREAKDOWN_KEYS) <= set(r) for r in records)
  first, *later = records
  assert first["time/compile_s"] > 0 and first["time/startup_s"] > 0
  assert all(r["time/compile_s"] == 0 and r["time/startup_s"] == 0 for r in later)
  # After the first window (the compile), most of each window is spent waiting for batches.
  assert all(r["input_wait_share"] > 0.5 for r in later), [r["input_wait_share"] for r in later]
  assert all(r["time/input_wait_s"] >= 2 * 0.2 for r in later)
  for r in records:
    parts = sum(r[f"time/{p}_s"] for p in metrics_log.PARTS)
    assert parts <= r["time/window_s"] + 1e-6
  assert records[-1]["time/eval_s"] == 0  # the last step's eval comes after its record
  assert not os.path.exists(workdir_lib.profiles_dir(str(tmp_path)))  # no profile_steps: none


def test_profile_steps_write_a_trace_that_xprof_reads(tmp_path, digits_dir):
  from xprof.convert import raw_to_tool_data  # pylint: disable=g-import-not-at-top

  config = configs.tiny_vit(digits_dir, steps=5)
  config.profile_steps = "2:4"
  train.train_and_evaluate(config, str(tmp_path))
  (run,) = os.listdir(workdir_lib.profiles_dir(str(tmp_path)))
  folder = os.path.join(workdir_lib.profiles_dir(str(tmp_path)), run)
  xplanes = [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".xplane.pb")]
  assert len(xplanes) == 1
  assert "overview_page" in raw_to_tool_data.xspace_to_tool_names(xplanes)
  trace, _ = raw_to_tool_data.xspace_to_tool_data(xplanes, "trace_viewer", {})
  names = {e.get("name", "") for e in json.loads(trace)["traceEvents"]}
  # Each step annotated by the trainer; the trace holds exactly steps 2 and 3.
  assert {n for n in names if re.fullmatch(r"train \d+", n)} == {"train 2", "train 3"}
  overview, _ = raw_to_tool_data.xspace_to_tool_data(xplanes, "overview_page", {})
  assert json.loads(overview)  # the overview page's tables
  with gzip.open(os.path.join(folder, "perfetto_trace.json.gz")) as f:
    assert json.load(f)["traceEvents"]  # what ui.perfetto.dev opens
  records = train_records(tmp_path)
  assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
  assert records[3]["time/profile_s"] > 0  # stopping the trace: before step 4
  assert all(set(helpers.BREAKDOWN_KEYS) <= set(r) for r in records)


@pytest.mark.parametrize("value", ["5", "4:4", "0:3", "a:b", "3:2"])
def test_bad_profile_steps_are_refused_before_anything_runs(value):
  config = helpers.vit_config("runlocal", profile_steps=value)
  with pytest.raises(errors.ConfigError, match="profile_steps"):
    checks.validate_config(config)
  with pytest.raises(errors.ConfigError):
    profiling.parse_steps(value)
  assert profiling.parse_steps("10:15") == (10, 15)


def test_goodput_reads_back_the_kept_and_the_recomputed_steps():
  # Attempt 1 logged steps 1-27 and was killed; attempt 2 resumed at its step-20 checkpoint,
  # logged 21-33 and was killed; attempt 3 resumes at the step-30 checkpoint.
  first = [{"step": s, "time/productive_s": 1.0 * s} for s in range(1, 28)]
  second = [
      {"step": s, "time/productive_s": 20 + 2.0 * (s - 20), "recomputed_steps": 7}
      for s in range(21, 34)
  ]
  second = [{**r, "time/recomputed_s": 7.0} for r in second]
  eval_record = {"step": 30, "eval/accuracy": 0.5}
  resumed = metrics_log.Goodput.resumed(first + [eval_record] + second, start_step=30)
  assert resumed.productive_s == 20 + 2.0 * 10  # up to step 30, as attempt 2 trained it
  assert resumed.recomputed_steps == 7 + 3
  assert resumed.recomputed_s == 7.0 + 2.0 * 3
  assert metrics_log.Goodput.resumed(first, start_step=0).recomputed_steps == 27
  assert metrics_log.Goodput.resumed([], start_step=20) == metrics_log.Goodput()


def test_a_rerun_writes_each_eval_once(tmp_path, digits_dir):
  config = configs.tiny_vit(digits_dir, steps=4)
  config.eval_every = config.checkpoint_every = 2
  first = train.train_and_evaluate(config, str(tmp_path))
  again = train.train_and_evaluate(config, str(tmp_path))  # finished: evaluates nothing again
  # An async save cut short after its step's eval: the resume recomputes steps 3-4, and the
  # step-4 eval is not run again.
  shutil.rmtree(os.path.join(tmp_path, "checkpoints", "4"))
  recomputed = train.train_and_evaluate(config, str(tmp_path))
  evals = [r["step"] for r in helpers.read_metrics(tmp_path) if "eval/accuracy" in r]
  assert evals == [2, 4]
  assert again["eval/accuracy"] == recomputed["eval/accuracy"] == first["eval/accuracy"]
  assert [r["step"] for r in train_records(tmp_path)][-2:] == [3, 4]  # it did train again
