"""Orbax checkpoints in `workdir/checkpoints`: save every N steps, keep the last K, resume.

Each checkpoint holds the train state (params, optimizer state, step and, with
`config.ema_decay`, the params' EMA) and a small JSON record of the model (its config and
parameter shapes), so a workdir is never resumed with another model. The trainer's record also
holds the run config of the attempt that saved the step (a rerun may change it), which a branch
off that step is compared with (training/branch.py).
"""

import contextlib
import json
import logging
import os
import re
import sys
import traceback
import warnings

import jax
from jax.experimental import multihost_utils
import numpy as np
import orbax.checkpoint as ocp

from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.config import args as config_args
from vit_jax.storage import outages


class CheckpointMismatchError(errors.UserError, ValueError):
  """The workdir holds a checkpoint of a different model than the config asks for."""


class OtherModelError(CheckpointMismatchError):
  """A step's model record is not the config's model: another model, or a damaged record."""


EMA_PARAMS = "ema_params"  # the train state's EMA of the params (training/optimizer.py), if any

# Train-state keys a config may add between attempts, each with the config key that adds it: a
# checkpoint without one restores without it (the trainer starts it); one with it restored by a
# config without it is a CheckpointMismatchError (resuming would drop it).
OPTIONAL_STATE = {EMA_PARAMS: "ema_decay"}
RUN_CONFIG = "run_config"  # the record's key of the run config that saved the step, if any


def model_record(
    model_config: dict, params, task_record: dict | None = None, run_config: dict | None = None
) -> dict:
  """What identifies a model: its config, parameter shapes and task assets (e.g. tokenizer);
  with `run_config` (a config's JSON as a dict), also the run config that saves the steps, which
  the model's identity leaves out."""
  shapes = {
      jax.tree_util.keystr(path): list(leaf.shape)
      for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
  }
  record = {
      "model": json.loads(json.dumps(model_config, default=str)),
      "param_shapes": shapes,
      "task": dict(task_record or {}),
  }
  if run_config is not None:
    record[RUN_CONFIG] = run_config
  return record


def describe_mismatch(saved: dict, current: dict) -> str:
  lines = []
  saved_task, task = saved.get("task", {}), current.get("task", {})
  for key in sorted(set(saved_task) | set(task)):
    if saved_task.get(key) != task.get(key):
      lines.append(f"  {key}: checkpoint {saved_task.get(key)!r}, now {task.get(key)!r}")
  saved_model, model = saved.get("model", {}), current["model"]
  for key in sorted(set(saved_model) | set(model)):
    if saved_model.get(key) != model.get(key):
      lines.append(f"  model.{key}: checkpoint {saved_model.get(key)!r}, config {model.get(key)!r}")
  saved_shapes, shapes = saved.get("param_shapes", {}), current["param_shapes"]
  for key in sorted(set(saved_shapes) | set(shapes)):
    if saved_shapes.get(key) != shapes.get(key):
      lines.append(f"  params{key}: checkpoint {saved_shapes.get(key)}, model {shapes.get(key)}")
      if len(lines) > 20:
        lines.append("  ...")
        break
  return "\n".join(lines)


def without_unsaved_state(abstract_state: dict, saved_keys) -> dict:
  """`abstract_state` less the OPTIONAL_STATE keys a saved state (holding `saved_keys`) lacks."""
  return {k: v for k, v in abstract_state.items() if k in saved_keys or k not in OPTIONAL_STATE}


def saved_state_metadata(state_dir: str):
  """The tree of a saved train state (one step's `state` directory), each leaf's metadata
  (shape, dtype) in place of its array: read without reading the arrays."""
  metadata = ocp.StandardCheckpointer().metadata(state_dir)
  tree = getattr(metadata, "item_metadata", metadata)
  return getattr(tree, "tree", tree)


def read_record(manager: ocp.CheckpointManager, step: int) -> dict:
  """The model record saved with checkpoint `step`."""
  return manager.restore(step, args=ocp.args.Composite(model=ocp.args.JsonRestore()))["model"]


def latest_record(workdir: str):
  """(step, model record) of the latest checkpoint in `workdir`; FileNotFoundError if none."""
  directory = workdir_lib.checkpoints_dir(workdir)
  if not storage.isdir(directory):
    raise errors.MissingFileError(f"No checkpoints in {workdir!r}: train first with vit_jax.main.")
  manager = ocp.CheckpointManager(
      directory,
      item_names=(workdir_lib.STATE_ITEM, workdir_lib.MODEL_ITEM),
      options=ocp.CheckpointManagerOptions(read_only=True, create=False, save_interval_steps=0),
  )
  step = manager.latest_step()
  if step is None:
    raise errors.MissingFileError(f"No finished checkpoint in {directory}.")
  record = read_record(manager, step)
  manager.close()
  return step, record


# ---- Integrity: fall back past damaged steps (see docs/errors.md) -------------------------------


def step_dirs(path: str) -> list[str]:
  """Finished step directories of a workdir or a `checkpoints/` dir, newest first."""
  path = workdir_lib.checkpoints_of(path)
  names = storage.listdir(path) if storage.isdir(path) else []
  steps = [d for d in names if config_args.is_digits(d)]
  dirs = [storage.join(path, d) for d in sorted(steps, key=int, reverse=True)]
  if storage.is_remote(path):  # written in place, finished by orbax's commit marker: see below
    dirs = [d for d in dirs if ocp.step.is_path_finalized(d)]
  return dirs


# Orbax writes a step into `STEP.orbax-checkpoint-tmp...` and renames it when complete; in a bucket
# (no rename) it writes `STEP` in place and marks it complete with a commit file at the end.
_PARTIAL_STEP = re.compile(r"\d+\.orbax-checkpoint-tmp.*", re.ASCII)


def discard_partial_saves(workdir: str) -> list[str]:
  """Deletes the unfinished step directories a failed save left in `workdir/checkpoints` (they
  hold no usable state and may hold the space a rerun needs); returns their paths."""
  directory = workdir_lib.checkpoints_dir(workdir)
  names = storage.listdir(directory) if storage.isdir(directory) else []
  partial = [storage.join(directory, n) for n in names if _PARTIAL_STEP.fullmatch(n)]
  if storage.is_remote(directory):
    partial += [
        storage.join(directory, n)
        for n in names
        if config_args.is_digits(n) and not ocp.step.is_path_finalized(storage.join(directory, n))
    ]
  for path in partial:
    storage.rmtree(path, ignore_errors=True)
  return partial


def refused_write_error(exc: BaseException, workdir: str) -> errors.StorageError:
  """A write the file system refused (`exc`, full, over quota, read-only) while training in
  `workdir`, as one line naming the last good checkpoint, with the unfinished step it interrupted
  deleted: rerunning the same command once the cause is fixed resumes exactly."""
  discard_partial_saves(workdir)
  saved = step_dirs(workdir)
  then = (
      f"rerun the same command to resume from step {storage.name(saved[0])}, the last good "
      f"checkpoint ({saved[0]})"
      if saved
      else "rerun the same command (no checkpoint was saved yet)"
  )
  return errors.storage_error(exc, where=workdir, then=then)


def set_aside(step_dir: str) -> str:
  """Moves a damaged step to `checkpoints/damaged/STEP` (never deletes it); returns the new path."""
  damaged = workdir_lib.damaged_dir(storage.parent(step_dir))
  storage.makedirs(damaged)
  target, n = storage.join(damaged, storage.name(step_dir)), 1
  while storage.exists(target):  # the same step damaged again: keep both
    target, n = storage.join(damaged, f"{storage.name(step_dir)}.{n}"), n + 1
  storage.move(step_dir, target)
  return target


_ORBAX_DIR = os.path.dirname(os.path.dirname(ocp.__file__))  # .../site-packages/orbax


# How TensorStore words a failed read: an absl status code, e.g. "OUT_OF_RANGE: Error reading ..."
_TENSORSTORE_ERROR = re.compile(
    r"(CANCELLED|UNKNOWN|INVALID_ARGUMENT|DEADLINE_EXCEEDED|NOT_FOUND|ALREADY_EXISTS|"
    r"PERMISSION_DENIED|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|ABORTED|OUT_OF_RANGE|"
    r"UNIMPLEMENTED|INTERNAL|UNAVAILABLE|DATA_LOSS|UNAUTHENTICATED): "
)


# The warning for one of orbax's array reads that was abandoned before it started.
_ORBAX_UNSTARTED_READ = r"coroutine '_read_array_index_and_device_put' was never awaited"


def _abandoned_read_error(e) -> bool:
  """An error of one of the array reads orbax abandons when another array of the step fails."""
  if isinstance(e, RuntimeError) and str(e) == "Event loop is closed":
    return True  # a TensorStore read finishing after orbax closed the step's event loop
  if isinstance(e, ValueError) and _TENSORSTORE_ERROR.match(str(e)):
    return True  # a TensorStore future nobody awaits any more
  frames = traceback.extract_tb(getattr(e, "__traceback__", None))
  return any(frame.filename.startswith(_ORBAX_DIR) for frame in frames)


class _AbandonedReadLogFilter(logging.Filter):

  def filter(self, record):
    error = record.exc_info[1] if record.exc_info else None
    return not ("never retrieved" in record.getMessage() and _abandoned_read_error(error))


def quiet_abandoned_reads() -> None:
  """Drops the noise a damaged step leaves behind, process-wide (idempotent).

  Orbax reads a step's arrays concurrently in a fresh event loop and closes the loop as soon as
  one fails. The other reads then end on TensorStore threads and each prints a traceback: through
  sys.unraisablehook ("Event loop is closed", or an exception in a collected orbax coroutine) and
  through asyncio's logger ("Task exception was never retrieved"); a read orbax had not started
  yet is collected at exit as a coroutine "never awaited" (a RuntimeWarning). The step's error
  itself reaches `first_intact`, which reports it in one line; these reports of orbax's are
  dropped, every other report still prints.
  """
  warnings.filterwarnings(
      "ignore", message=_ORBAX_UNSTARTED_READ, category=RuntimeWarning, append=False
  )
  asyncio_log = logging.getLogger("asyncio")
  if not any(isinstance(f, _AbandonedReadLogFilter) for f in asyncio_log.filters):
    asyncio_log.addFilter(_AbandonedReadLogFilter())
  previous = sys.unraisablehook
  if getattr(previous, "drops_abandoned_reads", False):
    return

  def hook(unraisable):
    if not _abandoned_read_error(unraisable.exc_value):
      previous(unraisable)

  hook.drops_abandoned_reads = True
  sys.unraisablehook = hook


class _RefusedWriteLogFilter(logging.Filter):
  """Drops orbax's log of a save's writer thread failing on a full or read-only disk, a bucket's
  refusal or an outage: the same error reaches the trainer, which reports it in one line (see
  train.train_and_evaluate), or the save's retries (outages.ride_out), which warn once."""

  def filter(self, record):
    error = record.exc_info[1] if record.exc_info else Exception(record.getMessage())
    return errors.storage_cause(error) is None and errors.transient_cause(error) is None


def quiet_refused_writes() -> None:
  """Installs `_RefusedWriteLogFilter` on absl's logger, through which orbax logs (idempotent)."""
  absl_log = logging.getLogger("absl")
  if not any(isinstance(f, _RefusedWriteLogFilter) for f in absl_log.filters):
    absl_log.addFilter(_RefusedWriteLogFilter())


def _read_retrying(read, step_dir: str):
  """read(step_dir), ridden out while the storage does not answer (outages.ride_out): a step
  that cannot be fetched is not known to be damaged."""
  return outages.ride_out(lambda: read(step_dir), step_dir, f"reading checkpoint {step_dir}")


def _everywhere(answer: bool) -> bool:
  """Whether `answer` is True on every process of the job (a save is collective: all save, or
  none)."""
  if jax.process_count() == 1:
    return answer
  return bool(np.all(multihost_utils.process_allgather(np.int32(answer))))


def tensorstore_retries() -> None:
  """TensorStore, which reads and writes orbax's arrays, retries a bucket's requests as
  vit_jax/storage/outages.py's policy does for `client_deadline_s` (its default: 32 tries, about 15
  minutes, during which a save would hold the loop), or in a job of several processes for the
  whole outage budget (a save there is not tried again: see `Checkpointer.save`). Orbax builds
  its TensorStore context from these module defaults and offers no setting for it."""
  # pylint: disable-next=g-import-not-at-top
  from orbax.checkpoint._src.serialization import tensorstore_utils

  deadline = outages.client_deadline_s() if jax.process_count() == 1 else outages.outage_budget()
  tries, waited = 0, 0.0
  while waited < deadline:
    waited += min(outages.FIRST_WAIT_S * 2**tries, outages.LONGEST_WAIT_S)
    tries += 1
  retries = {
      "max_retries": max(tries, 1),
      "initial_delay": f"{outages.FIRST_WAIT_S:g}s",
      "max_delay": f"{outages.LONGEST_WAIT_S:g}s",
  }
  # pylint: disable=protected-access
  for context in (tensorstore_utils._BASE_TS_CONTEXT, tensorstore_utils._DEFAULT_OCDBT_TS_CONTEXT):
    context["gcs_request_retries"] = retries


def first_intact(candidates: list[str], read, move_damaged: bool = False):
  """(step_dir, read(step_dir)) of the newest of `candidates` (newest first) that reads.

  One that fails is damaged only if an older one then reads with the same code, so a bug in our
  code (every step fails) still raises its own traceback and nothing is moved. Each damaged step
  is reported in one line, and moved to `damaged/` when `move_damaged` (the trainer: by process 0
  alone, see `Checkpointer.restore_latest_intact`) or left in place (readers: generate, convert,
  init_from). Other user errors are not damage, nor is a storage that does not answer: its read
  is ridden out (outages.ride_out), then a StorageUnavailableError, nothing moved. A step of
  another model is damaged where an older step is of this one (a changed byte of its record: a
  workdir holds one model); where none is, its OtherModelError is raised.
  """
  quiet_abandoned_reads()  # before reading: a failed read's siblings report after it
  tensorstore_retries()
  failed = []
  for step_dir in candidates:
    try:
      value = _read_retrying(read, step_dir)
    except OtherModelError as e:  # another model, or a damaged record: older steps tell
      failed.append((step_dir, e))
      continue
    except errors.UserError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      failed.append((step_dir, e))
      continue
    for bad, e in failed:
      reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
      reason = reason.split(" See full TensorStore details")[0][:160]  # orbax appends a spec
      if isinstance(e, OtherModelError):
        reason = "its model record is not that of the steps before it"
      where = ""
      if move_damaged:
        where = f"; moved to {set_aside(bad)}" if jax.process_index() == 0 else "; set aside"
      print(
          f"warning: checkpoint {bad} is unreadable ({type(e).__name__}: {reason}); using step "
          f"{storage.name(step_dir)}{where}.",
          file=sys.stderr,
          flush=True,
      )
    return step_dir, value
  other_model = [e for _, e in failed if isinstance(e, OtherModelError)]
  if failed:
    raise (other_model or [failed[0][1]])[0]
  return None, None


class Checkpointer:
  """Thin wrapper over `ocp.CheckpointManager` with a model-identity check on restore.

  In a bucket, saves ride out the bucket's bad minutes (storage/outages.py): a save due while it
  does not answer is left to the next interval, and training goes on; a forced one (the last
  step, a preemption) is tried again until it answers or the outage budget runs out. A save that
  fails leaves its step unfinished (no commit marker: never read), with its files deleted before
  the next save; orbax deletes an older step only after a newer one is finished, so a failed save
  costs nothing saved.
  """

  def __init__(
      self,
      workdir: str,
      save_every: int,
      keep: int,
      record: dict,
      async_save: bool | None = False,
      keep_steps: tuple[int, ...] = (),
      state_handler: ocp.StandardCheckpointHandler | None = None,
  ):
    """Saves every `save_every` steps and at `keep_steps`; keeps the newest `keep` and every
    one of `keep_steps`. `async_save` None: saves overlap training on accelerators, and a CPU
    run saves in line. `state_handler`: saves the state with this handler (a converter's, see
    interop/orbax_host_arrays.py) instead of orbax's own, writing the same files."""
    if async_save is None:
      async_save = jax.default_backend() != "cpu"
    self.directory = workdir_lib.checkpoints_dir(workdir)
    quiet_refused_writes()
    tensorstore_retries()
    self.record = record
    self.save_every = save_every
    self.keep_steps = frozenset(keep_steps)
    keeping = dict(max_to_keep=keep)
    if keep_steps:
      policies = ocp.checkpoint_managers
      keeping = dict(
          preservation_policy=policies.AnyPreservationPolicy(
              [policies.LatestN(keep), policies.CustomSteps(sorted(self.keep_steps))]
          )
      )
    self._options = ocp.CheckpointManagerOptions(
        save_interval_steps=save_every,
        create=True,
        enable_async_checkpointing=async_save,
        **keeping,
    )
    self._handlers = {"item_names": (workdir_lib.STATE_ITEM, workdir_lib.MODEL_ITEM)}
    if state_handler is not None:  # orbax's own for the record and for every restore
      registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
      registry.add(workdir_lib.STATE_ITEM, ocp.args.StandardSave, state_handler)
      registry.add(workdir_lib.STATE_ITEM, ocp.args.StandardRestore)
      registry.add(workdir_lib.MODEL_ITEM, ocp.args.JsonSave)
      registry.add(workdir_lib.MODEL_ITEM, ocp.args.JsonRestore)
      self._handlers = {"handler_registry": registry}
    self._manager = None
    self._unfinished = False  # a save failed: its step's files are deleted before the next one
    self.manager  # pylint: disable=pointless-statement  (lists the steps now, as a check)

  @property
  def manager(self) -> ocp.CheckpointManager:
    """Orbax's manager; a new one after a failed save (orbax raises a failed asynchronous save's
    error again at every later save)."""
    if self._manager is None:
      self._manager = outages.ride_out(
          lambda: ocp.CheckpointManager(
              self.directory,
              options=self._options,
              **self._handlers,
          ),
          self.directory,
          f"listing {self.directory}",
      )
    return self._manager

  def latest_step(self):
    return self.manager.latest_step()

  def check_model(self, step: int) -> None:
    """Raises OtherModelError if the checkpoint at `step` is of another model."""
    problems = describe_mismatch(read_record(self.manager, step), self.record)
    if problems:
      raise OtherModelError(
          f"The workdir's checkpoint {self.directory} (step {step}) is of a different model than "
          f"this config:\n{problems}\nUse a new --workdir, or the config that wrote it. "
          "Nothing in the workdir was changed."
      )

  def restore_latest_intact(self, abstract_state):
    """(step, state) of the newest readable checkpoint, damaged newer ones moved aside; (None,
    None) if there is none.

    Every process reads; process 0 alone moves the damaged steps, and the others wait for it
    here (the all-gather below), so that no process lists a step half moved. The processes must
    agree on the step (damage that only some of them read would make them differ: an error).
    """
    read = lambda d: self.restore(int(storage.name(d)), abstract_state)
    step_dir, state = first_intact(step_dirs(self.directory), read, move_damaged=True)
    step = None if step_dir is None else int(storage.name(step_dir))
    if jax.process_count() > 1:
      chosen = multihost_utils.process_allgather(np.int32(-1 if step is None else step))
      if len(set(chosen.tolist())) > 1:
        raise errors.CheckpointError(
            f"The processes read different checkpoints of {self.directory} (steps "
            f"{sorted(set(chosen.tolist()))}, -1: none): a step is damaged where only some of "
            "them read. Move the newer steps to checkpoints/damaged by hand and rerun."
        )
    if step is None:
      return None, None
    self.manager.reload()  # forget the steps moved aside
    return step, state

  def restore(self, step: int, abstract_state: dict) -> dict:
    """The state saved at `step`, less the OPTIONAL_STATE keys of `abstract_state` it lacks."""
    self.check_model(step)
    state_dir = storage.join(self.directory, str(step), workdir_lib.STATE_ITEM)
    saved_keys = set(saved_state_metadata(state_dir))
    for key, config_key in OPTIONAL_STATE.items():
      if key in saved_keys and key not in abstract_state:
        raise CheckpointMismatchError(
            f"The workdir's checkpoint {self.directory} (step {step}) holds {key}, which "
            f"--config.{config_key}=None would drop: resume with the {config_key} of the run "
            f"that saved it, or start a new --workdir from it (--config.init_from). Nothing in "
            "the workdir was changed."
        )
    restored = self.manager.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(without_unsaved_state(abstract_state, saved_keys))
        ),
    )
    return restored["state"]

  def should_save(self, step: int) -> bool:
    """Every `save_every` steps and at the steps to keep (orbax alone would also save the very
    first step)."""
    return step % self.save_every == 0 or step in self.keep_steps

  def save(self, step: int, state, force: bool = False) -> bool:
    """Saves `state` as `step` if it is due (or `force`); whether it did. Where the storage does
    not answer (a bucket's outage, a network file system's timeout), a due save is left to the
    next interval (False, with a warning line); a forced one rides out the outage and is finished
    before this returns.

    In a job of several processes a save is collective, and a try that fails on one process
    leaves the others inside one of orbax's barriers, where no later collective of this one may
    meet them: no try is repeated or skipped after it started. A failed save ends the job, in
    one line on every process (training/job_end.py), and the last finished step is kept. Its
    arrays' writes get the whole outage budget instead (`tensorstore_retries`), so that this
    happens only where one process alone would also end.
    """
    if not (force or self.should_save(step)):
      return False
    what = f"saving checkpoint {step} in {self.directory}"
    if force and jax.process_count() == 1:
      return outages.ride_out(lambda: self._save(step, state, finish=True), self.directory, what)
    try:  # one cheap request first: a save into an outage would hold the loop for its retries
      if force or _everywhere(outages.answers(self.directory)):
        return self._save(step, state, finish=force)
      away = outages.outage(self.directory)
      cause = "on another process of the job"
      if away:
        cause = f"{away[1]}, for {away[0]:.0f} s" if away[0] >= 1 else away[1]
    except Exception as e:  # pylint: disable=broad-except
      cause = errors.transient_cause(e)
      if cause is None:
        raise
      if jax.process_count() > 1:
        raise errors.StorageUnavailableError(
            f"{outages.holder(self.directory)} did not answer ({cause}) while {what} on process "
            f"{jax.process_index()}: a save that fails on one process of a job ends the job. "
            "Nothing saved was lost; rerun the same command once it answers."
        ) from e
    print(
        f"warning: checkpoint {step} not saved: {outages.holder(self.directory)} does not answer "
        f"({cause}); training goes on, and the next checkpoint is saved at step "
        f"{step + self.save_every - step % self.save_every} if it answers by then.",
        file=sys.stderr,
        flush=True,
    )
    return False

  def _save(self, step: int, state, finish: bool = False) -> bool:
    """One try of a save; `finish`: wait for an asynchronous one to be finished. After a failed
    try, the unfinished steps it left are deleted first, and a step whose commit landed before
    its try failed (e.g. while orbax deleted an older step) is not saved again."""
    if not _everywhere(not self._unfinished):  # nothing is in flight now: the failed one ended
      if jax.process_index() == 0:
        discard_partial_saves(storage.parent(self.directory))
      multihost_utils.sync_global_devices("vit_jax_discarded_unfinished_steps")
      self._unfinished = False
      if step in self.manager.all_steps():  # finished: its commit marker is there
        return True
    try:
      saved = self.manager.save(
          step,
          args=ocp.args.Composite(
              state=ocp.args.StandardSave(state), model=ocp.args.JsonSave(self.record)
          ),
          force=True,
      )
      if finish:
        self.manager.wait_until_finished()
      return saved
    except Exception:
      failed, self._manager, self._unfinished = self._manager, None, True
      if jax.process_count() == 1:  # its commit thread, if one started, ends first (in a job,
        with contextlib.suppress(Exception):  # closing is a barrier the others never reach)
          failed.close()
      raise

  def close(self):
    if self._manager is not None:
      self._manager.wait_until_finished()
      self._manager.close()
