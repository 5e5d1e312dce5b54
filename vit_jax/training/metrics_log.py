"""Training logs: `metrics.jsonl`, TensorBoard events, and a progress bar or plain lines with ETA.

Only process 0 writes; other processes get a writer that does nothing. Keys under `time/` (the
step-time breakdown, training/step_timing.py) go to the file and TensorBoard, not to the console.
"""

import json
import sys
import time

import jax

from vit_jax import storage
from vit_jax import workdir as workdir_lib

DETAIL_PREFIX = "time/"  # logged to the file and TensorBoard only


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
    from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top

    self.tb = SummaryWriter(workdir_lib.tensorboard_dir(workdir))
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
    self.jsonl.flush()
    for key, value in metrics.items():
      self.tb.add_scalar(key, float(value), step)
    self.tb.flush()
    summary = "  ".join(
        f"{k}={float(v):.4g}" for k, v in metrics.items() if not k.startswith(DETAIL_PREFIX)
    )
    if self.bar is not None:
      self.bar.write(f"step {step}: {summary}")
    else:
      eta = self.eta_seconds(step)
      eta_text = f"  eta={eta:.0f}s" if eta == eta else ""
      print(f"step {step}/{self.total_steps}: {summary}{eta_text}", flush=True)

  def advance(self, step: int) -> None:
    if self.enabled and self.bar is not None:
      self.bar.update(step - self.bar.n)

  def close(self) -> None:
    if not self.enabled:
      return
    if self.bar is not None:
      self.bar.close()
    self.jsonl.close()
    self.tb.close()


def earlier_records(path: str) -> list[dict]:
  """The records of an existing metrics file, in order (none for a new run)."""
  if not storage.isfile(path):
    return []
  records = []
  with storage.open(path, encoding="utf-8") as f:
    for line in f:
      try:
        record = json.loads(line)
      except ValueError:  # a line torn by a killed run
        continue
      if isinstance(record, dict) and isinstance(record.get("step"), int):
        records.append(record)
  return records
