"""The learning-rate schedule: linear warmup from 0, then the decay, at known steps."""

import ml_collections
import numpy as np
import pytest

from vit_jax.training import optimizer


def opt_config(schedule, warmup=10, lr=0.4, end_lr_ratio=0.1):
  return ml_collections.ConfigDict(
      dict(lr=lr, warmup_steps=warmup, schedule=schedule, end_lr_ratio=end_lr_ratio)
  )


@pytest.mark.parametrize("schedule,end", [("cosine", 0.04), ("linear", 0.04), ("constant", 0.4)])
def test_schedule_values_at_0_half_warmup_warmup_and_end(schedule, end):
  total, w = 50, 10
  lr_at = optimizer.learning_rate_schedule(opt_config(schedule, w), total)
  values = [float(lr_at(s)) for s in (0, w // 2, w, total)]
  np.testing.assert_allclose(values, [0.0, 0.2, 0.4, end], rtol=1e-5, atol=1e-7)
  if schedule != "constant":  # halfway through the decay
    middle = {"cosine": 0.04 + 0.36 * 0.5, "linear": 0.22}[schedule]
    np.testing.assert_allclose(float(lr_at(w + (total - w) // 2)), middle, rtol=1e-5)


def test_no_warmup_starts_at_the_peak():
  lr_at = optimizer.learning_rate_schedule(opt_config("cosine", warmup=0), 20)
  np.testing.assert_allclose(float(lr_at(0)), 0.4, rtol=1e-6)
