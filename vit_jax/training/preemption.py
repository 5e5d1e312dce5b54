"""SIGTERM (a preemption notice) asks the trainer to checkpoint and exit at the next step.

With several processes, they agree on the stop step with a one-bit all-gather, so every process
joins the same final (collective) checkpoint save.
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

  def should_stop(self) -> bool:
    if jax.process_count() == 1:
      return self.requested
    return bool(np.any(multihost_utils.process_allgather(np.array(self.requested))))

  def close(self):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
