"""SIGTERM (a preemption notice) asks the trainer to checkpoint and exit.

One process stops at the next step. Several processes must stop at the same step, so every one
joins the same final (collective) checkpoint save: they agree with a one-bit all-gather, but only
at the loop's sync points (log, save and eval steps, where the hosts wait for the devices
anyway), never per step, so no host is held back from dispatching the next steps. A notice is
therefore acted on within `log_every` steps; Cloud TPU's grace period (about 30 s) covers that
at the usual cadences.
"""

import signal
import threading

import jax
from jax.experimental import multihost_utils
import numpy as np


class PreemptionWatcher:

  def __init__(self):
    self.requested = False
    self._previous = None
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)

  def _on_sigterm(self, signum, frame):
    del signum, frame
    self.requested = True

  def should_stop(self, sync_point: bool) -> bool:
    """Whether to save and exit now; with several processes only ever True at a sync point."""
    if jax.process_count() == 1:
      return self.requested
    if not sync_point:
      return False
    return bool(np.any(multihost_utils.process_allgather(np.array(self.requested))))

  def close(self):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
