"""Fault injection for the tests of every retry and save path: the n-th request to a path fails
with a chosen error, in a bucket or on a local disk.

    fault = faults.inject(target, "checkpoints/6/", 503, nth=1, times=2)
    ...
    assert fault.failed() == 2  # it fired

`target` is where the requests go:
- an emulator of tests/gcs_emulator.py: its server fails the requests (`Emulator.fail`), so every
  client (TensorStore's arrays, gcsfs, Google's client) of every process pointed at it sees the
  fault; `path` is matched in BUCKET/OBJECT (a listing: its prefix). `error`: an HTTP status
  (408, 429, 5xx: an outage; 403, 404: a refusal), "reset" (a dropped connection) or "lost" (the
  request is done, and its answer lost); `only`: HTTP methods ("GET" reads and listings, "POST"
  uploads and composes, "DELETE").
- pytest's `monkeypatch`: this process's calls on local paths containing `path` fail: the file
  system calls orbax's commits and deletions make (os.rename, os.replace, shutil.rmtree, os.remove,
  os.unlink, os.mkdir, os.makedirs) and, for the arrays TensorStore reads and writes natively, the
  orbax calls that make them (CheckpointManager.save and .restore of a step, whose path is
  DIRECTORY/STEP). `error`: an OSError, an errno (errno.ETIMEDOUT: an outage of a network file
  system; errno.EACCES: a refusal) or any exception; `only`: the function names.
"""

import errno as errno_lib
import os
import shutil

import orbax.checkpoint as ocp

# name -> (owner, attribute): the local calls a fault may fail, each given its path first.
_LOCAL_CALLS = {
    "rename": (os, "rename"),
    "replace": (os, "replace"),
    "rmtree": (shutil, "rmtree"),
    "remove": (os, "remove"),
    "unlink": (os, "unlink"),
    "mkdir": (os, "mkdir"),
    "makedirs": (os, "makedirs"),
}
_STEP_CALLS = {"save": ocp.CheckpointManager, "restore": ocp.CheckpointManager}


class Fault:
  """One rule: the `nth` to (`nth` + `times` - 1)th matching request fails."""

  def __init__(self, failed):
    self.failed = failed  # () -> how many requests it failed so far


def inject(target, path: str, error, nth: int = 1, times: int = 1, only=None) -> Fault:
  """Makes the `nth` to (`nth` + `times` - 1)th request to a path containing `path` fail with
  `error` (see the module's docstring); returns the Fault."""
  if hasattr(target, "fail"):  # an emulator
    index = len(target.failed())
    target.fail(path, status=error, nth=nth, times=times, methods=only)
    return Fault(lambda: target.failed()[index])
  return _inject_local(target, path, error, nth, times, only)


def _as_exception(error, path: str) -> BaseException:
  if isinstance(error, int):
    return OSError(error, os.strerror(error), path)
  return error


def _inject_local(monkeypatch, path: str, error, nth: int, times: int, only) -> Fault:
  seen, failed = [0], [0]

  def picked(where) -> bool:
    if path not in os.fspath(where):
      return False
    seen[0] += 1
    if nth <= seen[0] < nth + times:
      failed[0] += 1
      return True
    return False

  names = only or [*_LOCAL_CALLS, *_STEP_CALLS]
  for name in names:
    if name in _STEP_CALLS:
      owner = _STEP_CALLS[name]
      real = getattr(owner, name)

      def step_call(self, step, *args, _real=real, **kwargs):
        where = os.path.join(os.fspath(self.directory), str(step))
        if picked(where):
          raise _as_exception(error, where)
        return _real(self, step, *args, **kwargs)

      monkeypatch.setattr(owner, name, step_call)
      continue
    owner, attribute = _LOCAL_CALLS[name]
    real = getattr(owner, attribute)

    def call(first, *args, _real=real, **kwargs):
      if picked(first):
        raise _as_exception(error, os.fspath(first))
      return _real(first, *args, **kwargs)

    monkeypatch.setattr(owner, attribute, call)
  return Fault(lambda: failed[0])


TIMED_OUT = errno_lib.ETIMEDOUT  # a network file system's outage, as errors.transient_cause sees it
REFUSED = errno_lib.EACCES
