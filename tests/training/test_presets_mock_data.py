"""The ImageNet and CIFAR presets run train + eval at their real image sizes (TFDS mock data)."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import helpers
from vit_jax.training import train


def load_config(arg):
  return helpers.repo_file("configs/vit.py").get_config(arg)


@pytest.mark.parametrize(
    "dataset,variant,image_size,num_classes",
    [
        # 224 px: the same train and eval path as CIFAR's at 7 times the pixels (its config and
        # first batch are checked by tests/test_documented_commands.py).
        pytest.param("imagenet2012", "Ti/16", 224, 1000, marks=pytest.mark.slow),
        ("cifar10", "Ti/4", 32, 10),
    ],
)
def test_preset_runs_train_and_eval(tmp_path, dataset, variant, image_size, num_classes):
  config = load_config(f"dataset={dataset},variant={variant},runlocal")
  assert config.image_size == image_size
  config.progress = "lines"
  config.prefetch_batches = 0  # mock_data patches the file system while it reads
  with tfds.testing.mock_data(num_examples=24):
    result = train.train_and_evaluate(config, str(tmp_path))
  rows = helpers.read_metrics(tmp_path)
  train_rows = [r for r in rows if "train_loss" in r]
  assert [r["step"] for r in train_rows] == [1, 2, 3, 4]
  assert all(np.isfinite(r["train_loss"]) for r in train_rows)
  assert all(set(helpers.BREAKDOWN_KEYS) <= set(r) for r in train_rows)  # the step-time breakdown
  assert 0.0 <= result["eval/accuracy"] <= 1.0 and result["eval/examples"] == 16  # 2 batches of 8
  head = result["final_params"]["head"]["kernel"]
  assert head.shape[-1] == num_classes
  assert (tmp_path / "checkpoints" / "4").is_dir() and (tmp_path / "config.json").is_file()
