"""`config.log_internals`: the RMS of params, gradients and updates per block group, logged every
log_every steps, equal to what the checkpoints and plain SGD's update rule say they must be."""

import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs as configs
from vit_jax.training import health_metrics
from vit_jax.training import train


def test_groups_are_numbered_blocks_or_top_level_modules():
  group = lambda *keys: health_metrics.group_of(keys)
  assert group("Transformer", "encoderblock_3", "MlpBlock_0", "Dense_0", "kernel") == (
      "Transformer/encoderblock_3"
  )
  assert group("Transformer", "encoder_norm", "scale") == "Transformer"
  assert group("head", "kernel") == "head" and group("cls") == "cls"
  assert group("block2", "unit01", "conv1", "kernel") == "block2"


def rms_by_group(flat: dict) -> dict:
  groups = {}
  for path, value in flat.items():
    groups.setdefault(health_metrics.group_of(path.split("/")), []).append(np.ravel(value))
  return {g: float(np.sqrt(np.mean(np.square(np.concatenate(v))))) for g, v in groups.items()}


def test_internals_match_the_checkpoints_and_sgds_update(tmp_path, digits_dir):
  config = configs.sgd(configs.tiny_vit(digits_dir, 3), lr=0.5)
  config.update(log_internals=True, checkpoint_every=1, keep_checkpoints=3)
  workdir = str(tmp_path / "w")
  train.train_and_evaluate(config, workdir)
  (row,) = [r for r in helpers.read_metrics(workdir) if r["step"] == 3 and "train_loss" in r]
  before, after = configs.read_state(workdir, 2), configs.read_state(workdir, 3)
  params = lambda state: {
      k.removeprefix("['params']['").removesuffix("']").replace("']['", "/"): v
      for k, v in state.items()
      if k.startswith("['params']")
  }
  old, new = params(before), params(after)
  want_params = rms_by_group(new)
  want_updates = rms_by_group({k: new[k] - old[k] for k in new})
  assert set(want_params) == {
      "embedding",
      "cls",
      "Transformer",
      "Transformer/encoderblock_0",
      "head",
  }
  for group in want_params:
    assert row[f"params_rms/{group}"] == pytest.approx(want_params[group], rel=1e-4)
    assert row[f"updates_rms/{group}"] == pytest.approx(want_updates[group], rel=1e-3, abs=1e-9)
    # Plain SGD (no momentum, decay or clipping): update = -lr * gradient.
    assert row[f"grads_rms/{group}"] == pytest.approx(want_updates[group] / 0.5, rel=1e-3, abs=1e-9)


def test_off_by_default(tmp_path, digits_dir):
  config = configs.tiny_vit(digits_dir, 1)
  assert config.log_internals is False
  train.train_and_evaluate(config, str(tmp_path / "w"))
  assert not any("_rms/" in key for row in helpers.read_metrics(tmp_path / "w") for key in row)
