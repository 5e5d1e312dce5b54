"""The trainer: one jit-compiled step over a device mesh, for every task and model of the project.

Read top to bottom: task, then model, mesh, optimizer, shardings and the jitted update step
(build.py, shared with `vit_jax.compile`), the evaluators (`config.evals`, vit_jax/evaluate),
state (fresh, resumed or fine-tuned), and the loop with logging, checkpoints, preemption and
non-finite checks. The same code runs on one CPU and on a multi-host pod. The loop waits for the
devices only at log, save and eval points: between them the host dispatches steps ahead, with
input batches already on the devices.
"""

import json
import os
import time

import jax
import numpy as np

from vit_jax import checkpoint
from vit_jax import data
from vit_jax import errors
from vit_jax import tasks
from vit_jax import workdir as workdir_lib
from vit_jax.config import checks
from vit_jax.evaluate import registry as evaluator_registry
from vit_jax.training import build
from vit_jax.training import flops
from vit_jax.training import host_input
from vit_jax.training import metrics_log
from vit_jax.training import preemption


class NonFiniteError(FloatingPointError):
  """The loss or the gradients stopped being finite."""


def train_and_evaluate(config, workdir: str) -> dict:
  """Trains (resuming from `workdir` if it holds a checkpoint) and returns the final eval metrics.

  With `total_steps=0` a new workdir gets the initialized model saved as step 0 (to export it).
  A write the file system refuses (full, over quota, read-only) is a `StorageError` naming the
  last good checkpoint, with the unfinished step it interrupted deleted, so that rerunning the
  same command once the cause is fixed resumes exactly.
  """
  try:
    with data.opened_once():  # the checks, the input and the evaluators share each dataset
      return _train_and_evaluate(config, workdir)
  except errors.UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    if errors.storage_cause(e) is None:
      raise
    checkpoint.discard_partial_saves(workdir)
    saved = checkpoint.step_dirs(workdir)
    then = (
        f"rerun the same command to resume from step {os.path.basename(saved[0])}, the last good "
        f"checkpoint ({saved[0]})"
        if saved
        else "rerun the same command (no checkpoint was saved yet)"
    )
    raise errors.storage_error(e, where=workdir, then=then) from e
  finally:
    workdir_lib.unlock(workdir)


def _train_and_evaluate(config, workdir: str) -> dict:
  started = time.time()
  data_notes = checks.validate_training(config, workdir)  # before anything is written
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:  # one writer per workdir; the job's other processes share it
    workdir_lib.lock(workdir)

  # ---- Task, model, mesh, optimizer, state shardings and the jitted steps (build.py) ----------
  task = tasks.build_task(config, workdir)
  built = build.build_step(config, task)
  model_config, mesh, tx = built.model_config, built.mesh, built.tx
  abstract_state, state_shardings = built.abstract_state, built.state_shardings
  # Each checks its data now (splits, class counts, probe sizes): a problem stops the run here.
  evaluators = evaluator_registry.build(config, task, built)
  if config.check_memory:  # before step 1: a step that cannot fit fails here, not mid-run
    from vit_jax.training import aot  # pylint: disable=g-import-not-at-top  (only this option)

    report = aot.compile_report(built, config.batch_size)
    print(report.text(), flush=True)
    aot.require_fit(report)

  # ---- State: resumed, fine-tuned or fresh; sharded by the partitioning rules -----------------
  async_save = config.async_checkpoints
  if async_save is None:  # overlap saves with training on accelerators; CPU runs save in line
    async_save = jax.default_backend() != "cpu"
  ckpt = checkpoint.Checkpointer(
      workdir,
      config.checkpoint_every,
      config.keep_checkpoints,
      checkpoint.model_record(model_config, abstract_state["params"], task.record()),
      async_save=async_save,
  )
  abstract = jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
      abstract_state,
      state_shardings,
  )
  latest, state = ckpt.restore_latest_intact(abstract)  # damaged newer steps are moved aside
  if latest is not None:
    print(f"Resumed from {ckpt.directory} at step {latest}.", flush=True)
  else:
    state = jax.jit(built.init_state, out_shardings=state_shardings)(built.init_rng)
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
      state = {"params": params, "opt_state": opt_state, "step": state["step"]}
  start_step = int(state["step"])
  mfu_meter = flops.MfuMeter(model_config, task.init_inputs(1))  # model FLOPs / device peak
  if jax.process_index() == 0:  # only after the checks above, so a refused workdir is untouched
    with open(workdir_lib.config_path(workdir), "w", encoding="utf-8") as f:
      f.write(config.to_json_best_effort(indent=2))
    # What a scaling sweep needs without rebuilding the model (vit_jax/sweep/collect.py).
    run_info = {
        "num_params": flops.count_params(abstract_state["params"]),
        "train_flops_per_example": mfu_meter.flops_per_example,
        "train_examples": task.train_size(),
        "batch_size": config.batch_size,
        "total_steps": config.total_steps,
    }
    with open(workdir_lib.run_info_path(workdir), "w", encoding="utf-8") as f:
      json.dump(run_info, f, indent=2)
    task.save_assets(workdir)

  # ---- Evaluation: each evaluator every `every` steps and at the last step, as NAME/metric ----
  train_step = built.train_step
  latest_evals = {}  # the last metrics of each evaluator, returned at the end

  def evaluate(step: int, params, everything: bool) -> None:
    due = [e for e in evaluators if everything or step % e.every == 0]
    metrics = {f"{e.name}/{k}": v for e in due for k, v in e.run(params).items()}
    if metrics:
      log.write(step, metrics)
      latest_evals.update(metrics)

  # ---- Loop -----------------------------------------------------------------------------------
  log = metrics_log.MetricsLog(
      workdir, config.total_steps, start_step, config.progress, started=started
  )
  if data_notes:  # e.g. corrupt images skipped
    log.write(start_step, data_notes)
  train_batches = host_input.train_batches(
      lambda shard, count: task.train_batches(start_step, shard, count), config.input_shards
  )
  batches = host_input.prefetch_to_mesh(train_batches, mesh, config.prefetch_batches)
  watcher = preemption.PreemptionWatcher()
  pending, last_step = [], start_step
  last_time = time.time()
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
    for step in range(start_step, config.total_steps):
      batch = next(batches)
      with jax.set_mesh(mesh):  # the target platform for attention_impl=auto (splash on TPU)
        state, metrics = train_step(state, batch)
      pending.append(metrics)
      done = step + 1
      is_last = done == config.total_steps
      # Hosts agree on a preemption only where they wait for the devices anyway.
      sync_point = (
          is_last
          or ckpt.should_save(done)
          or done % config.log_every == 0
          or any(done % e.every == 0 for e in evaluators)
      )
      preempted = watcher.should_stop(sync_point)
      if sync_point or preempted:
        fetched = jax.device_get(pending)
        skipped += check_finite(fetched, last_step)
        averaged = {k: float(np.mean([m[k] for m in fetched])) for k in fetched[0] if k != "finite"}
        now = time.time()
        averaged["examples_per_sec"] = config.batch_size * (done - last_step) / (now - last_time)
        averaged["mfu"] = mfu_meter.mfu(averaged["examples_per_sec"])
        if skipped:
          averaged["skipped_steps"] = skipped
        if done % config.log_every == 0 or is_last:
          log.write(done, averaged)
        pending, last_time, last_step = [], now, done
      ckpt.save(done, state, force=is_last or preempted)  # first: a failing eval loses nothing
      if is_last or any(done % e.every == 0 for e in evaluators):
        evaluate(done, state["params"], everything=is_last)
        last_time = time.time()  # eval time is not training throughput
      log.advance(done)
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
      evaluate(start_step, state["params"], everything=True)
  finally:
    watcher.close()
    ckpt.close()
    log.close()
  return {**latest_evals, "final_params": state["params"]}
