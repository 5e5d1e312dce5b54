"""Tiny models learn: the training loss falls well below its start within a few dozen steps.

A model whose loss, gradient or update is broken (a wrong sign, a dropped residual, a mask that
hides everything) stays near the starting loss; these margins are about half the measured drop
(ViT 2.30 -> 1.95).
"""

import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs as configs
from vit_jax.training import train


def losses(workdir):
  return [r["train_loss"] for r in helpers.read_metrics(workdir) if "train_loss" in r]


def fast_adam(config, lr):
  config.optimizer.update(lr=lr, warmup_steps=5, schedule="constant", weight_decay=0.0)
  return config


@pytest.mark.parametrize(
    "family,steps,lr,min_drop",
    [
        ("vit", 40, 3e-3, 0.2),
        ("seq2seq", 40, 3e-3, 0.8),
    ],
)
def test_loss_falls_by_a_margin(tmp_path, digits_dir, family, steps, lr, min_drop):
  config = configs.tiny_vit(digits_dir, steps) if family == "vit" else configs.tiny_seq2seq(steps)
  config.batch_size = 32
  train.train_and_evaluate(fast_adam(config, lr), str(tmp_path))
  curve = losses(tmp_path)
  start, end = np.mean(curve[:3]), np.mean(curve[-5:])
  assert np.isfinite(curve).all()
  assert end < start - min_drop, f"loss {start:.3f} -> {end:.3f} (curve {np.round(curve, 3)})"
