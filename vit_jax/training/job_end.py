"""How a job ends: on a preemption notice, and when one of its processes stops.

## A preemption notice

A notice (SIGTERM) makes the trainer (training/train.py) checkpoint at the next step
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

## One process's end is its job's end

In a job of several processes, a process that stops on a user error (a storage that did not
answer, a refused write) would leave the others waiting for it in a collective: a checkpoint's
barrier, the next train step. They would wait until the heartbeat timeout, then abort with a
fatal error of JAX's runtime. Instead, the process that stops (`end`) writes its line and exit
code to the job's coordination service, and every other process ends with the same line and code:
- one whose collective fails as the stopped process leaves (gloo's "connection closed by peer")
  finds the line there (`after_a_peer`);
- one still waiting (its peer has not left: process 0, which serves the coordination, leaves
  last) is ended by its watcher thread (`watch`) after GRACE_S, unless it ends by itself first:
  where every process meets the same error (a config check), each reports its own.

Every process leaves with `os._exit`: its runtime's orderly shutdown is itself a barrier that a
peer stuck in a collective would never reach. Process 0 leaves last, once every other process has
left (or after LEAVE_WAIT_S): a process that outlives the coordination service is aborted by it.
"""

import atexit
import contextlib
import json
import os
import signal
import sys
import threading
import time

import jax
from jax.experimental import multihost_utils

from vit_jax import errors

_ENDED = "vit_jax/job_end/ended"  # {"process", "code", "line"} of the first process that ended
_LEFT = "vit_jax/job_end/left/"  # one key per process that is leaving
# How long a process that read another's line waits to end by itself first.
GRACE_S = 10.0
LEAVE_WAIT_S = GRACE_S + 10  # how long process 0 waits for the others to leave
_WAIT_MS = 1000  # one wait of the watcher for the key (and how long stopping it may take)
_ending = threading.Event()  # this process is ending by itself: its watcher stays quiet
_stop = threading.Event()  # the process exits: the watcher returns


def _client():
  """The job's coordination client, or None in a job of one process."""
  if jax.process_count() == 1:
    return None
  from jax._src import distributed  # pylint: disable=g-import-not-at-top  (as orbax reads it)

  return distributed.global_state.client


def watch() -> None:
  """In a job of several processes: starts the thread that ends this process when another one
  ends the job (`end`)."""
  client = _client()
  if client is None:
    return
  watcher = threading.Thread(target=_watch, args=(client,), name="vit_jax-job-end", daemon=True)
  watcher.start()
  # Stopped before the interpreter finalizes: a daemon thread still inside the client's wait
  # then would abort the process ("FATAL: exception not rethrown") as it exits.
  atexit.register(lambda: (_stop.set(), watcher.join(timeout=2 * _WAIT_MS / 1000)))


def _watch(client) -> None:
  while not _stop.is_set():
    started = time.time()
    try:
      ended = json.loads(client.blocking_key_value_get(_ENDED, _WAIT_MS))
    except Exception:  # pylint: disable=broad-except  (nothing yet, or the service is gone)
      _stop.wait(max(0.0, _WAIT_MS / 1000 - (time.time() - started)))  # a wait's worth, at least
      continue
    deadline = time.time() + GRACE_S
    while time.time() < deadline:
      if _ending.is_set() or _stop.is_set():  # this process ends by itself
        return
      time.sleep(0.05)
    _follow(client, ended)


def end(line: str, code: int) -> None:
  """Ends this process with `error: line` and exit `code`; in a job of several processes, the
  others end with the same line and code."""
  _ending.set()
  print(f"error: {line}", file=sys.stderr, flush=True)
  client = _client()
  if client is None:
    sys.exit(code)
  ended = {"process": jax.process_index(), "code": code, "line": line}
  with contextlib.suppress(Exception):  # another process ended first: it tells them
    client.key_value_set(_ENDED, json.dumps(ended))
  _leave(client, code)


@contextlib.contextmanager
def after_a_peer():
  """Inside the trainer's command: an error of this process that follows another's end (its
  collective failed as that process left) ends it with that process's line and code."""
  try:
    yield
  except Exception as e:
    client = _client()
    if client is not None and errors.user_problem(e) is None:  # a user error is this one's own
      with contextlib.suppress(Exception):  # no process ended: the error is this one's own
        _follow(client, json.loads(client.blocking_key_value_get(_ENDED, 2000)))
    raise


def _follow(client, ended: dict) -> None:
  _ending.set()
  print(f"error: process {ended['process']} of the job stopped: {ended['line']}", file=sys.stderr)
  _leave(client, ended["code"])


def _leave(client, code: int) -> None:
  """Leaves at once; process 0 once every other process has left (or after LEAVE_WAIT_S)."""
  with contextlib.suppress(Exception):
    client.key_value_set(_LEFT + str(jax.process_index()), "1")
  deadline = time.time() + LEAVE_WAIT_S
  while jax.process_index() == 0 and time.time() < deadline:
    try:
      if len(client.key_value_dir_get(_LEFT)) >= jax.process_count():
        break
    except Exception:  # pylint: disable=broad-except
      break
    time.sleep(0.05)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access


# A preemption notice.


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
