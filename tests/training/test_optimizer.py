"""The learning-rate schedule (linear warmup from 0, then the decay, at known steps) and Adam's
updates with and without bias correction."""

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


def adam_config(bias_correction: bool):
  return ml_collections.ConfigDict(
      dict(
          name="adamw",
          lr=0.1,
          b1=0.9,
          b2=0.999,
          eps=1e-6,
          bias_correction=bias_correction,
          mu_dtype=None,
          weight_decay=0.0,
          grad_clip_norm=0.0,
          warmup_steps=0,
          schedule="constant",
          end_lr_ratio=0.0,
      )
  )


@pytest.mark.parametrize("bias_correction", [True, False])
def test_adam_updates_with_and_without_bias_correction(bias_correction):
  """Without it, BERT's AdamWeightDecayOptimizer (optimization.py:131-137): m / (sqrt(v) + eps)
  of the raw moments, so the first steps move up to ~(1 - b1^t) / sqrt(1 - b2^t) times further."""
  tx, _ = optimizer.build_optimizer(adam_config(bias_correction), total_steps=10)
  params = {"w": np.zeros(3, np.float32)}
  grads = [np.array([1.0, -2.0, 0.5], np.float32), np.array([0.5, 1.0, -1.0], np.float32)]
  state = tx.init(params)
  m, v = np.zeros(3), np.zeros(3)
  for t, g in enumerate(grads, start=1):
    update, state = tx.update({"w": g}, state, params)
    m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g**2
    if bias_correction:
      want = (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-6)
    else:
      want = m / (np.sqrt(v) + 1e-6)
    np.testing.assert_allclose(update["w"], -0.1 * want, rtol=1e-4, err_msg=f"step {t}")
