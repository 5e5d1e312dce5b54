"""The index a reader makes of its data once (a `folder:` dataset's files, webdataset shards'
samples): written beside the data, or where that is read-only in ~/.cache/vit_jax/KIND/, keyed
by the data's path; read back from either place.

Its first line is the SHA-256 of the JSON after it: an index whose bytes changed since it was
written (a bad disk, a copy cut short) is no index, and the reader makes it again, as it does one
written before indexes had the line."""

import hashlib
import json
import os

from vit_jax import errors
from vit_jax import storage


def paths(folder: str, name: str, kind: str) -> tuple[str, str]:
  """(beside the data, in the cache) for the index `name` of the data under `folder`."""
  key = hashlib.sha256(storage.absolute(folder).encode()).hexdigest()[:16]
  return storage.join(folder, name), os.path.join(storage.user_cache(kind), f"{key}.json")


def read(folder: str, name: str, kind: str, fits) -> tuple[str | None, dict | None]:
  """(path, index) of the first readable index for which `fits(index)`, else (None, None)."""
  for path in paths(folder, name, kind):
    try:
      index = json.loads(storage.without_digest(storage.read_text(path)))
    except errors.StorageUnavailableError:
      raise
    except (OSError, ValueError):  # none yet, or half written by a process that was killed
      continue
    if fits(index):
      return path, index
  return None, None


def write(folder: str, name: str, kind: str, index: dict) -> str:
  """Writes `index` beside the data, or in the cache where the data is read-only; its path."""
  text = storage.with_digest(json.dumps(index, separators=(",", ":")))
  beside, cached = paths(folder, name, kind)
  try:
    storage.replace_text(beside, text)
    return beside
  except errors.StorageUnavailableError:
    raise
  except OSError:  # read-only data
    os.makedirs(os.path.dirname(cached), exist_ok=True)
    storage.replace_text(cached, text)
    return cached
