"""Evaluators in a training run: the digits config's test-split eval and few-shot probe each on
its own cadence, in metrics.jsonl and TensorBoard; a resumed run keeps their cadences; bad
evaluator settings stop the run before anything is written."""

import glob
import os
import re

import pytest
import tensorflow as tf

from tests import helpers
from tests import tiny_configs as configs
from tests.survival import conftest as survival
from vit_jax import errors
from vit_jax import workdir as workdir_lib
from vit_jax.data import tfds_builders
from vit_jax.tasks import classification
from vit_jax.training import metrics_log
from vit_jax.training import train


def tiny_digits(digits_dir, steps=12):
  """configs/vit.py's digits config (both evaluators) with a 1-layer model: eval every 4 steps,
  the probe every 6 on 5 and 10 shots."""
  config = configs.tiny_vit(digits_dir, steps)
  config.eval_every, config.checkpoint_every = 4, 6
  config.evals.fewshot.update(every=6, shots=(5, 10))
  return config


def evaluated_steps(rows) -> dict:
  """{evaluator name: [steps it logged]} from metrics records."""
  steps = {}
  for row in rows:
    evaluated = [key for key in row if "/" in key and not key.startswith(metrics_log.DETAIL_PREFIX)]
    for name in {key.split("/")[0] for key in evaluated}:
      steps.setdefault(name, []).append(row["step"])
  return steps


def tensorboard_scalars(workdir) -> dict:
  """{tag: [steps]} of the scalars in the workdir's TensorBoard events."""
  tags = {}
  for path in glob.glob(os.path.join(workdir, "tensorboard", "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append(event.step)
  return tags


def test_digits_config_runs_the_test_split_and_a_10_shot_probe():
  config = helpers.vit_config("")
  assert {name: entry.kind for name, entry in config.evals.items()} == {
      "eval": "classification",
      "fewshot": "fewshot",
  }
  # None: the dataset's own eval split, the digits' "test".
  assert config.evals.eval.split is None and config.evals.eval.every == config.eval_every
  assert tfds_builders.image_dataset(config.dataset).eval_split == "test"
  assert 10 in config.evals.fewshot.shots and config.evals.fewshot.every != config.eval_every


@pytest.fixture(scope="module")
def straight(tmp_path_factory, digits_dir):
  """(workdir, result) of one uninterrupted tiny_digits run, shared read-only."""
  workdir = str(tmp_path_factory.mktemp("straight") / "w")
  return workdir, train.train_and_evaluate(tiny_digits(digits_dir), workdir)


def test_each_evaluator_runs_on_its_own_cadence(straight):
  workdir, result = straight
  rows = helpers.read_metrics(workdir)
  assert evaluated_steps(rows) == {"eval": [4, 8, 12], "fewshot": [6, 12]}
  last = rows[-1]
  assert {"eval/accuracy", "eval/top5_accuracy", "eval/loss"} <= set(last)
  assert {"fewshot/5shot_accuracy", "fewshot/10shot_accuracy"} <= set(last)
  assert result["fewshot/10shot_accuracy"] == last["fewshot/10shot_accuracy"]
  tags = tensorboard_scalars(workdir)
  assert tags["eval/accuracy"] == [4, 8, 12] and tags["fewshot/10shot_accuracy"] == [6, 12]


class Crash(Exception):
  pass


def test_a_resumed_run_keeps_the_cadences(straight, tmp_path, digits_dir, monkeypatch):
  _, expected = straight
  resumed = str(tmp_path / "resumed")

  real_batches = classification.ImageClassification.train_batches

  def crash_before_step_10(self, start_step, *args):
    for step, batch in enumerate(real_batches(self, start_step, *args), start_step + 1):
      if step == 10:
        raise Crash(f"killed before step {step}")
      yield batch

  monkeypatch.setattr(classification.ImageClassification, "train_batches", crash_before_step_10)
  with pytest.raises(Crash):  # after the eval at 8, with the last checkpoint at 6
    train.train_and_evaluate(tiny_digits(digits_dir), resumed)
  monkeypatch.setattr(classification.ImageClassification, "train_batches", real_batches)
  result = train.train_and_evaluate(tiny_digits(digits_dir), resumed)

  # Steps 7-9 ran twice; the eval at 8, recorded before the crash, is not run again. Each
  # cadence is the straight run's.
  steps = evaluated_steps(helpers.read_metrics(resumed))
  assert steps == {"eval": [4, 8, 12], "fewshot": [6, 12]}
  for key in ("eval/accuracy", "eval/loss", "fewshot/10shot_accuracy"):
    assert result[key] == pytest.approx(expected[key], abs=1e-6), key


def test_a_bad_evaluator_setting_stops_the_command_before_anything_is_written(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  override = "--config.evals.fewshot.kind=fewshots"
  command = helpers.main_command(workdir, "runlocal", f"--config.data_dir={digits_dir}", override)
  result = helpers.run(command)
  assert result.returncode == 2, result.stderr[-3000:]
  survival.assert_one_line_error(result.stderr, "fewshots")
  assert not os.path.exists(workdir_lib.config_path(workdir))
  assert not os.path.exists(workdir_lib.checkpoints_dir(workdir))


# The other settings in-process (the trainer validates first; the command's part is checked above).
@pytest.mark.parametrize(
    "evaluator,key,value,named",
    [
        ("eval", "every", 0, "evals.eval.every"),
        ("fewshot", "train_split", "train[:40]", "evals.fewshot.shots"),
        ("eval", "split", "tset", "evals.eval.split"),
    ],
)
def test_bad_evaluator_settings_stop_before_anything_is_written(
    tmp_path, digits_dir, evaluator, key, value, named
):
  config = helpers.vit_config("runlocal", data_dir=digits_dir)
  config.evals[evaluator][key] = value
  workdir = str(tmp_path / "w")
  with pytest.raises(errors.UserError, match=re.escape(named)):
    train.train_and_evaluate(config, workdir)
  assert not os.path.exists(workdir_lib.config_path(workdir))
  assert not os.path.exists(workdir_lib.checkpoints_dir(workdir))
