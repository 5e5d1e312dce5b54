"""The trainer: one jit-compiled step over a device mesh, for every task and model of the project.

Read top to bottom: task and model, mesh, optimizer, state (fresh, resumed or fine-tuned), the
update step, evaluation, and the loop with logging and checkpoints.
"""

import os
import queue
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vit_jax import checkpoint
from vit_jax import init_from
from vit_jax import metrics_log
from vit_jax import optimizer as optimizer_lib
from vit_jax import sharding
from vit_jax import tasks
from vit_jax.models import build_model


def prefetch_to_mesh(batches, mesh, size: int = 2):
  """Turns host batches into global device arrays, `size` ahead in a background thread.

  size=0 produces each batch on the caller's thread when it is needed (simpler to debug, and
  needed under tfds.testing.mock_data, whose file-system patch is global while it reads).
  """
  if size == 0:
    yield from (sharding.global_batch(batch, mesh) for batch in batches)
    return
  q = queue.Queue(maxsize=size)
  sentinel = object()

  def produce():
    try:
      for batch in batches:
        q.put(sharding.global_batch(batch, mesh))
      q.put(sentinel)
    except Exception as e:  # pylint: disable=broad-except
      q.put(e)

  threading.Thread(target=produce, daemon=True).start()
  while True:
    item = q.get()
    if item is sentinel:
      return
    if isinstance(item, Exception):
      raise item
    yield item


def train_and_evaluate(config, workdir: str) -> dict:
  """Trains (resuming from `workdir` if it holds a checkpoint) and returns the final eval metrics."""
  os.makedirs(workdir, exist_ok=True)
  rng = jax.random.PRNGKey(config.seed)

  # ---- Task and model -------------------------------------------------------------------------
  task = tasks.build_task(config, workdir)
  model_config = {**config.model.to_dict(), **task.model_overrides()}
  model = build_model(model_config)

  # ---- Mesh -----------------------------------------------------------------------------------
  mesh = sharding.make_mesh(config.mesh)
  accum = config.grad_accum_steps
  divisor = sharding.batch_divisor(mesh) * accum
  if config.batch_size % divisor:
    raise ValueError(f"batch_size={config.batch_size} must be divisible by the batch shards times "
                     f"grad_accum_steps ({divisor}).")
  replicated = sharding.replicated(mesh)

  # ---- Optimizer ------------------------------------------------------------------------------
  tx, schedule = optimizer_lib.build_optimizer(config.optimizer, config.total_steps)

  # ---- State: resumed, fine-tuned or fresh ----------------------------------------------------
  def init_state(init_rng):
    params = model.init(init_rng, *task.init_inputs())["params"]
    return {"params": params, "opt_state": tx.init(params), "step": jnp.array(0, jnp.int32)}

  init_rng, step_rng = jax.random.split(rng)
  abstract_state = jax.eval_shape(init_state, init_rng)
  ckpt = checkpoint.Checkpointer(workdir, config.checkpoint_every, config.keep_checkpoints,
                                 checkpoint.model_record(model_config, abstract_state["params"],
                                                         getattr(task, "record", dict)()),
                                 async_save=config.async_checkpoints)
  latest = ckpt.latest_step()
  if latest is not None:
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated),
                            abstract_state)
    state = ckpt.restore(latest, abstract)
    print(f"Resumed from {ckpt.directory} at step {latest}.", flush=True)
  else:
    state = jax.jit(init_state, out_shardings=replicated)(init_rng)
    if config.init_from:
      pretrained = init_from.read_pretrained(config.init_from)
      prefix = 1 if model_config.get("classifier", "token") == "token" else 0
      params, notes = init_from.merge(jax.device_get(state["params"]), pretrained,
                                      prefix_tokens=prefix)
      for note in notes:
        print(f"init_from: {note}", flush=True)
      params = jax.device_put(params, replicated)
      state = {"params": params, "opt_state": jax.jit(tx.init, out_shardings=replicated)(params),
               "step": state["step"]}
  start_step = int(state["step"])
  if jax.process_index() == 0:  # only after the checks above, so a refused workdir is untouched
    with open(os.path.join(workdir, "config.json"), "w", encoding="utf-8") as f:
      f.write(config.to_json_best_effort(indent=2))
    if hasattr(task, "save_assets"):
      task.save_assets(workdir)

  # ---- Update step ----------------------------------------------------------------------------
  def train_step(state, batch):
    params, step = state["params"], state["step"]
    # Full-batch normalizers (e.g. example or token counts): each microbatch's loss is already
    # divided by them, so the microbatch losses and gradients add up to the full batch's.
    totals = task.totals(batch)

    def grads_of(micro_batch, index):
      rng = jax.random.fold_in(jax.random.fold_in(step_rng, step), index)

      def loss_fn(p):
        outputs = task.apply(model, p, micro_batch, train=True, rng=rng)
        return task.loss(outputs, micro_batch, totals)

      (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
      return loss, metrics, grads

    if accum == 1:
      loss, task_metrics, grads = grads_of(batch, 0)
    else:  # microbatches one after another; their gradients add up to the full batch's
      micro = jax.tree.map(lambda x: x.reshape((accum, x.shape[0] // accum) + x.shape[1:]), batch)
      first = grads_of(jax.tree.map(lambda x: x[0], micro), 0)
      add = lambda total, inputs: (jax.tree.map(jnp.add, total, grads_of(inputs[1], inputs[0])),
                                   None)
      (loss, task_metrics, grads), _ = jax.lax.scan(
          add, first, (jnp.arange(1, accum), jax.tree.map(lambda x: x[1:], micro)))
    updates, opt_state = tx.update(grads, state["opt_state"], params)
    new_state = {"params": optax.apply_updates(params, updates), "opt_state": opt_state,
                 "step": step + 1}
    metrics = {"train_loss": loss, "grad_norm": optax.global_norm(grads),
               "learning_rate": schedule(step),
               **task_metrics}
    return new_state, metrics

  batch_sharding = sharding.batch_sharding(mesh)
  train_step = jax.jit(train_step, in_shardings=(replicated, batch_sharding),
                       out_shardings=(replicated, replicated), donate_argnums=(0,))

  # ---- Evaluation -----------------------------------------------------------------------------
  eval_step = jax.jit(lambda params, batch: task.eval_sums(task.apply(model, params, batch, False),
                                                           batch),
                      in_shardings=(replicated, batch_sharding), out_shardings=replicated)

  def evaluate(params) -> dict:
    sums = None
    batches = task.eval_batches(jax.process_index(), jax.process_count())
    for i, batch in enumerate(prefetch_to_mesh(batches, mesh, config.prefetch_batches)):
      if config.eval_max_batches is not None and i >= config.eval_max_batches:
        break
      out = eval_step(params, batch)
      sums = out if sums is None else jax.tree.map(jnp.add, sums, out)
    return task.eval_summary(jax.device_get(sums))

  # ---- Loop -----------------------------------------------------------------------------------
  log = metrics_log.MetricsLog(workdir, config.total_steps, start_step, config.progress)
  batches = prefetch_to_mesh(
      task.train_batches(start_step, jax.process_index(), jax.process_count()), mesh,
      config.prefetch_batches)
  pending, last_time, last_step = [], time.time(), start_step
  eval_metrics = {}
  for step in range(start_step, config.total_steps):
    state, metrics = train_step(state, next(batches))
    pending.append(metrics)
    done = step + 1
    is_last = done == config.total_steps
    if done % config.log_every == 0 or is_last:
      averaged = {k: float(np.mean([m[k] for m in jax.device_get(pending)])) for k in pending[0]}
      if not np.isfinite(averaged["train_loss"]):
        raise FloatingPointError(f"Non-finite training loss at step {done}; the last good "
                                 f"checkpoint in {ckpt.directory} is kept.")
      now = time.time()
      averaged["examples_per_sec"] = config.batch_size * (done - last_step) / (now - last_time)
      log.write(done, averaged)
      pending, last_time, last_step = [], now, done
    if done % config.eval_every == 0 or is_last:
      eval_metrics = evaluate(state["params"])
      log.write(done, eval_metrics)
      last_time = time.time()  # eval time is not training throughput
    ckpt.save(done, state, force=is_last)
    log.advance(done)
  if start_step >= config.total_steps:  # nothing left to train: report the saved model
    eval_metrics = evaluate(state["params"])
    log.write(start_step, eval_metrics)
  ckpt.close()
  log.close()
  return {**eval_metrics, "final_params": state["params"]}

