"""The trainer's update step on real digits batches: the non-finite guard and accumulation."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests import helpers
from vit_jax import tasks
from vit_jax.models import build_model
from vit_jax.training import optimizer as optimizer_lib
from vit_jax.training import train


def setup(data_dir, **step_options):
  """(jitted step, fresh state, one real batch) for a tiny ViT on digits, without dropout."""
  config = helpers.vit_config("runlocal", data_dir=data_dir, progress="lines", batch_size=16)
  config.model.dropout_rate = 0.0  # so microbatches see the same function as the full batch
  task = tasks.build_task(config, workdir=None)
  model = build_model({**config.model.to_dict(), **task.model_overrides()})
  tx, schedule = optimizer_lib.build_optimizer(config.optimizer, config.total_steps)
  params = model.init(jax.random.PRNGKey(0), *task.init_inputs())["params"]
  state = {"params": params, "opt_state": tx.init(params), "step": np.int32(0)}
  batch = next(iter(task.train_batches(0, 0, 1)))
  step = functools.partial(
      train.update_step,
      task=task,
      model=model,
      tx=tx,
      schedule=schedule,
      step_rng=jax.random.PRNGKey(1),
      **step_options,
  )
  return jax.jit(step), state, batch


def leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


@pytest.mark.parametrize("by_select", [False, True])  # CPU's branch, TPU's select
def test_nan_injection_poisons_the_gradients_and_the_step_changes_nothing(digits_dir, by_select):
  step, state, batch = setup(digits_dir, nan_at_step=2, guard_by_select=by_select)
  before = leaves(state)
  state, metrics = step(state, batch)  # step 1: a normal update
  assert metrics["finite"] == 1.0 and np.isfinite(metrics["grad_norm"])
  assert any(not np.array_equal(a, b) for a, b in zip(before, leaves(state["params"])))
  kept = lambda s: leaves({"params": s["params"], "opt_state": s["opt_state"]})
  good = kept(state)
  state, metrics = step(state, batch)  # step 2: NaN loss and gradients, skipped by the guard
  assert np.isnan(metrics["train_loss"]) and np.isnan(metrics["grad_norm"])
  assert metrics["finite"] == 0.0 and int(state["step"]) == 2
  for a, b in zip(kept(state), good):
    np.testing.assert_array_equal(a, b)


def test_unguarded_step_applies_the_nan_update(digits_dir):
  """guard_nonfinite=False (for measuring the guard's cost) really drops the guard."""
  step, state, batch = setup(digits_dir, nan_at_step=1, guard_nonfinite=False)
  state, metrics = step(state, batch)
  assert metrics["finite"] == 0.0
  assert all(np.isnan(p).all() for p in leaves(state["params"]))


def test_gradient_accumulation_equals_the_full_batch_step(digits_dir):
  full, state, batch = setup(digits_dir)
  accumulated, _, _ = setup(digits_dir, grad_accum_steps=4)
  new_full, metrics_full = full(state, batch)
  new_accum, metrics_accum = accumulated(state, batch)
  for key in ("train_loss", "grad_norm", "train_accuracy"):
    np.testing.assert_allclose(metrics_accum[key], metrics_full[key], rtol=1e-5, err_msg=key)
  for a, b in zip(leaves(new_accum["params"]), leaves(new_full["params"])):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


class _SqrtTask:
  """loss = sum(sqrt(w)) (+ NaN on request): its gradient is infinite where w is 0."""

  def __init__(self, nan_loss=False):
    self.nan_loss = nan_loss

  def totals(self, batch):
    del batch
    return {}

  def apply(self, model, params, batch, train, rng):
    del model, batch, train, rng
    return params["w"]

  def loss(self, w, batch, totals):
    del batch, totals
    loss = jnp.sum(jnp.sqrt(w))
    if self.nan_loss:  # NaN loss, finite gradient
      loss = loss + jax.lax.stop_gradient(jnp.nan)
    return loss, {}


def sqrt_step(task, tx):
  return functools.partial(
      train.update_step,
      task=task,
      model=None,
      tx=tx,
      schedule=lambda s: 0.1,
      step_rng=jax.random.PRNGKey(0),
  )


def test_a_step_with_only_its_loss_or_only_its_gradients_non_finite_changes_nothing():
  tx = optax.sgd(0.1)
  for w, task in (([0.0, 1.0], _SqrtTask()), ([4.0, 1.0], _SqrtTask(nan_loss=True))):
    params = {"w": jnp.array(w)}
    state = {"params": params, "opt_state": tx.init(params), "step": jnp.int32(0)}
    step = sqrt_step(task, tx)
    new_state, metrics = jax.jit(step)(state, {})
    assert np.isfinite(metrics["train_loss"]) != np.isfinite(metrics["grad_norm"])
    assert metrics["finite"] == 0.0 and int(new_state["step"]) == 1
    np.testing.assert_array_equal(new_state["params"]["w"], w)
  # And a finite step moves: the guard is not simply always on.
  params = {"w": jnp.array([4.0, 1.0])}
  state = {"params": params, "opt_state": tx.init(params), "step": jnp.int32(0)}
  step = sqrt_step(_SqrtTask(), tx)
  new_state, metrics = jax.jit(step)(state, {})
  assert metrics["finite"] == 1.0
  np.testing.assert_allclose(new_state["params"]["w"], [4.0 - 0.1 * 0.25, 1.0 - 0.1 * 0.5])
