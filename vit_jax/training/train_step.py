"""The trainer's update and eval steps, as plain functions to jit (the trainer, benchmarks).

The update step takes the state {"params", "opt_state", "step"} and a global batch, and returns
the new state and scalar metrics. It accumulates gradients over microbatches, and a step whose
loss or gradients are not finite changes nothing (the trainer then stops or counts it).
"""

import jax
import jax.numpy as jnp
import optax


def make_train_step(
    task,
    model,
    tx,
    schedule,
    step_rng,
    *,
    grad_accum_steps: int = 1,
    nan_at_step: int | None = None,
    guard_nonfinite: bool = True,
    log_internals: bool = False,
):
  """`train_step(state, batch) -> (state, metrics)`, not yet jitted (callers pick shardings).

  `log_internals` adds the RMS of the parameters, gradients and updates per block group
  (training/health_metrics.py).

  `nan_at_step` (1-based, as logged) is fault injection: that step's loss and gradients become
  NaN, to exercise the non-finite guard. `guard_nonfinite=False` applies every update as it is;
  it exists to measure what the guard costs (`benchmarks/guard_cost.py`), the trainer keeps it on.
  """
  if log_internals:  # pylint: disable-next=g-import-not-at-top  (only runs that log them)
    from vit_jax.training import health_metrics

  def grads_of(params, micro_batch, totals, rng):
    def loss_fn(p):
      outputs = task.apply(model, p, micro_batch, train=True, rng=rng)
      return task.loss(outputs, micro_batch, totals)

    (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    return loss, metrics, grads

  def accumulated_grads(params, batch, step):
    # Full-batch normalizers: each microbatch's loss is already divided by them, so the
    # microbatch losses and gradients add up to the full batch's.
    totals = task.totals(batch)
    rng_of = lambda index: jax.random.fold_in(jax.random.fold_in(step_rng, step), index)
    if grad_accum_steps == 1:
      return grads_of(params, batch, totals, rng_of(0))
    micro = jax.tree.map(
        lambda x: x.reshape((grad_accum_steps, x.shape[0] // grad_accum_steps) + x.shape[1:]), batch
    )
    first = grads_of(params, jax.tree.map(lambda x: x[0], micro), totals, rng_of(0))

    def add(total, inputs):  # microbatches one after another
      index, micro_batch = inputs
      micro_out = grads_of(params, micro_batch, totals, rng_of(index))
      return jax.tree.map(jnp.add, total, micro_out), None

    rest = (jnp.arange(1, grad_accum_steps), jax.tree.map(lambda x: x[1:], micro))
    return jax.lax.scan(add, first, rest)[0]

  def train_step(state, batch):
    params, step = state["params"], state["step"]
    loss, task_metrics, grads = accumulated_grads(params, batch, step)
    if nan_at_step is not None:
      poison = lambda x: jnp.where(step + 1 == nan_at_step, jnp.nan, x)
      loss, grads = poison(loss), jax.tree.map(poison, grads)
    grad_norm = optax.global_norm(grads)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

    def update(grads, params, opt_state):
      updates, opt_state = tx.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state

    if guard_nonfinite:
      # A non-finite step changes nothing: params and optimizer state stay at the last good
      # values. A branch, not a `where` per leaf: the good step (nearly all of them) pays no
      # select over the whole state, which cost about 6% of a ViT-Ti/16 step on CPU.
      skip = lambda grads, params, opt_state: (params, opt_state)
      new_params, opt_state = jax.lax.cond(finite, update, skip, grads, params, state["opt_state"])
    else:
      new_params, opt_state = update(grads, params, state["opt_state"])
    new_state = {"params": new_params, "opt_state": opt_state, "step": step + 1}
    metrics = {
        "train_loss": loss,
        "grad_norm": grad_norm,
        "learning_rate": schedule(step),
        "finite": finite.astype(jnp.float32),
        **task_metrics,
    }
    if log_internals:  # the update as applied: zero for a skipped non-finite step
      updates = jax.tree.map(jnp.subtract, new_params, params)
      metrics.update(health_metrics.metrics(new_params, grads, updates))
    return new_state, metrics

  return train_step


def make_eval_step(task, model):
  """`eval_step(params, batch) -> sums` of the task's eval metrics over the batch."""
  return lambda params, batch: task.eval_sums(task.apply(model, params, batch, train=False), batch)
