"""Training logs: `metrics.jsonl`, TensorBoard events, and a progress bar or plain lines with ETA.

Only process 0 writes; other processes get a writer that does nothing.
"""

import json
import sys
import time

import jax

from vit_jax import storage
from vit_jax import workdir as workdir_lib


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
    if not self.enabled:
      return
    path = workdir_lib.metrics_path(workdir)
    self.elapsed_before = earlier_elapsed(path)
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

  def write(self, step: int, metrics: dict) -> None:
    if not self.enabled:
      return
    row = {"step": int(step), **{k: float(v) for k, v in metrics.items()}}
    row["elapsed_s"] = round(self.elapsed_before + time.time() - self.started, 3)
    self.jsonl.write(json.dumps(row) + "\n")
    self.jsonl.flush()
    for key, value in metrics.items():
      self.tb.add_scalar(key, float(value), step)
    self.tb.flush()
    summary = "  ".join(f"{k}={float(v):.4g}" for k, v in metrics.items())
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


def earlier_elapsed(path: str) -> float:
  """The largest `elapsed_s` in an existing metrics file (0 for a new run or older logs)."""
  if not storage.isfile(path):
    return 0.0
  latest = 0.0
  with storage.open(path, encoding="utf-8") as f:
    for line in f:
      try:
        latest = max(latest, float(json.loads(line).get("elapsed_s", 0.0)))
      except (ValueError, AttributeError):  # a line torn by a killed run
        continue
  return latest
