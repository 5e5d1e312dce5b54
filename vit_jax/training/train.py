"""The trainer: one jit-compiled step over a device mesh, for every task and model of the project.

Read top to bottom, after what the steps run on (the model, mesh, optimizer and state
shardings: training/setup.py's `prepare`): the update step (`update_step`: the loss, its
gradients accumulated over microbatches, the non-finite guard and the optimizer update); then
`train_and_evaluate`: state (fresh, resumed or fine-tuned), the evaluators (`config.evals`,
vit_jax/evaluate) and the loop with logging, checkpoints, preemption notices
(training/job_end.py) and non-finite checks, each log window's time breakdown and the run's
goodput (training/metrics_log.py), and `profile_steps` traces (training/profiling.py).
`vit_jax.compile` compiles the same jitted step for a TPU slice (`prepare` and `jit_update_step`
over the slice's devices).

The same code runs on one CPU and on a multi-host pod. The loop waits for the devices only at
log, save and eval points: between them the host dispatches steps ahead, with input batches
already on the devices.
"""

import contextlib
import functools
import json
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vit_jax import checkpoint
from vit_jax import data
from vit_jax import errors
from vit_jax import evaluate as evaluator_registry
from vit_jax import startup
from vit_jax import storage
from vit_jax import tasks
from vit_jax import workdir as workdir_lib
from vit_jax.config import checks
from vit_jax.models import attention
from vit_jax.storage import outages
from vit_jax.training import flops
from vit_jax.training import host_input
from vit_jax.training import job_end
from vit_jax.training import mesh as mesh_lib
from vit_jax.training import metrics_log
from vit_jax.training import optimizer as optimizer_lib
from vit_jax.training import setup as setup_lib

# ---- Update step -------------------------------------------------------------------------------


def update_step(
    state: dict,
    batch: dict,
    *,
    task,
    model,
    tx: optax.GradientTransformation,
    schedule: Callable,
    step_rng: jax.Array,
    grad_accum_steps: int = 1,
    ema_decay: float | None = None,
    nan_at_step: int | None = None,
    guard_nonfinite: bool = True,
    guard_by_select: bool | None = None,
    log_internals: bool = False,
) -> tuple[dict, dict]:
  """One optimizer step on a global batch: (state, batch) -> (new state, scalar metrics).

  The task's loss is normalized by the full batch's totals (examples, tokens), so the losses and
  gradients of `grad_accum_steps` microbatches, taken one after another, add up to the full
  batch's. With `ema_decay`, the state's "ema_params" average the updated params
  (training/optimizer.py). A step whose loss or gradients are not finite changes nothing, the
  average included; the trainer then stops or counts it (`config.nonfinite`). `log_internals`
  adds the RMS of the parameters, gradients and updates per block group
  (training/health_metrics.py).

  `nan_at_step` (1-based, as logged) is fault injection: that step's loss and gradients become
  NaN, to exercise the guard. `guard_nonfinite=False` applies every update as it is; it exists to
  measure what the guard costs (`benchmarks/guard_cost.py`), the trainer keeps it on.
  `guard_by_select` chooses how the guard keeps the state (see `_update_if_finite`); None: by the
  platform the step is lowered for.
  """
  params, step = state["params"], state["step"]
  totals = task.totals(batch)  # the full batch's normalizers, for every microbatch

  def loss_fn(params, micro_batch, index):
    rng = jax.random.fold_in(jax.random.fold_in(step_rng, step), index)
    outputs = task.apply(model, params, micro_batch, train=True, rng=rng)
    return task.loss(outputs, micro_batch, totals)  # (loss, task metrics)

  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
  (loss, task_metrics), grads = _summed_over_microbatches(grad_fn, params, batch, grad_accum_steps)
  if nan_at_step is not None:
    poison = lambda x: jnp.where(step + 1 == nan_at_step, jnp.nan, x)
    loss, grads = poison(loss), jax.tree.map(poison, grads)
  grad_norm = optax.global_norm(grads)
  finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

  def apply_update(grads, params, opt_state, ema_params):
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    if ema_decay is not None:
      ema_params = optimizer_lib.ema_update(
          ema_params, params, optimizer_lib.ema_decay_at(step, ema_decay)
      )
    return params, opt_state, ema_params

  # The rate this step applies: the schedule at the optimizer's own count, not at `step`. A
  # skipped step keeps the whole optimizer state, count included (advancing it would also advance
  # Adam's bias correction for an update never made), so after a skip the count trails `step` and
  # schedule(step) would log a rate never applied; the schedule ends that many steps short.
  schedule_states = [
      s
      for s in jax.tree.leaves(state["opt_state"], is_leaf=_is_schedule_state)
      if _is_schedule_state(s)
  ]
  learning_rate = schedule(schedule_states[0].count if schedule_states else step)
  updated = (
      params,
      state["opt_state"],
      state[checkpoint.EMA_PARAMS] if ema_decay is not None else None,
  )
  if guard_nonfinite:
    if guard_by_select is None:
      guard_by_select = attention.target_platform() in GUARD_BY_SELECT_PLATFORMS
    updated = _update_if_finite(finite, apply_update, grads, updated, guard_by_select)
  else:
    updated = apply_update(grads, *updated)
  new_params, opt_state, ema_params = updated
  metrics = {
      "train_loss": loss,
      "grad_norm": grad_norm,
      "learning_rate": learning_rate,
      "finite": finite.astype(jnp.float32),
      **task_metrics,
  }
  if log_internals:  # the update as applied: zero for a skipped non-finite step
    from vit_jax.training import health_metrics  # pylint: disable=g-import-not-at-top

    updates = jax.tree.map(jnp.subtract, new_params, params)
    metrics.update(health_metrics.metrics(new_params, grads, updates))
  new_state = {"params": new_params, "opt_state": opt_state, "step": step + 1}
  if ema_decay is not None:
    new_state[checkpoint.EMA_PARAMS] = ema_params
  return new_state, metrics


# Where the non-finite guard is a select per leaf rather than a branch (`_update_if_finite`).
GUARD_BY_SELECT_PLATFORMS = ("tpu", "gpu")


def _update_if_finite(finite, apply_update, grads, state: tuple, by_select: bool):
  """`apply_update(grads, *state)` if `finite`, else `state` as it was: the non-finite guard.

  By select (a `where` per leaf) on TPU and GPU: XLA fuses it into the optimizer's update, which
  reads the old state anyway, where a branch made XLA copy the state around it (on a TPU +4.5%
  of the bytes a ViT-B/16 step moves, +5.5% of GPT-2's; benchmarks/README.md, "Train-step memory
  and traffic on a TPU slice"; on a GPU one copy kernel per leaf, 590 for GPT-2, 1.5 GB, "What
  the compiled step moves on a GPU"). By a branch (`lax.cond`) on CPU: there it costs nothing
  measurable, and the select up to 5.8% of a ViT-Ti/16 step (benchmarks/README.md, "The
  non-finite guard").
  """
  if by_select:
    updated = apply_update(grads, *state)
    keep = lambda new, old: jnp.where(finite, new, old)
    return jax.tree.map(keep, updated, state)
  keep_state = lambda grads, *state: state
  return jax.lax.cond(finite, apply_update, keep_state, grads, *state)


def _is_schedule_state(x) -> bool:
  return isinstance(x, optax.ScaleByScheduleState)


def _summed_over_microbatches(grad_fn, params, batch: dict, num_micro: int):
  """`grad_fn(params, micro_batch, index)` summed over `num_micro` equal slices of `batch`, one
  after another (a scan: one microbatch's activations in memory at a time)."""
  if num_micro == 1:
    return grad_fn(params, batch, 0)
  micro = jax.tree.map(
      lambda x: x.reshape((num_micro, x.shape[0] // num_micro) + x.shape[1:]), batch
  )
  first = grad_fn(params, jax.tree.map(lambda x: x[0], micro), 0)

  def add(total, inputs):
    index, micro_batch = inputs
    return jax.tree.map(jnp.add, total, grad_fn(params, micro_batch, index)), None

  rest = (jnp.arange(1, num_micro), jax.tree.map(lambda x: x[1:], micro))
  return jax.lax.scan(add, first, rest)[0]


def jit_update_step(config, setup: setup_lib.Setup, **step_options) -> Callable:
  """`update_step` with the run's settings, jitted over the mesh; the state buffers are donated.
  `step_options` (update_step's keywords, e.g. the guard's) change a setting, for benchmarks."""
  settings = dict(
      grad_accum_steps=config.grad_accum_steps,
      nan_at_step=config.debug_nan_at_step,
      log_internals=config.log_internals,
  )
  step = functools.partial(
      update_step,
      task=setup.task,
      model=setup.model,
      tx=setup.tx,
      schedule=setup.schedule,
      step_rng=setup.step_rng,
      ema_decay=setup.ema_decay,
      **{**settings, **step_options},
  )
  return jax.jit(
      step,
      in_shardings=(setup.state_shardings, mesh_lib.batch_sharding(setup.mesh)),
      out_shardings=(setup.state_shardings, mesh_lib.replicated(setup.mesh)),
      donate_argnums=(0,),
  )


# ---- The run: state, evaluators and the loop ----------------------------------------------------


class NonFiniteError(FloatingPointError):
  """The loss or the gradients stopped being finite."""


def train_and_evaluate(config, workdir: str) -> dict:
  """Trains (resuming from `workdir` if it holds a checkpoint) and returns the final eval metrics.

  With `total_steps=0` a new workdir gets the initialized model saved as step 0 (to export it).
  A write the file system refuses (full, over quota, read-only) is a `StorageError` naming the
  last good checkpoint, with the unfinished step it interrupted deleted, so that rerunning the
  same command once the cause is fixed resumes exactly. A bucket workdir's outages are ridden out
  for `config.storage_outage_s` (storage/outages.py, checkpoint.py, metrics_log.py); a longer one
  is a `StorageUnavailableError`, with nothing saved lost.
  """
  try:
    with data.opened_once():  # the checks, the input and the evaluators share each dataset
      return _train_and_evaluate(config, workdir)
  except errors.UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    from vit_jax.training import device_memory  # pylint: disable=g-import-not-at-top

    if device_memory.out_of_memory(e):  # past check_fits: at run time (an eval, fragmentation)
      raise device_memory.ran_out(config, e) from e
    if errors.storage_cause(e) is None:
      raise
    raise checkpoint.refused_write_error(e, workdir) from e
  finally:
    workdir_lib.unlock(workdir)


def _train_and_evaluate(config, workdir: str) -> dict:
  started = time.time()
  startup_clock = metrics_log.StartupClock(started)  # run_info.json's startup_s, by part
  checks.validate_config(config)
  outages.set_outage_budget(config.storage_outage_s)  # before the first request to a bucket
  checks.validate_training(config, workdir)  # before anything is written
  storage.makedirs(workdir)
  if jax.process_index() == 0:  # one writer per workdir; the job's other processes share it
    workdir_lib.lock(workdir)
  startup.use_compilation_cache(
      startup.compilation_cache_path(
          config.compilation_cache_dir, workdir_lib.compilation_cache_dir(workdir)
      )
  )  # a rerun loads the compiled step instead of compiling it again
  startup_clock.lap("checks")

  # ---- Task, model, mesh, optimizer, state shardings, and the jitted update step --------------
  task = tasks.build_task(config, workdir)
  startup_clock.lap("task")
  setup = setup_lib.prepare(config, task)
  mesh, tx, state_shardings = setup.mesh, setup.tx, setup.state_shardings
  train_step = jit_update_step(config, setup)
  startup_clock.lap("model")
  # Each checks its data now (splits, class counts, probe sizes): a problem stops the run here.
  evaluators = evaluator_registry.build(config, task, setup, files_dir=workdir)
  startup_clock.lap("evaluators")
  if config.check_memory:  # before step 1: a step that cannot fit fails here, not mid-run
    from vit_jax.tpu_planning import aot  # pylint: disable=g-import-not-at-top  (only this option)

    report = aot.compile_report(setup, train_step, config.batch_size, list_peak_buffers=False)
    print(report.text(), flush=True)
    aot.require_fit(report)
    startup_clock.lap("memory check")

  # ---- State: resumed, fine-tuned or fresh; sharded by the rules of mesh.py -----------------
  ckpt = checkpoint.Checkpointer(
      workdir,
      config.checkpoint_every,
      config.keep_checkpoints,
      checkpoint.model_record(
          setup.model_config,
          setup.abstract_state["params"],
          task.record(),
          run_config=json.loads(config.to_json_best_effort()),
      ),
      async_save=config.async_checkpoints,
      keep_steps=tuple(config.keep_checkpoint_steps),
  )
  # Damaged newer steps are moved aside.
  latest, state = ckpt.restore_latest_intact(setup.sharded_abstract_state())
  startup_clock.lap("restore")  # the checkpoint manager, and the restore when there is a step
  if latest is not None:
    print(f"Resumed from {ckpt.directory} at step {latest}.", flush=True)
    if setup.ema_decay is not None and checkpoint.EMA_PARAMS not in state:  # EMA turned on mid-run
      print(
          f"note: checkpoint step {latest} has no EMA of the params; it starts from them now.",
          flush=True,
      )
      state[checkpoint.EMA_PARAMS] = optimizer_lib.ema_start_placed(
          state["params"], state_shardings
      )
  elif config.branch_from:  # the parent's state at the branch point; the parent is only read
    from vit_jax.training import branch  # pylint: disable=g-import-not-at-top  (only a branch)

    state = branch.restore(config, setup.sharded_abstract_state(), ckpt.record)
    print(branch.announcement(config), flush=True)
  else:
    state = setup.fresh_state()
    if config.init_from:
      # pylint: disable-next=g-import-not-at-top
      from vit_jax import interop  # only here: a run without init_from loads no converter

      params, notes = interop.finetune_params(
          state["params"], config.init_from, **task.init_from_rules()
      )
      for note in notes:
        print(f"init_from: {note}", flush=True)
      params = jax.device_put(params, state_shardings["params"])
      opt_state = jax.jit(tx.init, out_shardings=state_shardings["opt_state"])(params)
      state = {**state, "params": params, "opt_state": opt_state}
      if setup.ema_decay is not None:
        state[checkpoint.EMA_PARAMS] = optimizer_lib.ema_start_placed(params, state_shardings)
  start_step = int(state["step"])
  startup_clock.lap("state")
  mfu_meter = flops.MfuMeter(setup.model_config, task.init_inputs(1))  # model FLOPs / device peak
  # What a scaling sweep needs without rebuilding the model (vit_jax/sweep/collect.py), and the
  # run's goodput so far (training/metrics_log.py), rewritten at the start, with each checkpoint
  # and at the end: not at each logged step, where a bucket would take a new object each time.
  run_info = {
      "num_params": flops.count_params(setup.abstract_state["params"]),
      "train_flops_per_example": mfu_meter.flops_per_example,
      "train_examples": task.train_size(),
      "batch_size": config.batch_size,
      "total_steps": config.total_steps,
      "startup_s": startup_clock.parts,
  }

  def save_run_info(step: int) -> None:
    if jax.process_index() == 0:  # whole or not at all (it is rewritten while the run goes)
      run_info["goodput"] = {"step": step, **times.goodput.summary(log.elapsed())}
      log.replace(workdir_lib.run_info_path(workdir), json.dumps(run_info, indent=2))

  if jax.process_index() == 0:  # only after the checks above, so a refused workdir is untouched
    storage.write_text(workdir_lib.config_path(workdir), config.to_json_best_effort(indent=2))
    task.save_assets(workdir)

  # ---- Evaluation: each evaluator every `every` steps and at the last step, as NAME/metric ----
  latest_evals = {}  # the last metrics of each evaluator, returned at the end
  # The evals an earlier attempt already wrote, read on every process so all skip the same ones
  # (an evaluator is a collective). A rerun of a finished run, or one that recomputes steps past
  # an eval whose checkpoint was lost (an async save cut short), keeps the first row and does not
  # evaluate again: resume is exact, so the recomputed params are those that row scored, and
  # metrics.jsonl and TensorBoard keep one value per (step, evaluator).
  # With an EMA, each evaluator also scores it, logged as NAME_ema/metric in NAME's row: an
  # evaluator's recorded step has both, or only NAME's if the EMA started later.
  ema_names = {}
  if setup.ema_decay is not None:
    ema_names = {e.name: evaluator_registry.ema_name(e.name) for e in evaluators}
  recorded = metrics_log.recorded_evals(
      metrics_log.earlier_records(workdir_lib.metrics_path(workdir)),
      [e.name for e in evaluators] + list(ema_names.values()),
  )

  def evaluate(step: int, state: dict, everything: bool) -> None:
    due = [e for e in evaluators if everything or step % e.every == 0]
    for e in due:
      latest_evals.update(recorded.get((step, e.name), {}))
      latest_evals.update(recorded.get((step, ema_names.get(e.name)), {}))
    due = [e for e in due if (step, e.name) not in recorded]
    metrics = {}
    for e in due:
      metrics.update({f"{e.name}/{k}": v for k, v in e.run(state["params"], step).items()})
      if e.name in ema_names:
        ema_params = optimizer_lib.ema_like_params(state[checkpoint.EMA_PARAMS], state["params"])
        ema_metrics = e.run(ema_params, step, ema_names[e.name])
        metrics.update({f"{ema_names[e.name]}/{k}": v for k, v in ema_metrics.items()})
    if metrics:
      log.write(step, metrics)
      latest_evals.update(metrics)

  # ---- Loop -----------------------------------------------------------------------------------
  log = metrics_log.MetricsLog(
      workdir, config.total_steps, start_step, config.progress, started=started
  )
  input_plan = host_input.plan_input(mesh, config.batch_size, config.input_shards)
  train_batches = host_input.train_batches(
      lambda shard, count: task.train_batches(start_step, shard, count), input_plan
  )
  batches = host_input.prefetch_to_mesh(
      train_batches, mesh, config.batch_size, config.prefetch_batches
  )
  watcher = job_end.Watcher(start_step)
  trace = None  # a jax.profiler trace of config.profile_steps (by default on process 0 only)
  if config.profile_steps and (jax.process_index() == 0 or config.profile_all_processes):
    from vit_jax.training import profiling  # pylint: disable=g-import-not-at-top  (only if set)

    trace = profiling.TraceWindow(config.profile_steps, workdir_lib.tensorboard_dir(workdir))
  startup_clock.lap("logs and input")
  times = metrics_log.StepTimes(
      metrics_log.Goodput.resumed(log.earlier_records, start_step), time.time() - started
  )
  save_run_info(start_step)
  # `pending`: steps not yet fetched from the device (fetched at every sync point: log, save,
  # eval); `window`: those fetched since the last logged record, so each record averages every
  # step since the one before it, not only those since the last save or eval.
  pending, window, last_step, logged_step = [], [], start_step, start_step
  last_time, train_seconds = time.time(), 0.0
  skipped = 0

  def check_finite(metrics_list, first_step):
    """Raises (mode "stop") or counts (mode "skip") the non-finite steps among `metrics_list`."""
    flags = [float(m["finite"]) for m in metrics_list]
    bad = [first_step + i + 1 for i, f in enumerate(flags) if f == 0.0]
    if bad and config.nonfinite == "stop":
      raise NonFiniteError(
          f"Non-finite loss or gradients at step {bad[0]}; that update was not applied and "
          f"nothing after it was saved: the last good checkpoint in {ckpt.directory} is kept. "
          "Lower the learning rate, or set --config.nonfinite=skip to skip such steps."
      )
    return len(bad)

  try:
    if latest is not None and start_step < config.total_steps:
      # A step is saved before it is evaluated: the attempt that saved this one may have died
      # in its eval. Run the evals due here that metrics.jsonl lacks (none, usually).
      with times.timing("eval"):
        evaluate(start_step, state, everything=False)
    for step in range(start_step, config.total_steps):
      if trace:
        with times.timing("profile"):
          trace.at_step(step + 1, state)
      with jax.profiler.StepTraceAnnotation("train", step_num=step + 1):
        with times.timing("input_wait"):
          batch = next(batches)
        # The target platform for attention_impl=auto (splash on TPU) is the mesh's.
        with times.timing("compile" if step == start_step else "dispatch"), jax.set_mesh(mesh):
          if step == start_step and mesh.devices.flat[0].platform != "cpu":
            # pylint: disable-next=g-import-not-at-top  (a CPU reports no memory to check)
            from vit_jax.training import device_memory

            device_memory.check_fits(train_step, state, batch, setup)  # or stops before step 1
          state, metrics = train_step(state, batch)
      pending.append(metrics)
      done = step + 1
      is_last = done == config.total_steps
      sync_point = (
          is_last
          or ckpt.should_save(done)
          or done % config.log_every == 0
          or any(done % e.every == 0 for e in evaluators)
      )
      preempted = watcher.should_stop(done)  # the same step on every host
      if sync_point or preempted:
        with times.timing("device_wait"):
          fetched = jax.device_get(pending)
        skipped += check_finite(fetched, last_step)
        now = time.time()
        window += fetched
        train_seconds += now - last_time
        if done % config.log_every == 0 or is_last or preempted:
          averaged = {k: float(np.mean([m[k] for m in window])) for k in window[0] if k != "finite"}
          averaged["examples_per_sec"] = config.batch_size * (done - logged_step) / train_seconds
          averaged["mfu"] = mfu_meter.mfu(averaged["examples_per_sec"])
          averaged.update(task.data_progress(done))  # e.g. a mixture's tokens per source
          if skipped:
            averaged["skipped_steps"] = skipped
          log.write(done, {**averaged, **times.window(log.elapsed())})
          window, train_seconds, logged_step = [], 0.0, done
        pending, last_time, last_step = [], now, done
      with times.timing("checkpoint"):  # first: a failing eval loses nothing
        if ckpt.save(done, state, force=is_last or preempted):
          save_run_info(done)
      if is_last or any(done % e.every == 0 for e in evaluators):
        with times.timing("eval"):
          evaluate(done, state, everything=is_last)
        last_time = time.time()  # eval time is not training throughput
      log.advance(done)  # raises if a bucket stayed away past storage_outage_s
      workdir_lib.check_lock(workdir)  # stops while no other run may take the workdir over
      if preempted:
        print(
            f"SIGTERM: saved a checkpoint at step {done}; rerun the same command to resume.",
            flush=True,
        )
        break
    if start_step >= config.total_steps:  # nothing left to train: report the saved model
      if latest is None:  # total_steps=0: save the fresh (or init_from) model, e.g. to export it
        ckpt.save(0, state, force=True)
        print(
            f"total_steps=0: saved the initialized model as step 0 in {ckpt.directory}.", flush=True
        )
      evaluate(start_step, state, everything=True)
    save_run_info(max(start_step, last_step))
  except BaseException:
    _close(trace, watcher, ckpt, log, quietly=True)
    raise
  _close(trace, watcher, ckpt, log, quietly=False)
  return {**latest_evals, "final_params": state["params"]}


def _close(trace, watcher, ckpt, log, quietly: bool) -> None:
  """Ends the profile window the run ended inside, the preemption watcher, the checkpoints in
  flight and the logs. `quietly`: the run ends on an error, which is what gets reported, and a
  failure while closing (the same outage, say) is not raised over it."""
  for close in ([trace.close] if trace else []) + [watcher.close, ckpt.close, log.close]:
    if quietly:
      with contextlib.suppress(Exception):
        close()
    else:
      close()
