"""The workdir: every file and folder a run writes there, and the checks that keep it safe.

A workdir W holds (each name below is the one place it is spelled):

    W/config.json         the run's full config (`task` tells generate/predict how to run the model)
    W/run_info.json       parameter count, training FLOPs per example, train-set size
    W/metrics.jsonl       one JSON record per logged train or eval step
    W/tensorboard/        TensorBoard events of the same metrics
    W/checkpoints/STEP/   orbax steps: a `state` item (params, optimizer) and a `model` record
    W/checkpoints/damaged/  steps that failed to restore, set aside (never deleted)
    W/tokenizer/          the tokenizer of a text run
    W/compilation_cache/  compiled steps (JAX's persistent cache): a rerun loads, not compiles
    W/train.log           a sweep run's stdout and stderr
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
"""

import datetime
import fcntl
import json
import os
import socket

from vit_jax import errors

CONFIG_FILE = "config.json"
LOCK_FILE = "lock"  # host, pid and start time of the process writing the workdir
RUN_INFO_FILE = "run_info.json"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
CHECKPOINTS_DIR = "checkpoints"
DAMAGED_DIR = "damaged"  # under CHECKPOINTS_DIR
STATE_ITEM = "state"  # orbax items of one checkpoint step
MODEL_ITEM = "model"
TOKENIZER_DIR = "tokenizer"
COMPILATION_CACHE_DIR = "compilation_cache"
TRAIN_LOG_FILE = "train.log"
SWEEP_FILE = "sweep.json"  # in a sweep root, not in a run's workdir

# Names no other module may spell (tests/test_codebase.py): the ones that are only file names.
FILE_NAMES = (
    CONFIG_FILE,
    LOCK_FILE,
    RUN_INFO_FILE,
    METRICS_FILE,
    TENSORBOARD_DIR,
    CHECKPOINTS_DIR,
    DAMAGED_DIR,
    TOKENIZER_DIR,
    COMPILATION_CACHE_DIR,
    TRAIN_LOG_FILE,
    SWEEP_FILE,
)


def config_path(workdir: str) -> str:
  return os.path.join(workdir, CONFIG_FILE)


def run_info_path(workdir: str) -> str:
  return os.path.join(workdir, RUN_INFO_FILE)


def metrics_path(workdir: str) -> str:
  return os.path.join(workdir, METRICS_FILE)


def tensorboard_dir(workdir: str) -> str:
  return os.path.join(workdir, TENSORBOARD_DIR)


def checkpoints_dir(workdir: str) -> str:
  return os.path.abspath(os.path.join(workdir, CHECKPOINTS_DIR))


def tokenizer_dir(workdir: str) -> str:
  return os.path.join(workdir, TOKENIZER_DIR)


def compilation_cache_dir(workdir: str) -> str:
  return os.path.join(workdir, COMPILATION_CACHE_DIR)


def train_log_path(workdir: str) -> str:
  return os.path.join(workdir, TRAIN_LOG_FILE)


def sweep_file(root: str) -> str:
  return os.path.join(root, SWEEP_FILE)


def checkpoints_of(path: str) -> str:
  """`path/checkpoints` when `path` is a workdir, else `path` (already a checkpoints dir)."""
  path = os.path.abspath(path)
  return checkpoints_dir(path) if os.path.isdir(checkpoints_dir(path)) else path


DATA_KEYS = ("dataset", "train_split")
TOKENIZER_KEYS = ("tokenizer.kind", "tokenizer.vocab_size", "tokenizer.path")


def check_workdir(workdir: str) -> None:
  """Raises WorkdirError unless `workdir` is (or can be created as) a writable directory."""
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


def _flat(config: dict, prefix: str = "") -> dict:
  out = {}
  for key, value in config.items():
    if isinstance(value, dict):
      out.update(_flat(value, f"{prefix}{key}."))
    else:
      out[prefix + key] = value
  return out


def saved_config(workdir: str) -> dict | None:
  """The flattened config.json of an earlier run in `workdir`, or None."""
  path = config_path(workdir)
  if not os.path.isfile(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      return _flat(json.load(f))
  except (OSError, ValueError) as e:
    raise errors.WorkdirError(
        f"{path} is unreadable ({e}); restore it, or use a new " "--workdir."
    ) from e


def check_resume(config, workdir: str) -> None:
  """Raises WorkdirError if `workdir` was written with other data or tokenizer settings."""
  saved = saved_config(workdir)
  if saved is None:
    return
  now = _flat(json.loads(config.to_json_best_effort()))
  keys = TOKENIZER_KEYS + (() if now.get("allow_data_change") else DATA_KEYS)
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
  src_real, dst_real = os.path.realpath(src), os.path.realpath(dst)
  inside = lambda a, b: os.path.commonpath([a, b]) == b  # a is b or lies inside b
  if inside(dst_real, src_real) or inside(src_real, dst_real):
    raise errors.WorkdirError(
        f"destination {dst} is, contains or lies inside the source {src}; "
        "write to a path outside it. Nothing was changed."
    )


_held_locks = {}  # realpath -> the open lock file


def lock(workdir: str, what: str = "--workdir") -> None:
  """Makes this process the only writer of `workdir` until `unlock` or its exit; WorkdirError if
  another live process holds it (naming that process).

  The lock is an advisory `flock` on `workdir/lock`, so the kernel drops it when its holder ends
  in any way (SIGKILL included) and a file left behind never blocks a rerun; `unlock` deletes
  the file. Only one process of a multi-process job calls this (the trainer's process 0); a
  workdir that is not on a local file system (gs://...) is not locked. Idempotent within a
  process.
  """
  if "://" in workdir:
    return
  key = os.path.realpath(workdir)
  if key in _held_locks:
    return
  path = os.path.join(workdir, LOCK_FILE)
  while True:
    handle = open(path, "a+", encoding="utf-8")  # pylint: disable=consider-using-with  (kept open)
    try:
      fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      handle.seek(0)
      holder = handle.read().strip() or "another process"
      handle.close()
      raise errors.WorkdirError(
          f"{what}={workdir} is in use by {holder}; wait for it to finish or stop it, or use "
          "another directory. Nothing was changed."
      ) from e
    try:  # the holder may have deleted the file between our open and flock: lock the new one
      if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
        break
    except FileNotFoundError:
      pass
    handle.close()
  handle.seek(0)
  handle.truncate()
  started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
  handle.write(f"pid {os.getpid()} on host {socket.gethostname()} (started {started})\n")
  handle.flush()
  _held_locks[key] = handle


def unlock(workdir: str) -> None:
  """Releases `lock(workdir)` and deletes the lock file; nothing if this process holds none."""
  handle = _held_locks.pop(os.path.realpath(workdir), None)
  if handle is None:
    return
  try:
    os.unlink(handle.name)  # while still held, so no other process holds this inode
  except FileNotFoundError:
    pass
  handle.close()  # closing the only descriptor releases the flock
