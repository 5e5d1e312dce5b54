"""A ViT trained at 32 px, exported to .npz, fine-tunes at 48 px (position table resampled)."""

import numpy as np
import pytest

from tests import helpers
from vit_jax import interop
from vit_jax.data.image import pipeline
from vit_jax.training import train


def digits_config(data_dir: str, image_size: int, **overrides):
  config = helpers.repo_file("configs/vit.py").get_config("runlocal")
  config.data_dir, config.image_size, config.progress = data_dir, image_size, "lines"
  config.update(overrides)
  return config


@pytest.mark.slow
def test_finetune_from_npz_at_another_resolution(tmp_path, capsys):
  data_dir = str(tmp_path / "tfds")
  pipeline.dataset_info("sklearn_digits", data_dir=data_dir)  # the embedded dataset, offline
  train.train_and_evaluate(digits_config(data_dir, 32), str(tmp_path / "pretrain"))
  # Our workdir -> .npz (its latest checkpoint, with the model config it recorded), in the
  # big_vision layout: no cls slot in its position table, which init_from must restore.
  ckpt = interop.convert(
      str(tmp_path / "pretrain"), str(tmp_path / "vit.npz"), to="npz", layout="big_vision"
  )
  assert ckpt.model["num_classes"] == 10
  capsys.readouterr()

  config = digits_config(data_dir, 48, init_from=str(tmp_path / "vit.npz"))
  result = train.train_and_evaluate(config, str(tmp_path / "finetune"))
  out = capsys.readouterr().out
  # 32 px / patch 4 = 8x8 patches (+ cls) -> 48 px = 12x12 patches (+ cls).
  assert (
      "init_from: Transformer/posembed_input/pos_embedding: resampled (1, 65, 96) -> "
      "(1, 145, 96)" in out
  ), out
  assert np.isfinite(result["eval/accuracy"])
