"""A step that is both saved and evaluated is saved first: an eval that fails loses no training,
and the rerun runs that eval."""

import os

import pytest

from tests import helpers
from tests import tiny_configs as configs
from vit_jax.tasks import classification
from vit_jax.training import train


class EvalFailed(Exception):
  pass


def test_an_eval_that_fails_finds_the_step_already_saved(digits_dir, tmp_path, monkeypatch):
  def failing_eval(*_, **__):
    raise EvalFailed("the eval split broke")

  monkeypatch.setattr(classification.ImageClassification, "eval_batches", failing_eval)
  config = configs.tiny_vit(digits_dir, 4)
  config.eval_every = config.checkpoint_every = 2
  workdir = tmp_path / "w"
  with pytest.raises(EvalFailed):
    train.train_and_evaluate(config, str(workdir))
  assert os.listdir(workdir / "checkpoints") == ["2"]  # the first eval's step, saved before it

  monkeypatch.undo()  # the split is fixed: the rerun runs the missed eval, then the rest
  train.train_and_evaluate(config, str(workdir))
  evals = [r["step"] for r in helpers.read_metrics(workdir) if "eval/accuracy" in r]
  assert evals == [2, 4]
