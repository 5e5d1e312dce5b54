"""Every file the product reads or writes, on a local disk or in a Cloud Storage bucket (gs://).

Paths stay strings. A local path goes to the operating system exactly as it always did; a
`gs://bucket/...` path goes through the clients of gcs.py (etils `epath`, the layer orbax saves
checkpoints through; gcsfs; Google's client), loaded at the first such path. Their packages come
in the `gcs` extra: a gs:// path without them is one error line naming the install command, before
anything is read or written.

Object storage has no directories, appends, renames or locks, so for a gs:// path:
- `makedirs` creates nothing (a folder exists once an object lies under it);
- `appender` sends only the new text at each flush, as an object that Cloud Storage's compose
  joins to the file's (objects.py);
- `move` copies a folder object by object, then deletes the source;
- `output_path` stages the output on local disk and uploads it when it is complete (a file is one
  upload, so it appears whole or not at all; a folder appears file by file);
- objects.py's `create_object` / `replace_object` / `delete_object` write only if the object is
  still the version the caller holds (Cloud Storage's generation preconditions): the workdir lock
  (vit_jax/workdir.py) is built on them.
- `read_ranges` reads byte ranges of objects, all of one call's ranges fetched concurrently (a
  token store's windows, vit_jax/data/text/token_store.py); `file_sizes` lists a folder's sizes in
  one listing.
- a listing (`listdir`, `file_sizes`) asks the bucket anew each time, so it holds what other
  processes wrote since this one last listed the folder.

A bucket has bad minutes (503s, timeouts, a region's hiccup): every call here on a gs:// path rides
them out under one policy (outages.py `ride_out`), up to an outage budget, and then raises a
StorageUnavailableError: one line naming the bucket, the error and how long it was away. `open`
alone gives a stream whose later reads are the caller's; read a whole file with `read_text` or
`read_bytes`.
"""

import builtins
import contextlib
import hashlib
import os
import shutil
import tempfile
import urllib.parse

from vit_jax import errors
from vit_jax.storage import outages

# Whether a path is in a bucket, and which: at home in outages.py, which counts outages by bucket.
from vit_jax.storage.outages import bucket
from vit_jax.storage.outages import is_remote


def _gcs():
  """gcs.py, imported at the first gs:// path: a local run loads no client."""
  from vit_jax.storage import gcs  # pylint: disable=g-import-not-at-top

  return gcs


def check(path) -> None:
  """Raises the UserError a gs:// path gives without the `gcs` extra (nothing for local paths)."""
  if is_remote(path):
    _gcs().as_epath(path)


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
    return outages.ride_out(_gcs().as_epath(path).exists, path, f"looking for {path}")
  return os.path.exists(path)


def isfile(path) -> bool:
  if is_remote(path):
    return outages.ride_out(_gcs().as_epath(path).is_file, path, f"looking for {path}")
  return os.path.isfile(path)


def isdir(path) -> bool:
  if is_remote(path):
    return outages.ride_out(_gcs().as_epath(path).is_dir, path, f"looking for {path}")
  return os.path.isdir(path)


def listdir(path) -> list[str]:
  """The names in folder `path` (in no particular order). In a bucket the listing is a fresh one:
  gcsfs would answer from the one it cached, without what other processes (a pool's workers,
  other hosts) wrote since."""
  if is_remote(path):
    _gcs().forget_listings(path)
    folder = _gcs().as_epath(path)
    return outages.ride_out(lambda: [c.name for c in folder.iterdir()], path, f"listing {path}")
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
  filesystem = _gcs().filesystem(pattern)
  scheme = urllib.parse.urlsplit(os.fspath(pattern)).scheme
  _gcs().forget_listings(bucket(pattern))
  found = outages.ride_out(
      lambda: filesystem.glob(os.fspath(pattern), detail=True), pattern, f"listing {pattern}"
  )
  return sorted(f"{scheme}://{p}" for p, info in found.items() if info.get("type") == "file")


def file_sizes(folder) -> dict[str, int]:
  """{name: size in bytes} of the files directly in `folder` (one listing, also in a bucket)."""
  if not is_remote(folder):
    return {e.name: e.stat().st_size for e in os.scandir(folder) if e.is_file()}
  filesystem = _gcs().filesystem(folder)
  listing = lambda: filesystem.ls(os.fspath(folder), detail=True, refresh=True)
  entries = outages.ride_out(listing, folder, f"listing {folder}")
  return {name(e["name"]): int(e["size"] or 0) for e in entries if e.get("type") == "file"}


def user_cache(kind: str) -> str:
  """~/.cache/vit_jax/KIND ($XDG_CACHE_HOME for ~/.cache where set): the local folder of what a
  reader makes once and keeps apart from the data."""
  cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
  return os.path.join(cache, "vit_jax", kind)


def size_and_mtime(path) -> tuple[int, int]:
  """(size in bytes, modification time in ns) of a file: what changes when it is rewritten."""
  if is_remote(path):
    st = outages.ride_out(_gcs().as_epath(path).stat, path, f"reading {path}")
    return st.length, int(st.mtime * 1e9)
  st = os.stat(path)
  return st.st_size, st.st_mtime_ns


# ---- Reads and writes ---------------------------------------------------------------------------


def open(path, mode: str = "r", encoding: str | None = None):  # pylint: disable=redefined-builtin
  """A file object, as the builtin `open` gives; mode "x" (create, never replace) works on a
  bucket too, but there it is a check before the upload, not an atomic one."""
  if not is_remote(path):
    return builtins.open(path, mode, encoding=encoding)
  p = _gcs().as_epath(path)
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


def with_digest(text: str) -> str:
  """`text` behind a first line holding its SHA-256, to be stored: what is read back is then told
  from what was written (`without_digest`) where the bytes changed between (a bad disk, a copy
  cut short)."""
  return f"{_sha256(text)}\n{text}"


def without_digest(stored: str) -> str:
  """The text that `with_digest` gave `stored` for; a ValueError where `stored` is not that text
  and its digest (damaged, or written without one)."""
  digest, _, text = stored.partition("\n")
  if digest != _sha256(text):
    raise ValueError("its digest does not match: damaged, or written without one")
  return text


def _sha256(text: str) -> str:
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_bytes(path) -> bytes:
  if is_remote(path):  # Google's client: its retries are ours to set (gcsfs keeps its own)
    blob = _gcs().blob(path)

    def read():
      try:
        return blob.download_as_bytes(retry=outages.client_retry())
      except _gcs().refused()[1] as e:
        raise FileNotFoundError(f"{path} does not exist") from e

    return outages.ride_out(read, path, f"reading {path}")
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
    filesystem = _gcs().filesystem(paths[0])
    starts, stops = [requests[i][1] for i in remote], [requests[i][2] for i in remote]
    fetched = outages.ride_out(
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


def write_bytes(path, data: bytes) -> None:
  if is_remote(path):  # one upload, repeated whole; Google's client, as `read_bytes`
    blob = _gcs().blob(path)
    outages.ride_out(
        lambda: blob.upload_from_string(data, retry=outages.client_retry()), path, f"writing {path}"
    )
    _gcs().forget_listings(os.fspath(path))
    return
  with builtins.open(path, "wb") as f:
    f.write(data)


def appender(path, binary: bool = False):
  """A file object that appends to `path` (created if missing), text or, with `binary`, bytes;
  `flush` makes the data visible to other processes (in a bucket, once it answers)."""
  if is_remote(path):
    from vit_jax.storage import objects  # pylint: disable=g-import-not-at-top  (gs:// only)

    return objects.ObjectAppender(path, binary)
  return builtins.open(path, "ab" if binary else "a", encoding=None if binary else "utf-8")


# ---- Folders ------------------------------------------------------------------------------------


def makedirs(path) -> None:
  """Creates folder `path` and its parents (nothing on a bucket, where folders are implicit)."""
  if is_remote(path):
    _gcs().as_epath(path)  # the client check
    return
  os.makedirs(path, exist_ok=True)


def remove(path) -> None:
  """Deletes file `path`; FileNotFoundError if there is none. In a bucket, through Google's
  client, once the object is known to exist: a retried delete (the client's own, or the next
  try's) whose first one landed finds it gone, which is then done."""
  if not is_remote(path):
    os.remove(path)
    return
  blob, seen = _gcs().blob(path), []

  def delete():
    try:
      if not seen:
        blob.reload(retry=outages.client_retry())
        seen.append(True)
      blob.delete(retry=outages.client_retry())
    except _gcs().refused()[1] as e:  # NotFound
      if not seen:
        raise FileNotFoundError(f"{path} does not exist") from e

  outages.ride_out(delete, path, f"deleting {path}")
  _gcs().forget_listings(os.fspath(path))


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
    outages.ride_out(_removing(_gcs().as_epath(path).rmtree), path, f"deleting {path}")
  except OSError:
    if not ignore_errors:
      raise


def move(src, dst) -> None:
  """Moves a file or folder; `dst` must not exist. A local move is one rename; in a bucket each
  object is copied, then the source deleted (not atomic: a crash can leave both)."""
  if not is_remote(src) and not is_remote(dst):
    os.rename(src, dst)
    return
  source, target = _gcs().as_epath(src), _gcs().as_epath(dst)
  if isdir(src):
    for child in listdir(src):
      move(join(src, child), os.fspath(target / child))
    if exists(src):  # a folder placeholder object, where a client wrote one
      rmtree(src)
    return
  outages.ride_out(lambda: source.copy(target, overwrite=True), src, f"copying {src} to {dst}")
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
