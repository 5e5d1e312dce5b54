"""A storage's bad minutes (503s, timeouts, a region's hiccup): one retry policy for every request.

Cloud Storage's retry strategy (cloud.google.com/storage/docs/retry-strategy): a transient error
(HTTP 408, 429 or 5xx, a refused, reset or timed-out connection: errors.transient_cause) is tried
again after a wait that doubles, with jitter; a permanent one (403, 404, a failed precondition)
is not. Two levels:
- each client tries a request again by itself for up to `client_deadline_s()`: Google's client
  (`client_retry`) and TensorStore (vit_jax/checkpoint.py) are given it; gcsfs, which epath uses,
  keeps its own six tries over about 30 s;
- past that, `ride_out` tries the whole operation again until the bucket has been away for the
  outage budget (the trainer's config.storage_outage_s), then raises StorageUnavailableError: one
  line naming the bucket, the error and how long it was away.

An outage is counted per `holder` of a path: its bucket, or the file system holding a local path
(a network one may have bad minutes too). Every operation of vit_jax/storage on a gs:// path rides
out its bucket's; other modules ride out their own requests through `ride_out`.
"""

import os
import random
import sys
import threading
import time
import urllib.parse

from vit_jax import errors

# ---- What holds a path --------------------------------------------------------------------------


def is_remote(path) -> bool:
  """True for a URI with a scheme and a bucket (gs://bucket/...), False for a local path."""
  parts = urllib.parse.urlsplit(os.fspath(path))
  return bool(parts.scheme and parts.netloc)


def bucket(path) -> str:
  """The bucket of a gs:// path, as gs://BUCKET."""
  parts = urllib.parse.urlsplit(os.fspath(path))
  return f"{parts.scheme}://{parts.netloc}"


def holder(path) -> str:
  """What holds `path`, as a message names it: gs://BUCKET, or the file system holding it."""
  return bucket(path) if is_remote(path) else f"the file system holding {path}"


# ---- The policy ---------------------------------------------------------------------------------
# The default budget is 5 minutes: under the 10 after which another run may take over the lock of
# a bucket workdir whose holder stopped renewing it (vit_jax/workdir.py LOCK_STALE_S), less the
# renewals, so a run that rides out an outage still holds its workdir.
OUTAGE_S = 300.0
FIRST_WAIT_S = 1.0  # the first wait before trying again, doubled at each try
LONGEST_WAIT_S = 32.0  # and never longer (nor longer than an eighth of the budget)
CLIENT_DEADLINE_S = 30.0  # a client's own retries of one request (at most a quarter of the budget)
PROBE_S = 10.0  # how long `answers` waits for a listing of one object (at most the client's)
_budget_s = OUTAGE_S
_away = {}  # gs://BUCKET -> [time.time() of the first request it did not answer, the last error]
_away_lock = threading.Lock()
_answered_again = threading.Condition(_away_lock)  # wakes the waits of `ride_out`


def set_outage_budget(seconds: float) -> None:
  """From now on, a bucket that does not answer is waited for `seconds` (the trainer: its
  config.storage_outage_s) before an operation on it fails."""
  global _budget_s
  _budget_s = float(seconds)


def outage_budget() -> float:
  return _budget_s


def client_deadline_s() -> float:
  """How long a client retries one request by itself before `ride_out` takes over."""
  return min(CLIENT_DEADLINE_S, _budget_s / 4)


def _longest_wait_s() -> float:
  return max(FIRST_WAIT_S, min(LONGEST_WAIT_S, _budget_s / 8))


def outage(path) -> tuple[float, str] | None:
  """(seconds, the last error) of the outage of the bucket of `path`, counted from the first
  request it did not answer; None while it answers (as far as this process has seen)."""
  with _away_lock:
    away = _away.get(bucket(path)) if is_remote(path) else None
    return None if away is None else (time.time() - away[0], away[1])


def _unanswered(where: str, started: float, cause: str) -> float:
  """Records a request to `where` that got no answer; seconds since its outage began."""
  with _away_lock:
    away = _away.setdefault(where, [started, cause])
    away[1] = cause
    return time.time() - away[0]


def answers(path) -> bool:
  """Whether the bucket of `path` answers one request now (a listing of at most one object under
  `path`: no retries, the client's deadline; a local path: True). A refusal that is not an
  outage (403, 404) is raised."""
  if not is_remote(path):
    return True
  from vit_jax.storage import gcs  # pylint: disable=g-import-not-at-top  (gs:// only)

  gcs.as_epath(path)  # the client check
  started, where = time.time(), bucket(path)
  try:
    _probe(path)
  except Exception as e:  # pylint: disable=broad-except
    cause = errors.transient_cause(e)
    if cause is None:
      raise
    _unanswered(where, started, cause)
    return False
  _answered(where)
  return True


def _probe(path) -> None:
  """One cheap request to the bucket of `path` (any account that reads objects may list them)."""
  from vit_jax.storage import gcs  # pylint: disable=g-import-not-at-top  (gs:// only)

  parts = urllib.parse.urlsplit(os.fspath(path))
  listing = gcs.client().list_blobs(
      parts.netloc,
      prefix=parts.path.lstrip("/"),
      max_results=1,
      retry=None,
      timeout=min(PROBE_S, client_deadline_s()),
  )
  list(listing)


def _answered(where: str) -> None:
  with _away_lock:
    away = _away.pop(where, None)
    _answered_again.notify_all()
  if away is not None and time.time() - away[0] > client_deadline_s():
    print(f"note: {where} answers again, after {time.time() - away[0]:.0f} s.", flush=True)


def ride_out(operation, path, what: str):
  """`operation()`, tried again while the storage holding `path` does not answer: after waits
  that double from FIRST_WAIT_S to `_longest_wait_s()`, with jitter, until the outage budget is
  spent; then a StorageUnavailableError naming the bucket, the error, how long it was away and
  `what` was being done ("writing gs://.../metrics.jsonl"). Other errors are raised as they are.

  The budget runs from this operation's first unanswered try, or from the bucket's first
  unanswered request if that came sooner (whichever operation made it). Another request's
  answer ends the bucket's outage, not this operation's: one that keeps failing (an upload that
  always times out, a 503 on one object) ends at its budget while other requests (a lock's
  renewal, a metrics flush) are answered.

  `operation` must be safe to repeat: a retried write whose first try landed must find that out
  (the preconditions of `objects.create_object` and the appender do). A local path is tried the
  same way: its file system may be a network one.
  """
  where = holder(path)
  wait, warned, first_unanswered = FIRST_WAIT_S, False, None
  while True:
    started = time.time()
    try:
      if outage(path) is not None:  # a cheap request first, not a client's own long retries
        _probe(path)
        _answered(where)  # the bucket's outage is over, whatever this operation meets next
      value = operation()
    except errors.UserError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      cause = errors.transient_cause(e)
      if cause is None:
        raise
      first_unanswered = started if first_unanswered is None else first_unanswered
      away = max(_unanswered(where, started, cause), time.time() - first_unanswered)
      left = _budget_s - away
      if left <= 0:
        raise errors.StorageUnavailableError(
            f"{where} did not answer for {away:.0f} s ({cause}) while {what}: the outage outlasted "
            f"--config.storage_outage_s={_budget_s:g}. Nothing saved was lost; rerun the same "
            "command once it answers."
        ) from e
      if not warned:
        print(
            f"warning: {where} does not answer ({cause}) while {what}; trying again for up to "
            f"{left:.0f} s.",
            file=sys.stderr,
            flush=True,
        )
        warned = True
      _pause(where, min(wait + random.uniform(0, FIRST_WAIT_S), left))
      wait = min(2 * wait, _longest_wait_s())
      continue
    _answered(where)
    return value


def _pause(where: str, seconds: float) -> None:
  """Waits `seconds`, or less if another request finds `where` answering again."""
  with _answered_again:
    _answered_again.wait_for(lambda: where not in _away, timeout=seconds)


def patiently(operation, path, what: str, wait: bool):
  """`operation()`, ridden out (`ride_out`) if `wait`, else tried once (with the client's own
  retries), its answer or its outage noted all the same."""
  if wait:
    return ride_out(operation, path, what)
  started = time.time()
  try:
    value = operation()
  except Exception as e:  # pylint: disable=broad-except
    cause = errors.transient_cause(e)
    if cause is not None:
      _unanswered(bucket(path), started, cause)
    raise
  _answered(bucket(path))
  return value


def client_retry():
  """The Google client's own retries of one request: the policy above for `client_deadline_s`,
  on every request (it retries only conditional ones unless told)."""
  from google.api_core import retry  # pylint: disable=g-import-not-at-top

  return retry.Retry(
      predicate=lambda e: errors.transient_cause(e) is not None,
      initial=FIRST_WAIT_S,
      maximum=LONGEST_WAIT_S,
      multiplier=2.0,
      timeout=client_deadline_s(),
  )
