"""TFDS builders have one home: a training run's config checks, input pipeline and evaluators open
each dataset once, and both data families (image, text) open theirs there."""

import collections

import pytest
import tensorflow_datasets as tfds

from tests import tiny_configs as configs
from vit_jax import data
from vit_jax import errors
from vit_jax.data.image import sources as image_sources
from vit_jax.data.text import checks as text_checks
from vit_jax.training import train


@pytest.fixture
def constructed(monkeypatch):
  """Counts `tfds.builder` calls by dataset name."""
  counts = collections.Counter()
  real_builder = tfds.builder

  def counting_builder(name, **kwargs):
    counts[name] += 1
    return real_builder(name, **kwargs)

  monkeypatch.setattr(tfds, "builder", counting_builder)
  return counts


def test_training_and_its_checks_open_the_dataset_once(tmp_path, digits_dir, constructed):
  # configs/vit.py's digits config: the checks, the train and eval input and both evaluators
  # (test-split accuracy and the few-shot probe) all read sklearn_digits: 11 opens if each opened
  # its own.
  config = configs.tiny_vit(digits_dir, 4)
  config.eval_every = config.evals.fewshot.every = 4
  config.evals.fewshot.shots = (5,)
  result = train.train_and_evaluate(config, str(tmp_path / "w"))
  assert "eval/accuracy" in result and "fewshot/5shot_accuracy" in result  # both evaluators ran
  assert constructed == {"sklearn_digits": 1}


def test_outside_a_run_each_check_opens_afresh(digits_dir, constructed):
  config = configs.tiny_vit(digits_dir, 4)
  image_sources.check_config(config)  # one open reads its names and both splits
  assert constructed == {"sklearn_digits": 1}
  image_sources.check_config(config)
  assert constructed == {"sklearn_digits": 2}
  with data.opened_once():
    image_sources.check_config(config)
    image_sources.check_split(config, "sklearn_digits", "test", key="evals.eval.split")
  assert constructed == {"sklearn_digits": 3}


def test_a_missing_split_is_named_by_the_source_that_opened_it(digits_dir):
  config = configs.tiny_vit(digits_dir, 4)
  config.eval_split = "validation"
  with pytest.raises(errors.DataError, match=r"eval_split='validation'.*test \(355 examples\)"):
    image_sources.check_config(config)


def test_text_datasets_open_their_builder_in_the_same_place(tmp_path, constructed):
  # lm1b is not prepared in an empty data_dir: the shared open says how to prepare it, as it
  # does for images, and constructs the builder once per check (vit_jax.prepare's, which reads
  # TFDS to tokenize the split into a token store).
  with pytest.raises(errors.DatasetNotPreparedError, match=r"python -m vit_jax.prepare --config="):
    text_checks.check_split(
        "lm1b", "train", "documents", key="splits", data_dir=str(tmp_path), tokenizing=True
    )
  assert constructed == {"lm1b": 1}
