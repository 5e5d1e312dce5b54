"""Training logs: `metrics.jsonl`, TensorBoard events, and a progress bar or plain lines with ETA;
and what the records say of the run's time: the step-time breakdown and goodput.

Only process 0 writes; other processes get a writer that does nothing. Keys under `time/` (the
step-time breakdown) go to the file and TensorBoard, not to the console.

In a bucket workdir no step waits for the bucket: the records (and run_info.json, `replace`) are
sent by a thread of their own (`_BucketSender`), TensorBoard's events written on local disk and
mirrored there. While the bucket does not answer they wait in memory and are sent in order, once
each, when it does; if it stays away past config.storage_outage_s, the next `advance` raises the
StorageUnavailableError that ends the run.

The loop dispatches steps asynchronously and waits for the devices only at log, save and eval
points, so the host cannot see one step's device time without a sync it does not make. It times
what it does itself; each train record of metrics.jsonl (and TensorBoard) carries, for the window
since the previous record:

  time/window_s       the window's wall time
  time/input_wait_s   blocked in `next(batches)`: the input pipeline had no batch ready
  time/dispatch_s     calling the jitted step (the call returns before the devices finish)
  time/device_wait_s  blocked at the sync point until the dispatched steps had run: device time
                      the host's own work did not cover (device-bound runs spend the window here)
  time/checkpoint_s   in checkpoint saves (what blocks the loop; async saves finish in background)
  time/eval_s         in evaluations
  time/compile_s      the attempt's first step call: tracing, lowering and XLA compilation, timed
                      on the host (that step's execution is asynchronous and not included)
  time/profile_s      starting and writing a `profile_steps` trace (training/profiling.py)
  time/startup_s      the attempt's setup before its first step (restore, data, evaluators)
  time/productive_s   the run's productive time so far (below)
  input_wait_share    time/input_wait_s / time/window_s
  goodput             time/productive_s / elapsed_s

Goodput: productive time over wall time since the first start (`elapsed_s`, summed over
resumes). A window's productive time is its wall time less input wait, checkpoint saves,
evaluations, compilation and profiling; startup lies outside every window. After a restart,
the productive time of the steps past the checkpoint it resumed from (the steps it recomputes)
is counted as lost, in `recomputed_steps` and `time/recomputed_s`. The accounting is read back
from the train records (`Goodput.resumed`): exact when checkpoints fall on logged steps
(checkpoint_every a multiple of log_every), else the kept steps after the last record before the
checkpoint count as lost too. A killed attempt's time after its last record is
seen by neither `elapsed_s` nor goodput. run_info.json keeps the run's totals (`summary`).
"""

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import jax

from vit_jax import storage
from vit_jax import workdir as workdir_lib

DETAIL_PREFIX = "time/"  # logged to the file and TensorBoard only


def summary_writer_class():
  """tensorboardX's SummaryWriter, imported without PyTorch where PyTorch is not loaded yet.

  tensorboardX imports torch at module level, only to accept torch tensors, which the trainer
  never logs; with torch installed (as on most GPU machines) that import took 2 s of a run's
  start here on a CPU, and a CUDA build loads more. `import torch` inside the import fails
  (sys.modules' None entry), which tensorboardX handles as torch being absent.
  """
  # pylint: disable=g-import-not-at-top
  if "torch" in sys.modules:
    from tensorboardX import SummaryWriter

    return SummaryWriter
  sys.modules["torch"] = None
  try:
    from tensorboardX import SummaryWriter
  finally:
    del sys.modules["torch"]
  return SummaryWriter


class MetricsLog:
  """Writes one JSON object per logged step and the same scalars to TensorBoard."""

  def __init__(
      self,
      workdir: str,
      total_steps: int,
      start_step: int,
      progress: str = "auto",
      started: float | None = None,
  ):
    """`started`: when this attempt began (time.time()); records carry `elapsed_s`, the wall time
    since then plus the last `elapsed_s` of earlier attempts, so it sums over resumes."""
    self.enabled = jax.process_index() == 0
    self.total_steps = total_steps
    self.start_step = start_step
    self.start_time = time.time()
    self.started = self.start_time if started is None else started
    self.earlier_records, self.elapsed_before = [], 0.0
    if not self.enabled:
      return
    path = workdir_lib.metrics_path(workdir)
    self.earlier_records = earlier_records(path)  # earlier attempts' (resumes: goodput)
    self.elapsed_before = max(
        (float(r.get("elapsed_s", 0.0)) for r in self.earlier_records), default=0.0
    )
    self.jsonl = storage.appender(path)
    tensorboard_dir = workdir_lib.tensorboard_dir(workdir)
    self.sender = None
    if storage.is_remote(workdir):  # events on local disk, mirrored by the sender
      staged = tempfile.mkdtemp(prefix="vit_jax-tensorboard-")
      self.sender = _BucketSender(workdir, self.jsonl, staged, tensorboard_dir)
      tensorboard_dir = staged
    self.tb = summary_writer_class()(tensorboard_dir)
    use_bar = progress == "bar" or (progress == "auto" and sys.stderr.isatty())
    self.bar = None
    if use_bar:
      import tqdm  # pylint: disable=g-import-not-at-top

      self.bar = tqdm.tqdm(total=total_steps, initial=start_step, dynamic_ncols=True, unit="step")

  def eta_seconds(self, step: int) -> float:
    done = step - self.start_step
    if done <= 0:
      return float("nan")
    return (time.time() - self.start_time) / done * (self.total_steps - step)

  def elapsed(self) -> float:
    """Wall time since the first attempt began, summed over resumes (records' `elapsed_s`)."""
    return self.elapsed_before + time.time() - self.started

  def write(self, step: int, metrics: dict) -> None:
    if not self.enabled:
      return
    row = {"step": int(step), **{k: float(v) for k, v in metrics.items()}}
    row["elapsed_s"] = round(self.elapsed(), 3)
    self.jsonl.write(json.dumps(row) + "\n")
    if self.sender is None:
      self.jsonl.flush()
    for key, value in metrics.items():
      self.tb.add_scalar(key, float(value), step)
    self.tb.flush()
    if self.sender is not None:
      self.sender.send_soon()
    summary = "  ".join(
        f"{k}={float(v):.4g}" for k, v in metrics.items() if not k.startswith(DETAIL_PREFIX)
    )
    if self.bar is not None:
      self.bar.write(f"step {step}: {summary}")
    else:
      eta = self.eta_seconds(step)
      eta_text = f"  eta={eta:.0f}s" if eta == eta else ""
      print(f"step {step}/{self.total_steps}: {summary}{eta_text}", flush=True)

  def replace(self, path: str, text: str) -> None:
    """Writes file `path` whole (run_info.json); in a bucket, by the sender, after the records
    written before it."""
    if not self.enabled:
      return
    if self.sender is None:
      storage.replace_text(path, text)
    else:
      self.sender.replace(path, text)

  def advance(self, step: int) -> None:
    """Moves the progress bar; raises what stopped a bucket's sender (an outage past the budget,
    the workdir's lock lost)."""
    if not self.enabled:
      return
    if self.bar is not None:
      self.bar.update(step - self.bar.n)
    if self.sender is not None:
      self.sender.check()

  def close(self) -> None:
    """Writes what is left (in a bucket: waits for the sender to send it)."""
    if not self.enabled:
      return
    if self.bar is not None:
      self.bar.close()
    self.tb.close()
    if self.sender is None:
      self.jsonl.close()
    else:
      self.sender.close()


class _BucketSender:
  """Sends a bucket workdir's log files from a thread of its own, so that no step waits for the
  bucket: metrics.jsonl (the appender's new records), TensorBoard's events (the local files
  TensorBoard writes, mirrored by appending their new bytes) and the files given to `replace`,
  in that order. Each send rides out an outage (vit_jax/storage/outages.py ride_out), and sends
  only while this process holds the workdir's lock. What stopped it (the bucket away past the
  budget, the lock lost) is raised by `check` in the trainer's thread, and the thread ends; what
  it had not sent is lost with the run, as the steps since the last checkpoint are.
  """

  def __init__(self, workdir: str, jsonl, staged_dir: str, tensorboard_dir: str):
    self._workdir, self._jsonl = workdir, jsonl
    self._staged, self._tensorboard = staged_dir, tensorboard_dir
    self._events = {}  # staged file name -> (its appender in the bucket, bytes sent)
    self._files = {}  # path -> text, the latest of each given to `replace`
    self._files_lock = threading.Lock()
    self._wake = threading.Event()
    self._closing = False
    self._error, self._raised = None, False
    self._thread = threading.Thread(target=self._run, name="bucket-sender", daemon=True)
    self._thread.start()

  def send_soon(self) -> None:
    self._wake.set()

  def replace(self, path: str, text: str) -> None:
    with self._files_lock:
      self._files[path] = text
    self._wake.set()

  def check(self) -> None:
    if self._error is not None and not self._raised:
      self._raised = True
      raise self._error

  def close(self) -> None:
    """Sends the rest (riding out an outage, up to the budget) and ends the thread."""
    self._closing = True
    self._wake.set()
    self._thread.join()
    shutil.rmtree(self._staged, ignore_errors=True)
    self.check()

  def _run(self) -> None:
    while True:
      self._wake.wait()
      self._wake.clear()
      closing = self._closing
      try:
        workdir_lib.check_lock(self._workdir)  # one writer: none once another may write it
        self._send()
      except Exception as e:  # pylint: disable=broad-except  (raised in the trainer's thread)
        self._error = e
        return
      if closing:
        return

  def _send(self) -> None:
    self._jsonl.flush()
    for name in sorted(os.listdir(self._staged)):
      path = os.path.join(self._staged, name)
      if name not in self._events:
        target = storage.join(self._tensorboard, name)
        self._events[name] = [storage.appender(target, binary=True), 0]
      events = self._events[name]
      with open(path, "rb") as f:  # whole records once TensorBoard's writer flushed them
        f.seek(events[1])
        new = f.read()
      if new:
        events[0].write(new)
        events[0].flush()
        events[1] += len(new)
    with self._files_lock:
      files, self._files = self._files, {}
    for path, text in files.items():
      storage.replace_text(path, text)


def earlier_records(path: str) -> list[dict]:
  """The records of an existing metrics file, in order (none for a new run)."""
  if not storage.isfile(path):
    return []
  records = []
  for line in storage.read_text(path).splitlines():
    try:
      record = json.loads(line)
    except ValueError:  # a line torn by a killed run
      continue
    if isinstance(record, dict) and isinstance(record.get("step"), int):
      records.append(record)
  return records


def recorded_evals(records: list[dict], names) -> dict[tuple[int, str], dict]:
  """{(step, evaluator name): its "NAME/metric" values} of the eval rows among `records`."""
  recorded = {}
  for record in records:
    for name in names:
      metrics = {k: v for k, v in record.items() if k.startswith(f"{name}/")}
      if metrics:
        recorded.setdefault((record["step"], name), metrics)  # the first row of a step counts
  return recorded


# ---- Where the time goes: the step-time breakdown and goodput ------------------------------------

PARTS = ("input_wait", "dispatch", "device_wait", "checkpoint", "eval", "compile", "profile")
LOST = ("input_wait", "checkpoint", "eval", "compile", "profile")  # not productive


@dataclasses.dataclass
class Goodput:
  """The productive time of the steps kept so far, and what restarts lost."""

  productive_s: float = 0.0
  recomputed_steps: int = 0
  recomputed_s: float = 0.0

  @classmethod
  def resumed(cls, earlier_records: list[dict], start_step: int) -> "Goodput":
    """The accounting of a run resumed at `start_step`, from its earlier metrics records."""
    rows = [r for r in earlier_records if "time/productive_s" in r]
    if not rows:
      return cls()
    last = rows[-1]  # the last attempt's last record: its totals and how far it got
    # The last record at or before the checkpoint, in file order: after several restarts, the
    # attempt that trained up to that checkpoint wrote it last.
    kept = next((r for r in reversed(rows) if r["step"] <= start_step), None)
    kept_s = kept["time/productive_s"] if kept else 0.0
    return cls(
        productive_s=kept_s,
        recomputed_steps=int(last.get("recomputed_steps", 0)) + max(0, last["step"] - start_step),
        recomputed_s=last.get("time/recomputed_s", 0.0)
        + max(0.0, last["time/productive_s"] - kept_s),
    )

  def summary(self, elapsed_s: float) -> dict:
    """What run_info.json records."""
    return {
        "goodput": round(self.productive_s / elapsed_s, 4) if elapsed_s > 0 else 0.0,
        "productive_s": round(self.productive_s, 3),
        "elapsed_s": round(elapsed_s, 3),
        "recomputed_steps": self.recomputed_steps,
        "recomputed_s": round(self.recomputed_s, 3),
    }


class StartupClock:
  """Where an attempt's start-up went: `lap(part)` closes the part that ran since the last lap
  (or since `started`); `parts` is what run_info.json records as `startup_s`."""

  def __init__(self, started: float):
    self._last = started
    self.parts = {}

  def lap(self, part: str) -> None:
    now = time.time()
    self.parts[part] = round(now - self._last, 3)
    self._last = now


class StepTimes:
  """Host time by part within the current log window (`timing`), closed by `window`."""

  def __init__(self, goodput: Goodput, startup_s: float):
    self.goodput = goodput
    self.startup_s = startup_s  # reported in the attempt's first window
    self._begin()

  def _begin(self) -> None:
    self._start = time.perf_counter()
    self._spent = dict.fromkeys(PARTS, 0.0)

  @contextlib.contextmanager
  def timing(self, part: str):
    began = time.perf_counter()
    try:
      yield
    finally:
      self._spent[part] += time.perf_counter() - began

  def window(self, elapsed_s: float) -> dict:
    """The window's record (keys in the module docstring); starts the next window."""
    window_s = time.perf_counter() - self._start
    spent = self._spent
    self.goodput.productive_s += max(0.0, window_s - sum(spent[k] for k in LOST))
    record = {
        "time/window_s": window_s,
        **{f"time/{k}_s": spent[k] for k in PARTS},
        "time/startup_s": self.startup_s,
        "time/productive_s": self.goodput.productive_s,
        "input_wait_share": spent["input_wait"] / window_s if window_s > 0 else 0.0,
        "goodput": self.goodput.productive_s / elapsed_s if elapsed_s > 0 else 0.0,
    }
    if self.goodput.recomputed_steps:
      record["recomputed_steps"] = self.goodput.recomputed_steps
      record["time/recomputed_s"] = self.goodput.recomputed_s
    self.startup_s = 0.0
    self._begin()
    return record
