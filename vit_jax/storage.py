"""Every file the product reads or writes, on a local disk or in a Cloud Storage bucket (gs://).

Paths stay strings. A local path goes to the operating system exactly as it always did; a
`gs://bucket/...` path goes through etils `epath`, the layer orbax saves checkpoints through (on a
real bucket epath uses TensorFlow's GCS client, or gcsfs where EPATH_USE_TF=false). Its client
packages come in the `gcs` extra: a gs:// path without them is one error line naming the install
command, before anything is read or written.

Object storage has no directories, appends, renames or locks, so for a gs:// path:
- `makedirs` creates nothing (a folder exists once an object lies under it);
- `appender` sends only the new text at each flush, as an object that Cloud Storage's compose
  joins to the file's;
- `move` copies a folder object by object, then deletes the source;
- `output_path` stages the output on local disk and uploads it when it is complete (a file is one
  upload, so it appears whole or not at all; a folder appears file by file);
- `create_object` / `replace_object` / `delete_object` write only if the object is still the
  version the caller holds (Cloud Storage's generation preconditions): the workdir lock
  (vit_jax/workdir.py) is built on them.
- `read_ranges` reads byte ranges of objects, all of one call's ranges fetched concurrently (a
  token store's windows, vit_jax/data/text/token_store.py); `file_sizes` lists a folder's sizes in
  one listing.
- a listing (`listdir`, `file_sizes`) asks the bucket anew each time, so it holds what other
  processes wrote since this one last listed the folder.

A bucket has bad minutes (503s, timeouts, a region's hiccup): every call here on a gs:// path rides
them out under one policy (`ride_out`, below), up to an outage budget, and then raises a
StorageUnavailableError: one line naming the bucket, the error and how long it was away. `open`
alone gives a stream whose later reads are the caller's; read a whole file with `read_text` or
`read_bytes`.
"""

import builtins
import contextlib
import functools
import importlib
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse

from vit_jax import errors

INSTALL_GCS = "pip install -e .[gcs]"
_SCHEMES = ("gs",)
# What the `gcs` extra installs and a gs:// path needs: fsspec's GCS file system (epath uses it
# with EPATH_USE_TF=false) and Google's client (generation preconditions, TensorBoard's writer).
_CLIENT_MODULES = ("gcsfs", "google.cloud.storage")
_checked_clients = False


def is_remote(path) -> bool:
  """True for a URI with a scheme and a bucket (gs://bucket/...), False for a local path."""
  parts = urllib.parse.urlsplit(os.fspath(path))
  return bool(parts.scheme and parts.netloc)


def _epath(path):
  """`path` as an epath.Path, the client packages checked (a UserError without them)."""
  global _checked_clients
  scheme = urllib.parse.urlsplit(os.fspath(path)).scheme
  if scheme not in _SCHEMES:
    raise errors.ConfigError(
        f"{path}: {scheme}:// is not supported; use a local path or gs://BUCKET/..."
    )
  if not _checked_clients:
    for module in _CLIENT_MODULES:
      try:
        importlib.import_module(module)
      except ImportError as e:
        raise errors.MissingExtraError(
            f"{path} is in Cloud Storage, which needs the gcs extra ({module} is not installed): "
            f"{INSTALL_GCS}"
        ) from e
    _quiet_client_retries()
    _checked_clients = True
  from etils import epath  # pylint: disable=g-import-not-at-top  (orbax imports it anyway)

  return epath.Path(path)


def check(path) -> None:
  """Raises the UserError a gs:// path gives without the `gcs` extra (nothing for local paths)."""
  if is_remote(path):
    _epath(path)


# ---- A bucket's bad minutes: one retry policy for every request ---------------------------------
# Cloud Storage's retry strategy (cloud.google.com/storage/docs/retry-strategy): a transient error
# (HTTP 408, 429 or 5xx, a refused, reset or timed-out connection: errors.transient_cause) is tried
# again after a wait that doubles, with jitter; a permanent one (403, 404, a failed precondition)
# is not. Two levels:
# - each client tries a request again by itself for up to `client_deadline_s()`: Google's client
#   (`_client_retry`) and TensorStore (checkpoint.py) are given it; gcsfs, which epath uses, keeps
#   its own six tries over about 30 s;
# - past that, `ride_out` tries the whole operation again until the bucket has been away for the
#   outage budget (the trainer's config.storage_outage_s), then raises StorageUnavailableError.
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
  _epath(path)  # the client check
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
  parts = urllib.parse.urlsplit(os.fspath(path))
  listing = _client().list_blobs(
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
  (the preconditions of `create_object` and the appender do). A local path is tried the same
  way: its file system may be a network one.
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


def _client_retry():
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


class _ClientRetryLogFilter(logging.Filter):
  """Drops gcsfs's log of a request out of retries (with its traceback) when the error is an
  outage: `ride_out` reports it in one line."""

  def filter(self, record):
    error = record.exc_info[1] if record.exc_info else None
    return error is None or errors.transient_cause(error) is None


def _quiet_client_retries() -> None:
  gcsfs_log = logging.getLogger("gcsfs")
  if not any(isinstance(f, _ClientRetryLogFilter) for f in gcsfs_log.filters):
    gcsfs_log.addFilter(_ClientRetryLogFilter())


# ---- Names --------------------------------------------------------------------------------------


def join(base, *names) -> str:
  if is_remote(base):
    from etils import epath  # pylint: disable=g-import-not-at-top

    return os.fspath(epath.Path(base).joinpath(*names))
  return os.path.join(base, *names)


def absolute(path) -> str:
  """An absolute local path; a gs:// path as it is (it has no working directory)."""
  if is_remote(path):
    from etils import epath  # pylint: disable=g-import-not-at-top

    return os.fspath(epath.Path(path))
  return os.path.abspath(path)


def bucket(path) -> str:
  """The bucket of a gs:// path, as gs://BUCKET."""
  parts = urllib.parse.urlsplit(os.fspath(path))
  return f"{parts.scheme}://{parts.netloc}"


def holder(path) -> str:
  """What holds `path`, as a message names it: gs://BUCKET, or the file system holding it."""
  return bucket(path) if is_remote(path) else f"the file system holding {path}"


def is_within(path, folder) -> bool:
  """True if `path` is `folder` or lies inside it (local paths after resolving symbolic links)."""
  if is_remote(path) != is_remote(folder):
    return False
  if is_remote(path):
    from etils import epath  # pylint: disable=g-import-not-at-top

    path, folder = epath.Path(path), epath.Path(folder)
    return path == folder or folder in path.parents
  path, folder = os.path.realpath(path), os.path.realpath(folder)
  return os.path.commonpath([path, folder]) == folder


def parent(path) -> str:
  """The folder holding `path`; a bucket's is the bucket itself, as "/" is its own parent."""
  if is_remote(path):
    from etils import epath  # pylint: disable=g-import-not-at-top

    path = epath.Path(path)
    return os.fspath(path if os.fspath(path) == bucket(path) else path.parent)
  return os.path.dirname(path)


def name(path) -> str:
  if is_remote(path):
    from etils import epath  # pylint: disable=g-import-not-at-top

    return epath.Path(path).name
  return os.path.basename(path)


# ---- Queries ------------------------------------------------------------------------------------


def exists(path) -> bool:
  if is_remote(path):
    return ride_out(_epath(path).exists, path, f"looking for {path}")
  return os.path.exists(path)


def isfile(path) -> bool:
  if is_remote(path):
    return ride_out(_epath(path).is_file, path, f"looking for {path}")
  return os.path.isfile(path)


def isdir(path) -> bool:
  if is_remote(path):
    return ride_out(_epath(path).is_dir, path, f"looking for {path}")
  return os.path.isdir(path)


def listdir(path) -> list[str]:
  """The names in folder `path` (in no particular order). In a bucket the listing is a fresh one:
  gcsfs would answer from the one it cached, without what other processes (a pool's workers,
  other hosts) wrote since."""
  if is_remote(path):
    _forget_listings(path)
    folder = _epath(path)
    return ride_out(lambda: [c.name for c in folder.iterdir()], path, f"listing {path}")
  return os.listdir(path)


def files_under(path) -> list[str]:
  """Every file in folder `path` and its subfolders."""
  if not is_remote(path):
    return [os.path.join(root, n) for root, _, names in os.walk(path) for n in names]
  files = []
  for child in listdir(path):
    child = join(path, child)
    files.extend(files_under(child) if isdir(child) else [child])
  return files


def glob(pattern) -> list[str]:
  """The files matching `pattern` (`*`, `?`, `[...]`, and `**` for any folders below), sorted; a
  local pattern may start with `~`. In a bucket the match is one fresh listing of the objects
  under the pattern's fixed prefix."""
  if not is_remote(pattern):
    import glob as glob_lib  # pylint: disable=g-import-not-at-top

    matches = glob_lib.glob(os.path.expanduser(os.fspath(pattern)), recursive=True)
    return sorted(p for p in matches if os.path.isfile(p))
  filesystem = _filesystem(pattern)
  scheme = urllib.parse.urlsplit(os.fspath(pattern)).scheme
  _forget_listings(bucket(pattern))
  found = ride_out(
      lambda: filesystem.glob(os.fspath(pattern), detail=True), pattern, f"listing {pattern}"
  )
  return sorted(f"{scheme}://{p}" for p, info in found.items() if info.get("type") == "file")


def file_sizes(folder) -> dict[str, int]:
  """{name: size in bytes} of the files directly in `folder` (one listing, also in a bucket)."""
  if not is_remote(folder):
    return {e.name: e.stat().st_size for e in os.scandir(folder) if e.is_file()}
  filesystem = _filesystem(folder)
  listing = lambda: filesystem.ls(os.fspath(folder), detail=True, refresh=True)
  entries = ride_out(listing, folder, f"listing {folder}")
  return {name(e["name"]): int(e["size"] or 0) for e in entries if e.get("type") == "file"}


def size_and_mtime(path) -> tuple[int, int]:
  """(size in bytes, modification time in ns) of a file: what changes when it is rewritten."""
  if is_remote(path):
    st = ride_out(_epath(path).stat, path, f"reading {path}")
    return st.length, int(st.mtime * 1e9)
  st = os.stat(path)
  return st.st_size, st.st_mtime_ns


# ---- Reads and writes ---------------------------------------------------------------------------


def open(path, mode: str = "r", encoding: str | None = None):  # pylint: disable=redefined-builtin
  """A file object, as the builtin `open` gives; mode "x" (create, never replace) works on a
  bucket too, but there it is a check before the upload, not an atomic one."""
  if not is_remote(path):
    return builtins.open(path, mode, encoding=encoding)
  p = _epath(path)
  if "x" in mode:
    if p.exists():
      raise FileExistsError(f"{path} already exists")
    mode = mode.replace("x", "w")
  return p.open(mode)


def read_text(path) -> str:
  return read_bytes(path).decode("utf-8")


def write_text(path, text: str) -> None:
  write_bytes(path, text.encode("utf-8"))


def replace_text(path, text: str) -> None:
  """Writes `path` whole or not at all (a file rewritten while others may read it): locally
  through a temporary sibling and a rename; in a bucket the upload replaces the object whole."""
  if is_remote(path):
    write_text(path, text)
    return
  write_text(path + ".tmp", text)
  os.replace(path + ".tmp", path)


def read_bytes(path) -> bytes:
  if is_remote(path):  # Google's client: its retries are ours to set (gcsfs keeps its own)
    blob = _blob(path)

    def read():
      try:
        return blob.download_as_bytes(retry=_client_retry())
      except _refused()[1] as e:
        raise FileNotFoundError(f"{path} does not exist") from e

    return ride_out(read, path, f"reading {path}")
  with builtins.open(path, "rb") as f:
    return f.read()


def read_ranges(requests) -> list[bytes]:
  """The bytes [start, stop) of each (path, start, stop) of `requests`, in order. Local files are
  read in turn; ranges of objects in a bucket are fetched concurrently, in one call."""
  requests = list(requests)
  out = [b""] * len(requests)
  remote = [i for i, (path, _, _) in enumerate(requests) if is_remote(path)]
  for i, (path, start, stop) in enumerate(requests):
    if i not in remote and stop > start:
      with builtins.open(path, "rb") as f:
        out[i] = os.pread(f.fileno(), stop - start, start)
  if remote:
    paths = [os.fspath(requests[i][0]) for i in remote]
    filesystem = _filesystem(paths[0])
    starts, stops = [requests[i][1] for i in remote], [requests[i][2] for i in remote]
    fetched = ride_out(
        lambda: filesystem.cat_ranges(paths, starts, stops, on_error="raise"),
        paths[0],
        f"reading {paths[0]}" + (f" and {len(paths) - 1} more ranges" if len(paths) > 1 else ""),
    )
    for i, data in zip(remote, fetched):
      out[i] = data
  for (path, start, stop), data in zip(requests, out):
    if len(data) != stop - start:
      raise errors.DataError(
          f"{path} ends before byte {stop} (read {len(data)} of bytes [{start}, {stop})): the file "
          "is truncated."
      )
  return out


def _filesystem(path):
  """fsspec's file system for a bucket path (gcsfs: what epath uses where EPATH_USE_TF=false)."""
  _epath(path)  # the client check
  import fsspec  # pylint: disable=g-import-not-at-top  (the gcs extra brings it)

  return fsspec.filesystem(urllib.parse.urlsplit(os.fspath(path)).scheme)


def _forget_listings(path) -> None:
  """Drops gcsfs's cached listings of `path` and the folders above it (they hold each object's
  size), which miss what was written since by other processes or through Google's client: in its
  instance here and in epath's, which passes finalize_on_close (etils/epath/backend.py)."""
  import fsspec  # pylint: disable=g-import-not-at-top

  for options in ({}, {"finalize_on_close": True}):
    fsspec.filesystem(urllib.parse.urlsplit(path).scheme, **options).invalidate_cache(path)


def write_bytes(path, data: bytes) -> None:
  if is_remote(path):  # one upload, repeated whole; Google's client, as `read_bytes`
    blob = _blob(path)
    ride_out(lambda: blob.upload_from_string(data, retry=_client_retry()), path, f"writing {path}")
    _forget_listings(os.fspath(path))
    return
  with builtins.open(path, "wb") as f:
    f.write(data)


# Composing [object, part] adds a component per flush; Cloud Storage refuses a composite of more
# than 1024, so the flush that would pass this count rewrites the object whole instead.
COMPONENT_LIMIT = 1000


class _ObjectAppender:
  """A file in a bucket opened for appending (text, or bytes with `binary`). Objects cannot grow,
  but Cloud Storage can compose objects into a new one: a flush uploads only its new data, as the
  sibling object `NAME.part`, composes [object, part] into the object, and deletes the part. A
  flush sends the new bytes; one in COMPONENT_LIMIT rewrites the object whole to reset its
  component count.

  A process killed between the upload and the compose leaves the object without that data (as
  any unflushed data is lost) and a stale part, which the next flush to the path overwrites and
  deletes. A compose names the generation of the part its flush uploaded and of the object this
  appender last wrote, so no part is added twice and no other writer's change is composed over;
  each compose or upload replaces the object at once, so readers see only whole flushes.

  A flush rides out an outage (`ride_out`): the data waits in memory, in order, and is sent once
  the bucket answers; a retried flush whose first try landed finds it there (`_landed`) and does
  not add it again. `write` may be called while another thread flushes.
  """

  def __init__(self, path, binary: bool = False):
    self._path = os.fspath(path)
    self._binary = binary
    self._object = _blob(path)

    def reload():
      try:
        self._object.reload(retry=_client_retry())
      except _refused():  # not there yet: generation and size are None
        pass

    ride_out(reload, self._path, f"reading {self._path}")
    self._components = self._object.component_count or 1
    self._pending = b""  # written, not yet sent
    self._pending_lock = threading.Lock()
    self._flush_lock = threading.Lock()

  def write(self, data) -> int:
    encoded = data if self._binary else data.encode("utf-8")
    with self._pending_lock:
      self._pending += encoded
    return len(data)

  def flush(self) -> None:
    with self._flush_lock:
      with self._pending_lock:
        data = self._pending
      if not data:
        return
      ride_out(lambda: self._send(data), self._path, f"writing {self._path}")
      with self._pending_lock:
        self._pending = self._pending[len(data) :]
      _forget_listings(self._path)

  def _send(self, data: bytes) -> None:
    size = self._object.size or 0
    content_type = "application/octet-stream" if self._binary else "text/plain"
    # A new Blob: compose sends the destination's properties, and the old object's checksums
    # would not be the composite's.
    target = _blob(self._path)
    target.content_type = content_type
    retry = _client_retry()
    try:
      if self._object.generation is None:
        components = 1
        target.upload_from_string(data, content_type, if_generation_match=0, retry=retry)
      elif self._components >= COMPONENT_LIMIT:
        components = 1
        whole = self._object.download_as_bytes(
            if_generation_match=self._object.generation, retry=retry
        )
        target.upload_from_string(
            whole + data, content_type, if_generation_match=self._object.generation, retry=retry
        )
      else:
        components = self._components + 1
        part = _blob(f"{self._path}.part")
        part.upload_from_string(data, content_type, retry=retry)  # repeatable
        target.compose(
            [self._object, part], if_generation_match=self._object.generation, retry=retry
        )
        with contextlib.suppress(*_refused()):
          part.delete(if_generation_match=part.generation, retry=retry)
    except _refused()[0]:  # a retried request whose first try landed, or another writer
      target = self._landed(size, data)
    self._object, self._components = target, target.component_count or components

  def _landed(self, size: int, data: bytes):
    """The object, if it is this appender's last one followed by `data`; else a StorageError."""
    now = _blob(self._path)
    with contextlib.suppress(*_refused()):
      now.reload(retry=_client_retry())
      if now.size == size + len(data) and (
          now.download_as_bytes(
              start=size, if_generation_match=now.generation, retry=_client_retry()
          )
          == data
      ):
        return now
    raise errors.StorageError(
        f"{self._path} changed while this process appended to it: another process writes it."
    )

  def close(self) -> None:
    self.flush()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def appender(path, binary: bool = False):
  """A file object that appends to `path` (created if missing), text or, with `binary`, bytes;
  `flush` makes the data visible to other processes (in a bucket, once it answers)."""
  if is_remote(path):
    return _ObjectAppender(path, binary)
  return builtins.open(path, "ab" if binary else "a", encoding=None if binary else "utf-8")


# ---- Folders ------------------------------------------------------------------------------------


def makedirs(path) -> None:
  """Creates folder `path` and its parents (nothing on a bucket, where folders are implicit)."""
  if is_remote(path):
    _epath(path)  # the client check
    return
  os.makedirs(path, exist_ok=True)


def remove(path) -> None:
  """Deletes file `path`; FileNotFoundError if there is none. In a bucket, through Google's
  client, once the object is known to exist: a retried delete (the client's own, or the next
  try's) whose first one landed finds it gone, which is then done."""
  if not is_remote(path):
    os.remove(path)
    return
  blob, seen = _blob(path), []

  def delete():
    try:
      if not seen:
        blob.reload(retry=_client_retry())
        seen.append(True)
      blob.delete(retry=_client_retry())
    except _refused()[1] as e:  # NotFound
      if not seen:
        raise FileNotFoundError(f"{path} does not exist") from e

  ride_out(delete, path, f"deleting {path}")
  _forget_listings(os.fspath(path))


def _removing(delete):
  """`delete`, repeatable: a retry that finds the object gone after a first try that landed is
  done (the first try still raises FileNotFoundError)."""
  tries = []

  def once():
    tries.append(1)
    try:
      delete()
    except FileNotFoundError:
      if len(tries) == 1:
        raise

  return once


def rmtree(path, ignore_errors: bool = False) -> None:
  if not is_remote(path):
    shutil.rmtree(path, ignore_errors=ignore_errors)
    return
  try:
    ride_out(_removing(_epath(path).rmtree), path, f"deleting {path}")
  except OSError:
    if not ignore_errors:
      raise


def move(src, dst) -> None:
  """Moves a file or folder; `dst` must not exist. A local move is one rename; in a bucket each
  object is copied, then the source deleted (not atomic: a crash can leave both)."""
  if not is_remote(src) and not is_remote(dst):
    os.rename(src, dst)
    return
  source, target = _epath(src), _epath(dst)
  if isdir(src):
    for child in listdir(src):
      move(join(src, child), os.fspath(target / child))
    if exists(src):  # a folder placeholder object, where a client wrote one
      rmtree(src)
    return
  ride_out(lambda: source.copy(target, overwrite=True), src, f"copying {src} to {dst}")
  remove(src)


def upload(local_path: str, dst) -> None:
  """Copies a local file or folder to `dst` (local or in a bucket), file by file."""
  if os.path.isfile(local_path):
    write_bytes(dst, read_bytes(local_path))
    return
  makedirs(dst)
  for name_ in sorted(os.listdir(local_path)):
    upload(os.path.join(local_path, name_), join(dst, name_))


@contextlib.contextmanager
def local_copy(path):
  """Yields a local path holding `path`'s content: `path` itself when local, else a temporary
  download (for libraries that read only local files)."""
  if not is_remote(path):
    yield path
    return
  with tempfile.TemporaryDirectory(prefix="vit_jax-download-") as scratch:
    local = os.path.join(scratch, name(path))
    _download(path, local)
    yield local


def _download(path, local: str) -> None:
  if not isdir(path):
    with builtins.open(local, "wb") as f:
      f.write(read_bytes(path))
    return
  os.makedirs(local)
  for name_ in listdir(path):
    _download(join(path, name_), os.path.join(local, name_))


@contextlib.contextmanager
def output_path(dst, overwrite: bool = False):
  """Yields a temporary local path to write `dst` (a file or a directory) at; puts it in place
  only when the block finishes without an error. An existing `dst` is replaced only with
  `overwrite`.

  Locally `dst` appears by one rename, whole or not at all. In a bucket the staged output is
  uploaded after the block: a file is one object, whole or not at all; a folder appears file by
  file (an upload cut short leaves part of it, which a rerun with --overwrite replaces).
  """
  if is_remote(dst):
    with _remote_output_path(dst, overwrite) as staged:
      yield staged
    return
  dst = os.path.abspath(dst)
  if os.path.lexists(dst) and not overwrite:
    raise FileExistsError(f"{dst} already exists; pass overwrite=True (--overwrite) to replace it.")
  parent_dir = os.path.dirname(dst)
  os.makedirs(parent_dir, exist_ok=True)
  scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(dst)}.tmp-", dir=parent_dir)
  try:
    staged = os.path.join(scratch, os.path.basename(dst))
    yield staged
    if not os.path.lexists(staged):
      raise RuntimeError(f"Nothing was written for {dst}.")
    if not os.path.lexists(dst):
      os.rename(staged, dst)
      return
    old = os.path.join(scratch, "replaced")
    os.rename(dst, old)  # aside, since a directory cannot be renamed onto another
    try:
      os.rename(staged, dst)
    except OSError:
      os.rename(old, dst)  # keep the old one rather than nothing
      raise
  finally:
    shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def _remote_output_path(dst, overwrite: bool):
  dst = absolute(dst)
  if exists(dst) and not overwrite:
    raise FileExistsError(f"{dst} already exists; pass overwrite=True (--overwrite) to replace it.")
  with tempfile.TemporaryDirectory(prefix="vit_jax-output-") as scratch:
    staged = os.path.join(scratch, name(dst))
    yield staged
    if not os.path.lexists(staged):
      raise RuntimeError(f"Nothing was written for {dst}.")
    if isdir(dst):
      rmtree(dst)
    elif exists(dst):
      remove(dst)
    upload(staged, dst)


# ---- Objects written only over the version the caller holds (gs:// only) ------------------------


@functools.cache
def _client():
  from google.cloud import storage as gcs  # pylint: disable=g-import-not-at-top

  return gcs.Client()


def _blob(path):
  _epath(path)  # the client check
  parts = urllib.parse.urlsplit(os.fspath(path))
  return _client().bucket(parts.netloc).blob(parts.path.lstrip("/"))


def _refused():
  """The errors of a write whose precondition failed, or of an object that is gone."""
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

  return exceptions.PreconditionFailed, exceptions.NotFound


def _patiently(operation, path, what: str, wait: bool):
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


def create_object(path, text: str) -> int | None:
  """Writes object `path` only if it does not exist; its generation, or None if it exists (also
  when a retried request's first try had created it: compare the text). A bucket this account
  may not write to is a StorageError."""
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

  blob = _blob(path)

  def create():
    try:
      blob.upload_from_string(text, if_generation_match=0, retry=_client_retry())
    except _refused():
      return None
    return blob.generation

  try:
    return ride_out(create, path, f"writing {path}")
  except exceptions.Forbidden as e:
    raise errors.StorageError(
        f"cannot write {path}: this account may not write to {bucket(path)} ({e.message}); "
        "grant it write access to the bucket (e.g. roles/storage.objectUser) or use another one."
    ) from e


def replace_object(path, text: str, generation: int, wait: bool = True) -> int | None:
  """Rewrites object `path` only if it is still at `generation`; the new generation, or None
  if it changed or is gone (also when a retried request's first try had rewritten it). `wait`:
  ride out an outage, else try once."""
  blob = _blob(path)

  def replace():
    try:
      blob.upload_from_string(text, if_generation_match=generation, retry=_client_retry())
    except _refused():
      return None
    return blob.generation

  return _patiently(replace, path, f"writing {path}", wait)


def delete_object(path, generation: int) -> bool:
  """Deletes object `path` only if it is still at `generation`; whether it did."""

  def delete():
    try:
      _blob(path).delete(if_generation_match=generation, retry=_client_retry())
    except _refused():
      return False
    return True

  return ride_out(delete, path, f"deleting {path}")


def read_object(path, wait: bool = True):
  """(text, generation, time of its last write as an aware datetime) of object `path`, or None
  if there is none. `wait`: ride out an outage, else try once."""
  blob = _blob(path)

  def read():
    try:
      blob.reload(retry=_client_retry())
      text = blob.download_as_text(if_generation_match=blob.generation, retry=_client_retry())
      return text, blob.generation, blob.updated
    except _refused():  # absent, or deleted or rewritten between the two requests
      return None

  return _patiently(read, path, f"reading {path}", wait)
