"""The workdir: every file and folder a run writes there, and the checks that keep it safe.

A workdir W holds (each name below is the one place it is spelled):

    W/config.json         the run's full config (`task` tells generate/predict how to run the model)
    W/run_info.json       parameter count, training FLOPs per example, train-set size
    W/metrics.jsonl       one JSON record per logged train or eval step
    W/tensorboard/        TensorBoard events of the same metrics
    W/tensorboard/plugins/profile/RUN/  jax.profiler traces of `profile_steps` (HOST.xplane.pb for
                          TensorBoard's profile plugin / xprof, perfetto_trace.json.gz for Perfetto)
    W/checkpoints/STEP/   orbax steps: a `state` item (params, optimizer) and a `model` record
                          (the model, and the run config that saved the step)
    W/checkpoints/damaged/  steps that failed to restore, set aside (never deleted)
    W/tokenizer/          the tokenizer of a text run
    W/compilation_cache/  compiled steps (JAX's persistent cache): a rerun loads, not compiles
    W/train.log           a sweep run's stdout and stderr
    W/decodes/NAME/STEP.json  a decoding evaluator's decoded lines at one eval step, with their
                          sources, references, metrics and sacrebleu's signatures
    W/lock                the host and pid of the process writing the workdir, while it runs
and a sweep root holds `sweep.json` beside its runs' workdirs.

Safety: nothing already saved is replaced, mixed up or lost by a careless command.
- A workdir must be a writable directory (or creatable under one), not a file.
- A resumed run must read the same data with the same tokenizer as the run that wrote the
  workdir: keys that differ from the saved config.json are listed and the run is refused
  (`--config.allow_data_change=true` allows new data, e.g. for continued pretraining; the
  tokenizer can never change under a checkpoint).
- `vit_jax.convert` refuses a destination that is, contains, or lies inside its source.
- One writer at a time: the trainer and the sweep runner hold `LOCK_FILE` in their workdir (or
  sweep root) while they run; a second one is refused, naming the holder.

A workdir is a local folder or a Cloud Storage one (gs://BUCKET/...); every path here goes through
vit_jax/storage, so both work the same.
"""

import datetime
import fcntl
import json
import os
import socket
import sys
import threading
import time

from vit_jax import errors
from vit_jax import storage
from vit_jax.storage import outages

CONFIG_FILE = "config.json"
LOCK_FILE = "lock"  # host, pid and start time of the process writing the workdir
RUN_INFO_FILE = "run_info.json"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
# Where jax.profiler.start_trace(TENSORBOARD_DIR) writes: the folder TensorBoard's profile plugin
# reads, so one `tensorboard --logdir W/tensorboard` shows the metrics and the traces.
PROFILES_DIR = os.path.join("plugins", "profile")
CHECKPOINTS_DIR = "checkpoints"
DAMAGED_DIR = "damaged"  # under CHECKPOINTS_DIR
STATE_ITEM = "state"  # orbax items of one checkpoint step
MODEL_ITEM = "model"
TOKENIZER_DIR = "tokenizer"
COMPILATION_CACHE_DIR = "compilation_cache"
TRAIN_LOG_FILE = "train.log"
DECODES_DIR = "decodes"
SWEEP_FILE = "sweep.json"  # in a sweep root, not in a run's workdir

# Names no other module may spell (tests/test_codebase.py): the ones that are only file names.
FILE_NAMES = (
    CONFIG_FILE,
    LOCK_FILE,
    RUN_INFO_FILE,
    METRICS_FILE,
    TENSORBOARD_DIR,
    PROFILES_DIR,
    CHECKPOINTS_DIR,
    DAMAGED_DIR,
    TOKENIZER_DIR,
    COMPILATION_CACHE_DIR,
    TRAIN_LOG_FILE,
    DECODES_DIR,
    SWEEP_FILE,
)


def config_path(workdir: str) -> str:
  return storage.join(workdir, CONFIG_FILE)


def run_info_path(workdir: str) -> str:
  return storage.join(workdir, RUN_INFO_FILE)


def metrics_path(workdir: str) -> str:
  return storage.join(workdir, METRICS_FILE)


def tensorboard_dir(workdir: str) -> str:
  return storage.join(workdir, TENSORBOARD_DIR)


def profiles_dir(workdir: str) -> str:
  """The traces' folder: one RUN folder (a time stamp) per traced window."""
  return storage.join(tensorboard_dir(workdir), PROFILES_DIR)


def checkpoints_dir(workdir: str) -> str:
  return storage.absolute(storage.join(workdir, CHECKPOINTS_DIR))


def damaged_dir(checkpoints: str) -> str:
  return storage.join(checkpoints, DAMAGED_DIR)


def tokenizer_dir(workdir: str) -> str:
  return storage.join(workdir, TOKENIZER_DIR)


def compilation_cache_dir(workdir: str) -> str:
  return storage.join(workdir, COMPILATION_CACHE_DIR)


def train_log_path(workdir: str) -> str:
  return storage.join(workdir, TRAIN_LOG_FILE)


def decodes_path(root: str, name: str, step: int | None) -> str:
  """The decoded lines of evaluator `name` at `step` in a workdir; `step` None: of the checkpoint
  `vit_jax.evaluate` scored, in the folder of its --output (root/decodes/NAME.json)."""
  if step is None:
    return storage.join(root, DECODES_DIR, f"{name}.json")
  return storage.join(root, DECODES_DIR, name, f"{step}.json")


def lock_path(workdir: str) -> str:
  return storage.join(workdir, LOCK_FILE)


def sweep_file(root: str) -> str:
  return storage.join(root, SWEEP_FILE)


def checkpoints_of(path: str) -> str:
  """`path/checkpoints` when `path` is a workdir, else `path` (already a checkpoints dir)."""
  path = storage.absolute(path)
  return checkpoints_dir(path) if storage.isdir(checkpoints_dir(path)) else path


# What the training data is; a pair's fields, an hf: dataset's subset and held-out slice, a
# mixture's stores and weights too (None elsewhere).
DATA_KEYS = (
    "dataset",
    "train_split",
    "source_key",
    "target_key",
    "hf_subset",
    "hf_holdout",
    "mixture.stores",
    "mixture.weights",
)
TOKENIZER_KEYS = ("tokenizer.kind", "tokenizer.vocab_size", "tokenizer.path")


def check_workdir(workdir: str) -> None:
  """Raises WorkdirError unless `workdir` is (or can be created as) a writable directory."""
  if storage.is_remote(workdir):
    _check_bucket_workdir(workdir)
    return
  path = os.path.abspath(workdir)
  if os.path.exists(path) and not os.path.isdir(path):
    raise errors.WorkdirError(
        f"--workdir={workdir} is a file, not a directory; pass a new " "directory path."
    )
  existing = path
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise errors.WorkdirError(
        f"--workdir={workdir} lies under {existing}, which is a file; pass "
        "a path under a directory."
    )
  if not os.access(existing, os.W_OK | os.X_OK):
    raise errors.WorkdirError(
        f"--workdir={workdir}: {existing} is not writable; pass a directory " "you can write to."
    )


def _check_bucket_workdir(workdir: str) -> None:
  storage.check(workdir)  # the client packages
  try:
    readable, why = storage.isdir(storage.bucket(workdir)), ""
  except errors.StorageUnavailableError:  # an outage longer than the budget, not a missing bucket
    raise
  except Exception as e:  # pylint: disable=broad-except  (each client raises its own kind)
    readable, why = False, f" ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
  if not readable:
    raise errors.WorkdirError(
        f"--workdir={workdir}: the bucket {storage.bucket(workdir)} does not exist or this "
        f"account cannot read it{why}; create it, or fix the name or the account's permissions."
    )
  if storage.isfile(workdir):
    raise errors.WorkdirError(
        f"--workdir={workdir} is a file, not a directory; pass a new " "directory path."
    )


def flatten(config: dict, prefix: str = "") -> dict:
  out = {}
  for key, value in config.items():
    if isinstance(value, dict):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[prefix + key] = value
  return out


def saved_config(workdir: str, nested: bool = False) -> dict | None:
  """The config.json of an earlier run in `workdir`, flattened unless `nested`, or None."""
  path = config_path(workdir)
  if not storage.isfile(path):
    return None
  try:
    saved = json.loads(storage.read_text(path))
    return saved if nested else flatten(saved)
  except errors.StorageUnavailableError:
    raise
  except (OSError, ValueError) as e:
    raise errors.WorkdirError(
        f"{path} is unreadable ({e}); restore it, or use a new " "--workdir."
    ) from e


def check_resume(config, workdir: str) -> None:
  """Raises WorkdirError if `workdir` was written with other data or tokenizer settings."""
  saved = saved_config(workdir)
  if saved is None:
    return
  now = flatten(json.loads(config.to_json_best_effort()))
  keys = TOKENIZER_KEYS + (() if config.allow_data_change else DATA_KEYS)
  differ = [k for k in keys if (k in saved or k in now) and saved.get(k) != now.get(k)]
  if differ:
    listing = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in differ)
    allow = (
        " (or --config.allow_data_change=true to continue on new data)"
        if set(differ) <= set(DATA_KEYS)
        else ""
    )
    raise errors.WorkdirError(
        f"--workdir={workdir} was trained with other data/tokenizer "
        f"settings ({listing}); use a new --workdir{allow}. Nothing in "
        "the workdir was changed."
    )


def check_convert_paths(src: str, dst: str) -> None:
  """Raises WorkdirError if writing `dst` could replace or damage `src`."""
  if storage.is_within(dst, src) or storage.is_within(src, dst):
    raise errors.WorkdirError(
        f"destination {dst} is, contains or lies inside the source {src}; "
        "write to a path outside it. Nothing was changed."
    )


# A bucket has no flock: its lock is an object that its holder rewrites every LOCK_RENEW_S, and
# that another process takes over once it was not rewritten for LOCK_STALE_S (see `_BucketLock`).
# A holder that could not renew it for LOCK_SAFE_S stops (`check_lock`): one renewal before a
# takeover could happen, with a renewal's time to spare for the clocks of two hosts. A run rides
# out a bucket's outage for at most MAX_OUTAGE_S (config.storage_outage_s): the lock's last
# renewal may be up to LOCK_RENEW_S older than the outage, so the budget ends before LOCK_SAFE_S.
LOCK_RENEW_S = 60
LOCK_STALE_S = 600
LOCK_SAFE_S = LOCK_STALE_S - 2 * LOCK_RENEW_S
MAX_OUTAGE_S = LOCK_SAFE_S - LOCK_RENEW_S
_held_locks = {}  # realpath (local) or gs:// path -> the open lock file or the _BucketLock


def _holder() -> dict:
  started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
  return {"pid": os.getpid(), "host": socket.gethostname(), "started": started}


def _describe(holder: dict) -> str:
  return f"pid {holder['pid']} on host {holder['host']} (started {holder['started']})"


def _in_use(what: str, workdir: str, holder: str, hint: str = "") -> errors.WorkdirError:
  return errors.WorkdirError(
      f"{what}={workdir} is in use by {holder}; wait for it to finish or stop it, or use "
      f"another directory{hint}. Nothing was changed."
  )


def lock(workdir: str, what: str = "--workdir") -> None:
  """Makes this process the only writer of `workdir` until `unlock` or its exit; WorkdirError if
  another live process holds it (naming that process).

  On a local file system the lock is an advisory `flock` on `workdir/lock`, so the kernel drops it
  when its holder ends in any way (SIGKILL included) and a file left behind never blocks a rerun;
  `unlock` deletes the file. In a bucket it is the object `workdir/lock`, created only if absent
  (see `_BucketLock`). Only one process of a multi-process job calls this (the trainer's process
  0). Idempotent within a process.
  """
  if storage.is_remote(workdir):
    key = storage.absolute(workdir)
    if key not in _held_locks:
      _held_locks[key] = _BucketLock.acquire(workdir, what)
    return
  key = os.path.realpath(workdir)
  if key in _held_locks:
    return
  path = lock_path(workdir)
  while True:
    handle = open(path, "a+", encoding="utf-8")  # pylint: disable=consider-using-with  (kept open)
    try:
      fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      handle.seek(0)
      holder = handle.read().strip() or "another process"
      handle.close()
      raise _in_use(what, workdir, holder) from e
    try:  # the holder may have deleted the file between our open and flock: lock the new one
      if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
        break
    except FileNotFoundError:
      pass
    handle.close()
  handle.seek(0)
  handle.truncate()
  handle.write(_describe(_holder()) + "\n")
  handle.flush()
  _held_locks[key] = handle


def check_lock(workdir: str) -> None:
  """Raises if this process may no longer be the only writer of `workdir` (a bucket's lock that
  another process took over or deleted, a WorkdirError; or that could not be renewed for
  LOCK_SAFE_S, a StorageUnavailableError); nothing for a lock this process does not hold, or a
  local one (the kernel holds it). Cheap: the trainer asks after every step."""
  if storage.is_remote(workdir):
    held = _held_locks.get(storage.absolute(workdir))
    if held is not None:
      held.check()


def unlock(workdir: str) -> None:
  """Releases `lock(workdir)` and deletes the lock file; nothing if this process holds none."""
  if storage.is_remote(workdir):
    held = _held_locks.pop(storage.absolute(workdir), None)
    if held is not None:
      held.release()
    return
  handle = _held_locks.pop(os.path.realpath(workdir), None)
  if handle is None:
    return
  try:
    os.unlink(handle.name)  # while still held, so no other process holds this inode
  except FileNotFoundError:
    pass
  handle.close()  # closing the only descriptor releases the flock


class _BucketLock:
  """The lock object of a workdir in a bucket: JSON naming its holder's host, pid and start time.

  It is created only if absent (a generation precondition: of two processes, one wins). Its
  holder rewrites it every LOCK_RENEW_S seconds while it runs (sooner again after a failed try)
  and deletes it on release. A lock object is stale, and taken over (with a warning naming the
  old holder), when its holder is on this host and no longer running, or when it was not
  rewritten for LOCK_STALE_S seconds (its host died or lost the bucket); otherwise the workdir is
  refused. Deleting the object by hand (`gcloud storage rm gs://.../lock`) breaks a lock at once.
  Its holder stops (`check`) once it finds the lock taken over or deleted, or could not renew it
  for LOCK_SAFE_S. A write whose answer was lost is recognized by the text: its holder's own.
  """

  def __init__(self, path: str, workdir: str, text: str, generation: int):
    self.path, self.workdir, self.text, self.generation = path, workdir, text, generation
    self.renewed = time.monotonic()  # the last write that landed
    self.failure = None  # why the last renewal failed, while the bucket does not answer
    self.lost = None  # what became of the lock, once another process took it or deleted it
    self._stop = threading.Event()
    self._renewer = threading.Thread(target=self._renew, name="workdir-lock", daemon=True)
    self._renewer.start()

  @classmethod
  def acquire(cls, workdir: str, what: str) -> "_BucketLock":
    from vit_jax.storage import objects  # pylint: disable=g-import-not-at-top  (gs:// only)

    path = lock_path(workdir)
    text = json.dumps(_holder())
    for _ in range(5):  # another process may create, renew or delete it between our requests
      generation = objects.create_object(path, text)
      if generation is not None:
        return cls(path, workdir, text, generation)
      found = objects.read_object(path)
      if found is None:
        continue
      held, held_generation, written = found
      if held == text:  # our create landed, its answer did not
        return cls(path, workdir, text, held_generation)
      holder = json.loads(held)
      why_stale = _why_stale(holder, written)
      if why_stale is None:
        hint = (
            f" (if that process is gone, its lock is taken over {LOCK_STALE_S // 60} minutes "
            f"after its last renewal, or at once if you delete {path})"
        )
        raise _in_use(what, workdir, _describe(holder), hint)
      generation = objects.replace_object(path, text, held_generation)
      if generation is not None:
        print(
            f"warning: {what}={workdir}: took over the lock of {_describe(holder)}, {why_stale}.",
            file=sys.stderr,
            flush=True,
        )
        return cls(path, workdir, text, generation)
    raise _in_use(what, workdir, "another process (its lock changes as we read it)")

  def _renew(self) -> None:
    from vit_jax.storage import objects  # pylint: disable=g-import-not-at-top  (gs:// only)

    wait = LOCK_RENEW_S
    while not self._stop.wait(wait):
      try:
        generation = objects.replace_object(self.path, self.text, self.generation, wait=False)
        if generation is None:  # rewritten, deleted, or our own write whose answer was lost
          found = objects.read_object(self.path, wait=False)
          if found is None or found[0] != self.text:
            self.lost = "deleted" if found is None else f"taken over by {_describe_text(found[0])}"
            return
          generation = found[1]
      except Exception as e:  # pylint: disable=broad-except  (told to the trainer by `check`)
        self.failure = errors.transient_cause(e) or f"{type(e).__name__}: {e}"
        wait = min(LOCK_RENEW_S, outages.LONGEST_WAIT_S) / 4  # try again soon
        continue
      self.generation, self.renewed, self.failure = generation, time.monotonic(), None
      wait = LOCK_RENEW_S

  def check(self) -> None:
    if self.lost is not None:
      raise errors.WorkdirError(
          f"the lock {self.path} was {self.lost}: another process may write {self.workdir} now, "
          "so this run stops, leaving the workdir to it. Rerun the same command once that "
          "process is done (or stopped) to resume from the last checkpoint."
      )
    unrenewed = time.monotonic() - self.renewed
    if unrenewed > LOCK_SAFE_S:
      raise errors.StorageUnavailableError(
          f"the lock {self.path} could not be renewed for {unrenewed:.0f} s "
          f"({self.failure or 'its last renewal is still unanswered'}): "
          f"another run may take {self.workdir} over {LOCK_STALE_S} s after its last renewal, so "
          "this one stops. Nothing saved was lost; rerun the same command once the bucket "
          "answers."
      )

  def release(self) -> None:
    from vit_jax.storage import objects  # pylint: disable=g-import-not-at-top  (gs:// only)

    self._stop.set()
    self._renewer.join(timeout=5 * outages.client_deadline_s())  # a renewal in flight
    if self.lost is not None:
      return
    try:
      objects.delete_object(self.path, self.generation)
    except errors.StorageUnavailableError as e:
      print(
          f"warning: {e} The lock {self.path} stays; the next run takes it over.",
          file=sys.stderr,
          flush=True,
      )


def _describe_text(text: str) -> str:
  try:
    return _describe(json.loads(text))
  except (ValueError, KeyError, TypeError):
    return "another process"


def _why_stale(holder: dict, written: datetime.datetime) -> str | None:
  """Why a lock object is stale (its holder is gone), or None while its holder may be running."""
  if holder.get("host") == socket.gethostname():
    try:
      os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
      return "which is no longer running"
    except PermissionError:  # another user's process: it runs
      pass
  age = (datetime.datetime.now(datetime.timezone.utc) - written).total_seconds()
  if age > LOCK_STALE_S:
    return f"whose lock was last renewed {age / 60:.0f} minutes ago"
  return None
