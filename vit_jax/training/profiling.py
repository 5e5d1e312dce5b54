"""A `jax.profiler` trace of chosen steps: `--config.profile_steps=START:STOP`.

The trace covers steps START to STOP-1, numbered as in metrics.jsonl (STOP is excluded, as in a
Python slice), and lands in W/tensorboard/plugins/profile/RUN/ (vit_jax/workdir.py): HOST.xplane.pb
for TensorBoard's profile plugin (xprof: trace viewer, overview, op profile) and
perfetto_trace.json.gz for ui.perfetto.dev. The trainer annotates every step with
`jax.profiler.StepTraceAnnotation("train", step_num=N)`, so the tools split the trace by step.

Imported only by a run that sets `profile_steps`.
"""

import re

import jax

from vit_jax import errors

_STEPS = re.compile(r"(\d+):(\d+)", re.ASCII)  # \d: 0-9 only (int() refuses "²")


def parse_steps(text: str) -> tuple[int, int]:
  """ "START:STOP" -> (START, STOP), 1 <= START < STOP; ConfigError otherwise."""
  match = _STEPS.fullmatch(str(text).strip())
  if not match or not 1 <= int(match.group(1)) < int(match.group(2)):
    raise errors.ConfigError(
        f"--config.profile_steps={text!r} must be START:STOP with 1 <= START < STOP, e.g. 10:15 "
        "(traces steps 10 to 14), or empty to trace nothing"
    )
  return int(match.group(1)), int(match.group(2))


class TraceWindow:
  """Starts the trace before step START and stops it before step STOP, once the steps before it
  have run on the devices (they run asynchronously: a trace stopped at their dispatch would miss
  their device work). A run resumed inside the window traces the rest of it; one that ends
  before STOP stops the trace in `close`.
  """

  def __init__(self, steps: str, logdir: str):
    self.start, self.stop = parse_steps(steps)
    self.logdir = logdir
    self.tracing = False
    self.done = False

  def at_step(self, step_num: int, state) -> None:
    """Called before step `step_num` with the state the step before it returned."""
    if self.tracing and step_num >= self.stop:
      jax.block_until_ready(state)
      self.close()
    elif not (self.tracing or self.done) and self.start <= step_num < self.stop:
      jax.profiler.start_trace(self.logdir, create_perfetto_trace=True)
      self.tracing = True

  def close(self) -> None:
    if self.tracing:
      jax.profiler.stop_trace()
      self.tracing, self.done = False, True
