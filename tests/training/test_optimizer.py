"""The learning-rate schedule (linear warmup from 0, then the decay, at known steps), Adam's
updates with and without bias correction, and Adafactor's against big_vision's formulas."""

import math

import jax
import numpy as np
import pytest

from vit_jax import errors
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


# ---- Adafactor (big_vision optax.py:187-214) ----------------------------------------------------
def adafactor_config(**overrides):
  settings = dict(
      name="adafactor",
      momentum=0.9,
      mu_dtype="bfloat16",
      weight_decay=0.0,
      grad_clip_norm=0.0,
      lr=0.1,
  )
  return opt_config("constant", warmup=0, **{**settings, **overrides})


def big_vision_decay_rate(t: int) -> float:
  """train_vit_g.py's Adafactor second-moment decay at step t (from 0): optax.py:195-198."""
  return min(0.999, 1.0 - (t + 1) ** -0.8)


def adafactor_reference(grads, start_step=0):
  """The updates big_vision's scale_by_adafactor makes for one parameter's gradients, from
  Shazeer & Stern 2018 (Algorithm 4) with big_vision's decay and eps 1e-30, momentum 0.9 as an
  EMA without debiasing: a matrix whose two dimensions are both >= 32 keeps the means of g^2 over
  its rows and over its columns, and its second moment is their outer product over their mean;
  anything else keeps g^2 itself."""
  shape = grads[0].shape
  factored = len(shape) == 2 and min(shape) >= 32
  row = col = v = None
  m = np.zeros(shape)
  updates = []
  for i, g in enumerate(grads):
    beta2 = big_vision_decay_rate(start_step + i)
    g2 = np.asarray(g, np.float64) ** 2 + 1e-30
    if factored:
      new_row, new_col = g2.mean(axis=1), g2.mean(axis=0)
      row = new_row if row is None else beta2 * row + (1 - beta2) * new_row
      col = new_col if col is None else beta2 * col + (1 - beta2) * new_col
      v_hat = np.outer(row, col) / row.mean()
    else:
      v = g2 if v is None else beta2 * v + (1 - beta2) * g2
      v_hat = v
    m = 0.9 * m + 0.1 * g / np.sqrt(v_hat)
    updates.append(m)
  return updates


def adafactor_grads(shape, steps=3):
  rng = np.random.default_rng(0)
  return [rng.normal(size=shape).astype(np.float32) * (1 + i) for i in range(steps)]


@pytest.mark.parametrize(
    "shape, factored",
    [((64, 48), True), ((48, 64), True), ((64, 16), False), ((40,), False), ((8, 8), False)],
)
def test_adafactor_matches_big_visions_formulas(shape, factored):
  tx, _ = optimizer.build_optimizer(adafactor_config(), total_steps=10)
  params = {"w": np.zeros(shape, np.float32)}
  state = tx.init(params)
  rms_state = state[0][0]
  # A factored second moment keeps one value per row and per column, not one per entry.
  assert np.size(rms_state.v["w"]) == (1 if factored else np.prod(shape))
  assert np.size(rms_state.v_row["w"]) + np.size(rms_state.v_col["w"]) == (
      sum(shape) if factored else 2
  )
  grads = adafactor_grads(shape)
  # The first step's decay rate is 0 (v = g^2), then 1 - 2^-0.8, 1 - 3^-0.8.
  for t, (g, want) in enumerate(zip(grads, adafactor_reference(grads))):
    update, state = tx.update({"w": g}, state, params)
    # rtol: the momentum is stored in bfloat16 (8 bits of mantissa).
    np.testing.assert_allclose(update["w"], -0.1 * want, rtol=1e-2, atol=1e-3, err_msg=t)
  assert state[0][1].ema["w"].dtype == np.dtype("bfloat16")


def test_adafactor_decay_rate_is_capped_at_0_999():
  """From step 5,623 on, 1 - (t + 1)^-0.8 passes 0.999: the second moment then decays at 0.999."""
  assert big_vision_decay_rate(20_000) == 0.999
  tx, _ = optimizer.build_optimizer(adafactor_config(momentum=0.0), total_steps=30_000)
  params = {"w": np.zeros((64, 48), np.float32)}
  state = tx.init(params)
  grads = adafactor_grads((64, 48), steps=2)
  state = ((state[0][0]._replace(count=np.int32(19_999)),), *state[1:])
  _, state = tx.update({"w": grads[0]}, state, params)  # step 19,999 from zero moments
  update, _ = tx.update({"w": grads[1]}, state, params)  # step 20,000
  row, col = (grads[0] ** 2).mean(1) * 0.001, (grads[0] ** 2).mean(0) * 0.001
  row = 0.999 * row + 0.001 * (grads[1] ** 2).mean(1)
  col = 0.999 * col + 0.001 * (grads[1] ** 2).mean(0)
  want = grads[1] / np.sqrt(np.outer(row, col) / row.mean())
  np.testing.assert_allclose(update["w"], -0.1 * want, rtol=1e-4)


def state_bytes(tx, params) -> int:
  return sum(leaf.nbytes for leaf in jax.tree.leaves(tx.init(params)))


def test_adafactor_state_is_smaller_than_adams_for_a_matrix():
  """A 1024 x 4096 kernel: Adam keeps a bf16 first moment and an fp32 second moment (6 bytes an
  entry); Adafactor its bf16 momentum and 1024 + 4096 second-moment values."""
  params = {"w": np.zeros((1024, 4096), np.float32)}
  n = 1024 * 4096
  adam, _ = optimizer.build_optimizer(adafactor_config(name="adamw"), total_steps=10)
  adafactor, _ = optimizer.build_optimizer(adafactor_config(), total_steps=10)
  assert state_bytes(adam, params) >= 6 * n
  assert state_bytes(adafactor, params) <= 2 * n + 4 * (1024 + 4096) + 64


def test_big_visions_weight_decay_follows_the_schedule_and_decays_the_head_100x():
  """big_vision optax.py make: lr x the optimizer's update (line 115) plus wd x mult x param
  (lines 132-138), both times the schedule's factor (lines 88-90), negated: the decay is not
  scaled by lr. train_vit_g.py:73-77: wd 0.03 x 8e-4, 100x on head/kernel."""
  lr, wd, warmup = 8e-4, 0.03 * 8e-4, 4
  config = adafactor_config(
      lr=lr,
      weight_decay=wd,
      decoupled_weight_decay=True,
      head_weight_decay_mult=100.0,
      momentum=0.0,
  )
  config.update(schedule="rsqrt", warmup_steps=warmup, rsqrt_timescale=10)
  tx, schedule = optimizer.build_optimizer(config, total_steps=100)
  params = {
      "head": {"kernel": np.full((4, 3), 2.0, np.float32), "bias": np.ones(3, np.float32)},
      "Dense_0": {"kernel": np.full((4, 4), 3.0, np.float32)},
  }
  zeros = jax.tree.map(np.zeros_like, params)
  state = tx.init(params)
  for step in range(6):
    update, state = tx.update(zeros, state, params)  # zero gradients: only the decay moves
    factor = float(schedule(step)) / lr  # the schedule's multiplier, big_vision's
    np.testing.assert_allclose(update["head"]["kernel"], -factor * wd * 100 * 2.0, rtol=1e-5)
    np.testing.assert_allclose(update["Dense_0"]["kernel"], -factor * wd * 3.0, rtol=1e-5)
    np.testing.assert_allclose(update["head"]["bias"], 0.0)


def test_a_head_decay_multiplier_needs_a_head():
  config = adafactor_config(weight_decay=1e-4, head_weight_decay_mult=10.0)
  tx, _ = optimizer.build_optimizer(config, total_steps=10)
  with pytest.raises(errors.ConfigError, match="head_weight_decay_mult"):
    tx.init({"Dense_0": {"kernel": np.zeros((4, 4), np.float32)}})
