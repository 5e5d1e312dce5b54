"""One tiny digits workdir per session (trained a few dozen steps), and its test images as files."""

import numpy as np
from PIL import Image
import pytest
import tensorflow_datasets as tfds

from tests import helpers
from vit_jax.data.image import pipeline
from vit_jax.training import train


def digits_config(data_dir: str):
  config = helpers.repo_file("configs/vit.py").get_config("runlocal")
  config.update(
      data_dir=data_dir,
      progress="lines",
      total_steps=60,
      batch_size=64,
      eval_every=60,
      checkpoint_every=60,
      eval_max_batches=None,
  )
  # Plain inputs learn fastest: a few dozen steps get well above chance.
  config.augment.update(randaugment_layers=0, mixup_alpha=0.0, label_smoothing=0.0)
  config.model.dropout_rate = 0.0
  config.optimizer.update(lr=3e-3, warmup_steps=5)
  return config


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  pipeline.dataset_info("sklearn_digits", data_dir=data_dir)  # builds it, offline
  return data_dir


@pytest.fixture(scope="session")
def digits_workdir(tmp_path_factory, digits_dir):
  """(workdir, the trainer's final eval accuracy on the test split)."""
  workdir = str(tmp_path_factory.mktemp("digits_workdir"))
  result = train.train_and_evaluate(digits_config(digits_dir), workdir)
  return workdir, result["eval/accuracy"]


@pytest.fixture(scope="session")
def digits_test_folder(tmp_path_factory, digits_dir):
  """The test split written as PNG files, `root/<label>/<index>.png` (PNG is lossless)."""
  root = tmp_path_factory.mktemp("digits_png")
  split = tfds.builder("sklearn_digits", data_dir=digits_dir).as_dataset(split="test")
  for i, example in enumerate(tfds.as_numpy(split)):
    directory = root / str(int(example["label"]))
    directory.mkdir(exist_ok=True)
    Image.fromarray(np.asarray(example["image"])).save(directory / f"{i:04d}.png")
  return str(root)
