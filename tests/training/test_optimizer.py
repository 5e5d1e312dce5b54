"""The learning-rate schedule (linear warmup from 0, then the decay, at known steps) and Adam's
updates with and without bias correction."""

import math

import numpy as np
import pytest

from vit_jax.config import defaults
from vit_jax.training import optimizer


def opt_config(schedule, warmup=10, lr=0.4, end_lr_ratio=0.1, **overrides):
  config = defaults.training_defaults().optimizer
  config.update(
      dict(lr=lr, warmup_steps=warmup, schedule=schedule, end_lr_ratio=end_lr_ratio, **overrides)
  )
  return config


@pytest.mark.parametrize("schedule,end", [("cosine", 0.04), ("linear", 0.04), ("constant", 0.4)])
def test_schedule_values_at_0_half_warmup_warmup_and_end(schedule, end):
  total, w = 50, 10
  lr_at = optimizer.learning_rate_schedule(opt_config(schedule, w), total)
  values = [float(lr_at(s)) for s in (0, w // 2, w, total)]
  np.testing.assert_allclose(values, [0.0, 0.2, 0.4, end], rtol=1e-5, atol=1e-7)
  if schedule != "constant":  # halfway through the decay
    middle = {"cosine": 0.04 + 0.36 * 0.5, "linear": 0.22}[schedule]
    np.testing.assert_allclose(float(lr_at(w + (total - w) // 2)), middle, rtol=1e-5)


def big_vision_rate(step, *, base, total, warmup, cooldown, timescale):
  """big_vision's utils.py create_learning_rate_schedule, decay_type "rsqrt" (shift 0), with its
  warmup and cooldown multipliers, written out from its formulas."""
  if step >= warmup:
    lr = base / math.sqrt(1 + (step - warmup) / timescale)
  else:
    lr = base
  if warmup:
    lr *= min(1.0, step / warmup)
  if cooldown:
    lr *= min(1.0, (total - step) / cooldown)
  return lr


@pytest.mark.parametrize("warmup, cooldown", [(0, 0), (100, 0), (100, 300), (0, 1000)])
def test_rsqrt_is_big_visions(warmup, cooldown):
  total, timescale = 1000, 50
  config = opt_config("rsqrt", warmup, lr=8e-4, rsqrt_timescale=timescale, cooldown_steps=cooldown)
  lr_at = optimizer.learning_rate_schedule(config, total)
  for step in (0, 1, 50, 99, 100, 101, 400, 699, 700, 701, 999, 1000):
    want = big_vision_rate(
        step, base=8e-4, total=total, warmup=warmup, cooldown=cooldown, timescale=timescale
    )
    np.testing.assert_allclose(float(lr_at(step)), want, rtol=1e-5, atol=1e-12, err_msg=step)


# Hägele et al. 2024 (section 3): the cooldown's factor at fraction p of it done.
COOLDOWN_REFERENCE = {
    "linear": lambda p: 1 - p,
    "cosine": lambda p: 0.5 * (1 + math.cos(math.pi * p)),
    "1-sqrt": lambda p: 1 - math.sqrt(p),
}


@pytest.mark.parametrize("shape", optimizer.COOLDOWN_SHAPES)
def test_wsd_warms_up_holds_then_decays_to_zero_along_its_shape(shape):
  total, warmup, cooldown = 200, 20, 50
  config = opt_config("wsd", warmup, lr=0.4, cooldown_steps=cooldown, cooldown_shape=shape)
  lr_at = optimizer.learning_rate_schedule(config, total)
  np.testing.assert_allclose(
      [float(lr_at(s)) for s in (0, 10, 20, 100, 150)], [0, 0.2, 0.4, 0.4, 0.4], rtol=1e-6
  )
  for step in range(150, 201, 5):
    want = 0.4 * COOLDOWN_REFERENCE[shape]((step - 150) / cooldown)
    np.testing.assert_allclose(float(lr_at(step)), want, rtol=1e-5, atol=1e-9, err_msg=step)


def test_a_longer_run_shares_the_schedule_until_its_own_cooldown():
  """What a branch relies on: rsqrt and wsd before the cooldown do not depend on total_steps."""
  for schedule in optimizer.BRANCHABLE_SCHEDULES:
    short = optimizer.learning_rate_schedule(opt_config(schedule, cooldown_steps=30), 300)
    long = optimizer.learning_rate_schedule(opt_config(schedule, cooldown_steps=30), 3000)
    steps = np.arange(0, 271)
    np.testing.assert_allclose(short(steps), long(steps), rtol=1e-6)
    assert float(short(300)) == 0.0 and float(long(300)) > 0.0


def test_schedule_problems_name_the_key():
  assert optimizer.schedule_problems(opt_config("wsd"), 100) == [
      "--config.optimizer.schedule=wsd decays over its cooldown: set "
      "--config.optimizer.cooldown_steps to its length (e.g. 20% of total_steps)"
  ]
  assert optimizer.schedule_problems(opt_config("rsqrt", cooldown_steps=200), 100) == [
      "--config.optimizer.cooldown_steps=200 must be <= --config.total_steps=100"
  ]
  assert optimizer.schedule_problems(opt_config("rsqrt", cooldown_steps=20), 100) == []


def test_no_warmup_starts_at_the_peak():
  lr_at = optimizer.learning_rate_schedule(opt_config("cosine", warmup=0), 20)
  np.testing.assert_allclose(float(lr_at(0)), 0.4, rtol=1e-6)


def adam_config(bias_correction: bool):
  return opt_config(
      "constant",
      warmup=0,
      lr=0.1,
      end_lr_ratio=0.0,
      name="adamw",
      b1=0.9,
      b2=0.999,
      eps=1e-6,
      bias_correction=bias_correction,
      mu_dtype=None,
      weight_decay=0.0,
      grad_clip_norm=0.0,
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
