"""Preemption: a notice (SIGTERM) makes the trainer (training/train.py) checkpoint at the next step
and exit.

One process: a Python SIGTERM handler sets a flag that the loop reads after each step.

Several processes must all save the same step (the save is collective), without a per-step host
sync. JAX's distributed runtime does this (`jax.distributed.initialize` starts its preemption
sync manager, on by default: `jax_enable_preemption_service`): its notifier catches SIGTERM on
any host and tells the coordination service; each host's manager then, in the background,
publishes the last step this host reported, and all agree to stop at the largest plus one.
`multihost_utils.reached_preemption_sync_point(step)`, called after every step, only reads that
agreement, so no host waits for another until a notice comes. Steps are the global step, as
orbax's saves also report them. A notice that comes before the loop (during set-up, or while the
step compiles) stops the run after its first step. The notifier polls for the signal once a
second; Cloud TPU gives about 30 s between the notice and the kill.
"""

import signal
import threading

import jax
from jax.experimental import multihost_utils


class Watcher:
  """`should_stop(step)`, asked after each step: True at the step to save and exit."""

  def __init__(self, start_step: int):
    self.requested = False
    self._previous = None
    # With several processes, the runtime's notifier owns SIGTERM: a Python handler installed
    # after it would take the signal from it.
    self._agreed_by_runtime = jax.process_count() > 1
    if self._agreed_by_runtime and start_step:
      # The runtime's count starts at 0, so a notice during a resumed run's set-up made the
      # hosts agree on step 1: report step 1 (True then, on every host), then where this attempt
      # starts, so that a later notice agrees on the step after it.
      reports = [multihost_utils.reached_preemption_sync_point(s) for s in sorted({1, start_step})]
      self.requested = any(reports)
    elif not self._agreed_by_runtime and threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)

  def _on_sigterm(self, signum, frame):
    del signum, frame
    self.requested = True

  def should_stop(self, step: int) -> bool:
    """Whether to save and exit after `step` (the same answer on every host)."""
    if self._agreed_by_runtime:
      return multihost_utils.reached_preemption_sync_point(step) or self.requested
    return self.requested

  def close(self):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
