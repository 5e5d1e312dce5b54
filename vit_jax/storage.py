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
"""

import builtins
import contextlib
import functools
import importlib
import os
import shutil
import tempfile
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
    _checked_clients = True
  from etils import epath  # pylint: disable=g-import-not-at-top  (orbax imports it anyway)

  return epath.Path(path)


def check(path) -> None:
  """Raises the UserError a gs:// path gives without the `gcs` extra (nothing for local paths)."""
  if is_remote(path):
    _epath(path)


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
  return _epath(path).exists() if is_remote(path) else os.path.exists(path)


def isfile(path) -> bool:
  return _epath(path).is_file() if is_remote(path) else os.path.isfile(path)


def isdir(path) -> bool:
  return _epath(path).is_dir() if is_remote(path) else os.path.isdir(path)


def listdir(path) -> list[str]:
  """The names in folder `path` (in no particular order). In a bucket the listing is a fresh one:
  gcsfs would answer from the one it cached, without what other processes (a pool's workers,
  other hosts) wrote since."""
  if is_remote(path):
    _forget_listings(path)
    return [child.name for child in _epath(path).iterdir()]
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


def file_sizes(folder) -> dict[str, int]:
  """{name: size in bytes} of the files directly in `folder` (one listing, also in a bucket)."""
  if not is_remote(folder):
    return {e.name: e.stat().st_size for e in os.scandir(folder) if e.is_file()}
  entries = _filesystem(folder).ls(os.fspath(folder), detail=True, refresh=True)
  return {name(e["name"]): int(e["size"] or 0) for e in entries if e.get("type") == "file"}


def size_and_mtime(path) -> tuple[int, int]:
  """(size in bytes, modification time in ns) of a file: what changes when it is rewritten."""
  if is_remote(path):
    st = _epath(path).stat()
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
  with open(path, encoding="utf-8") as f:
    return f.read()


def write_text(path, text: str) -> None:
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def replace_text(path, text: str) -> None:
  """Writes `path` whole or not at all (a file rewritten while others may read it): locally
  through a temporary sibling and a rename; in a bucket the upload replaces the object whole."""
  if is_remote(path):
    write_text(path, text)
    return
  write_text(path + ".tmp", text)
  os.replace(path + ".tmp", path)


def read_bytes(path) -> bytes:
  with open(path, "rb") as f:
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
    fetched = _filesystem(paths[0]).cat_ranges(
        paths, [requests[i][1] for i in remote], [requests[i][2] for i in remote], on_error="raise"
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
  with open(path, "wb") as f:
    f.write(data)


# Composing [object, part] adds a component per flush; Cloud Storage refuses a composite of more
# than 1024, so the flush that would pass this count rewrites the object whole instead.
COMPONENT_LIMIT = 1000


class _ObjectAppender:
  """A text file in a bucket opened for appending. Objects cannot grow, but Cloud Storage can
  compose objects into a new one: a flush uploads only its new text, as the sibling object
  `NAME.part`, composes [object, part] into the object, and deletes the part. A flush sends the
  new bytes; one in COMPONENT_LIMIT rewrites the object whole to reset its component count.

  A process killed between the upload and the compose leaves the object without that text (as
  any unflushed text is lost) and a stale part, which the next flush to the path overwrites and
  deletes. A compose names the generation of the part its flush uploaded and of the object this
  appender last wrote, so no part is added twice and no other writer's change is composed over;
  each compose or upload replaces the object at once, so readers see only whole flushes.
  """

  def __init__(self, path):
    self._path = os.fspath(path)
    self._object = _blob(path)
    try:
      self._object.reload()
    except _refused():  # not there yet: generation and size are None
      pass
    self._components = self._object.component_count or 1
    self._text = ""

  def write(self, text: str) -> int:
    self._text += text
    return len(text)

  def flush(self) -> None:
    if not self._text:
      return
    data, size = self._text.encode("utf-8"), self._object.size or 0
    # A new Blob: compose sends the destination's properties, and the old object's checksums
    # would not be the composite's.
    target = _blob(self._path)
    target.content_type = "text/plain"
    try:
      if self._object.generation is None:
        components = 1
        target.upload_from_string(data, "text/plain", if_generation_match=0)
      elif self._components >= COMPONENT_LIMIT:
        components = 1
        whole = self._object.download_as_bytes(if_generation_match=self._object.generation)
        target.upload_from_string(
            whole + data, "text/plain", if_generation_match=self._object.generation
        )
      else:
        components = self._components + 1
        part = _blob(f"{self._path}.part")
        part.upload_from_string(data, "text/plain", retry=_retry())  # repeatable
        target.compose([self._object, part], if_generation_match=self._object.generation)
        with contextlib.suppress(*_refused()):
          part.delete(if_generation_match=part.generation)
    except _refused()[0]:  # a retried request whose first try landed, or another writer
      target = self._landed(size, data)
    self._object, self._components = target, target.component_count or components
    self._text = ""
    _forget_listings(self._path)

  def _landed(self, size: int, data: bytes):
    """The object, if it is this appender's last one followed by `data`; else a StorageError."""
    now = _blob(self._path)
    with contextlib.suppress(*_refused()):
      now.reload()
      if (
          now.size == size + len(data)
          and now.download_as_bytes(start=size, if_generation_match=now.generation) == data
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


def appender(path):
  """A text file object that appends to `path` (created if missing); `flush` makes the text
  visible to other processes."""
  if is_remote(path):
    return _ObjectAppender(path)
  return builtins.open(path, "a", encoding="utf-8")


# ---- Folders ------------------------------------------------------------------------------------


def makedirs(path) -> None:
  """Creates folder `path` and its parents (nothing on a bucket, where folders are implicit)."""
  if is_remote(path):
    _epath(path)  # the client check
    return
  os.makedirs(path, exist_ok=True)


def remove(path) -> None:
  if is_remote(path):
    _epath(path).unlink()
  else:
    os.remove(path)


def rmtree(path, ignore_errors: bool = False) -> None:
  if not is_remote(path):
    shutil.rmtree(path, ignore_errors=ignore_errors)
    return
  try:
    _epath(path).rmtree()
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
  if source.is_dir():
    for child in source.iterdir():
      move(os.fspath(child), os.fspath(target / child.name))
    if source.exists():  # a folder placeholder object, where a client wrote one
      source.rmtree()
    return
  source.copy(target)
  source.unlink()


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


def _retry():
  """Retries of a request that may be repeated as it is (Google's client retries only requests
  with a generation precondition unless told)."""
  from google.cloud.storage import retry  # pylint: disable=g-import-not-at-top

  return retry.DEFAULT_RETRY


def _refused():
  """The errors of a write whose precondition failed, or of an object that is gone."""
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

  return exceptions.PreconditionFailed, exceptions.NotFound


def create_object(path, text: str) -> int | None:
  """Writes object `path` only if it does not exist; its generation, or None if it exists. A
  bucket this account may not write to is a StorageError."""
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

  blob = _blob(path)
  try:
    blob.upload_from_string(text, if_generation_match=0)
  except _refused():
    return None
  except exceptions.Forbidden as e:
    raise errors.StorageError(
        f"cannot write {path}: this account may not write to {bucket(path)} ({e.message}); "
        "grant it write access to the bucket (e.g. roles/storage.objectUser) or use another one."
    ) from e
  return blob.generation


def replace_object(path, text: str, generation: int) -> int | None:
  """Rewrites object `path` only if it is still at `generation`; the new generation, or None
  if it changed or is gone."""
  blob = _blob(path)
  try:
    blob.upload_from_string(text, if_generation_match=generation)
  except _refused():
    return None
  return blob.generation


def delete_object(path, generation: int) -> bool:
  """Deletes object `path` only if it is still at `generation`; whether it did."""
  try:
    _blob(path).delete(if_generation_match=generation)
  except _refused():
    return False
  return True


def read_object(path):
  """(text, generation, time of its last write as an aware datetime) of object `path`, or None
  if there is none."""
  blob = _blob(path)
  try:
    blob.reload()
    return blob.download_as_text(if_generation_match=blob.generation), blob.generation, blob.updated
  except _refused():  # absent, or deleted or rewritten between the two requests
    return None
