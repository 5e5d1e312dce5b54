"""Objects in a bucket, where a file system's ways do not carry over: appends that send only the
new data (Cloud Storage's compose), and writes that land only over the version the caller holds
(generation preconditions: the workdir lock of vit_jax/workdir.py is built on them).

Every call rides out an outage of the bucket (vit_jax/storage/outages.py); each is safe to repeat
when a request's answer is lost. Loaded at the first gs:// path, as vit_jax/storage/gcs.py is.
"""

import contextlib
import os
import threading

from vit_jax import errors
from vit_jax.storage import gcs
from vit_jax.storage import outages

# Composing [object, part] adds a component per flush; Cloud Storage refuses a composite of more
# than 1024, so the flush that would pass this count rewrites the object whole instead.
COMPONENT_LIMIT = 1000


class ObjectAppender:
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

  A flush rides out an outage (`outages.ride_out`): the data waits in memory, in order, and is
  sent once the bucket answers; a retried flush whose first try landed finds it there (`_landed`)
  and does not add it again. `write` may be called while another thread flushes.
  """

  def __init__(self, path, binary: bool = False):
    self._path = os.fspath(path)
    self._binary = binary
    self._object = gcs.blob(path)

    def reload():
      try:
        self._object.reload(retry=outages.client_retry())
      except gcs.refused():  # not there yet: generation and size are None
        pass

    outages.ride_out(reload, self._path, f"reading {self._path}")
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
      outages.ride_out(lambda: self._send(data), self._path, f"writing {self._path}")
      with self._pending_lock:
        self._pending = self._pending[len(data) :]
      gcs.forget_listings(self._path)

  def _send(self, data: bytes) -> None:
    size = self._object.size or 0
    content_type = "application/octet-stream" if self._binary else "text/plain"
    # A new Blob: compose sends the destination's properties, and the old object's checksums
    # would not be the composite's.
    target = gcs.blob(self._path)
    target.content_type = content_type
    retry = outages.client_retry()
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
        part = gcs.blob(f"{self._path}.part")
        part.upload_from_string(data, content_type, retry=retry)  # repeatable
        target.compose(
            [self._object, part], if_generation_match=self._object.generation, retry=retry
        )
        with contextlib.suppress(*gcs.refused()):
          part.delete(if_generation_match=part.generation, retry=retry)
    except gcs.refused()[0]:  # a retried request whose first try landed, or another writer
      target = self._landed(size, data)
    self._object, self._components = target, target.component_count or components

  def _landed(self, size: int, data: bytes):
    """The object, if it is this appender's last one followed by `data`; else a StorageError."""
    now = gcs.blob(self._path)
    with contextlib.suppress(*gcs.refused()):
      now.reload(retry=outages.client_retry())
      if now.size == size + len(data) and (
          now.download_as_bytes(
              start=size, if_generation_match=now.generation, retry=outages.client_retry()
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


# ---- Objects written only over the version the caller holds --------------------------------------


def create_object(path, text: str) -> int | None:
  """Writes object `path` only if it does not exist; its generation, or None if it exists (also
  when a retried request's first try had created it: compare the text). A bucket this account
  may not write to is a StorageError."""
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

  blob = gcs.blob(path)

  def create():
    try:
      blob.upload_from_string(text, if_generation_match=0, retry=outages.client_retry())
    except gcs.refused():
      return None
    return blob.generation

  try:
    return outages.ride_out(create, path, f"writing {path}")
  except exceptions.Forbidden as e:
    raise errors.StorageError(
        f"cannot write {path}: this account may not write to {outages.bucket(path)} ({e.message}); "
        "grant it write access to the bucket (e.g. roles/storage.objectUser) or use another one."
    ) from e


def replace_object(path, text: str, generation: int, wait: bool = True) -> int | None:
  """Rewrites object `path` only if it is still at `generation`; the new generation, or None
  if it changed or is gone (also when a retried request's first try had rewritten it). `wait`:
  ride out an outage, else try once."""
  blob = gcs.blob(path)

  def replace():
    try:
      blob.upload_from_string(text, if_generation_match=generation, retry=outages.client_retry())
    except gcs.refused():
      return None
    return blob.generation

  return outages.patiently(replace, path, f"writing {path}", wait)


def delete_object(path, generation: int) -> bool:
  """Deletes object `path` only if it is still at `generation`; whether it did."""

  def delete():
    try:
      gcs.blob(path).delete(if_generation_match=generation, retry=outages.client_retry())
    except gcs.refused():
      return False
    return True

  return outages.ride_out(delete, path, f"deleting {path}")


def read_object(path, wait: bool = True):
  """(text, generation, time of its last write as an aware datetime) of object `path`, or None
  if there is none. `wait`: ride out an outage, else try once."""
  blob = gcs.blob(path)

  def read():
    try:
      blob.reload(retry=outages.client_retry())
      text = blob.download_as_text(
          if_generation_match=blob.generation, retry=outages.client_retry()
      )
      return text, blob.generation, blob.updated
    except gcs.refused():  # absent, or deleted or rewritten between the two requests
      return None

  return outages.patiently(read, path, f"reading {path}", wait)
