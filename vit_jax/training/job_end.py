"""One process's end is its job's end.

In a job of several processes, a process that stops on a user error (a storage that did not
answer, a refused write) would leave the others waiting for it in a collective: a checkpoint's
barrier, the next train step. They would wait until the heartbeat timeout, then abort with a
fatal error of JAX's runtime. Instead, the process that stops (`end`) writes its line and exit
code to the job's coordination service, and every other process, whose watcher thread (`watch`)
waits for that key, prints the same line and exits with the same code at once.

A process that ends this way leaves with `os._exit`: its runtime's orderly shutdown is itself a
barrier that a peer stuck in a collective would never reach. Process 0, which serves the job's
coordination, leaves last, once every process has read the line (or after ACK_WAIT_S).
"""

import atexit
import json
import os
import sys
import threading
import time

import jax

_ENDED = "vit_jax/job_end/ended"  # {"process", "code", "line"} of the first process that ended
_SEEN = "vit_jax/job_end/seen/"  # one key per process that read it
ACK_WAIT_S = 10.0  # how long an ending process waits for the others to read its line
_WAIT_MS = 1000  # one wait of the watcher for the key (and how long stopping it may take)
_ending = threading.Event()  # this process is ending by itself: its watcher stays quiet
_stop = threading.Event()  # the process exits: the watcher returns


def _client():
  from jax._src import distributed  # pylint: disable=g-import-not-at-top  (as orbax reads it)

  return distributed.global_state.client


def watch() -> None:
  """In a job of several processes: starts the thread that ends this process when another one
  ends the job (`end`)."""
  if jax.process_count() > 1 and _client() is not None:
    watcher = threading.Thread(
        target=_watch, args=(_client(),), name="vit_jax-job-end", daemon=True
    )
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
    _seen(client)
    if _ending.is_set():  # this process ends by itself (`end`)
      return
    print(f"error: process {ended['process']} of the job stopped: {ended['line']}", file=sys.stderr)
    _exit(client, ended["code"])


def end(line: str, code: int) -> None:
  """Ends this process with `error: line` and exit `code`; in a job of several processes, the
  others end with the same line and code."""
  _ending.set()
  print(f"error: {line}", file=sys.stderr, flush=True)
  client = _client() if jax.process_count() > 1 else None
  if client is None:
    sys.exit(code)
  ended = {"process": jax.process_index(), "code": code, "line": line}
  try:
    client.key_value_set(_ENDED, json.dumps(ended))
  except Exception:  # pylint: disable=broad-except  (another process ended first: it tells them)
    pass
  _seen(client)
  _exit(client, code)


def _seen(client) -> None:
  try:
    client.key_value_set(_SEEN + str(jax.process_index()), "1")
  except Exception:  # pylint: disable=broad-except
    pass


def _exit(client, code: int) -> None:
  """Leaves at once; process 0, which serves the job's coordination, once every process has
  read the line (or after ACK_WAIT_S): a process that outlives the service is aborted by it."""
  deadline = time.time() + ACK_WAIT_S
  while jax.process_index() == 0 and time.time() < deadline:
    try:
      if len(client.key_value_dir_get(_SEEN)) >= jax.process_count():
        break
    except Exception:  # pylint: disable=broad-except
      break
    time.sleep(0.05)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access
