"""JSON Lines files, plain or compressed, streamed line by line: one record per non-blank line.

    for number, line in jsonl.lines("gs://b/web/part-0001.jsonl.zst"):
      record = jsonl.parse(line)      # a ValueError naming what is wrong with a bad line

`.jsonl` is read as it is, `.jsonl.gz` through gzip and `.jsonl.zst` through zstandard (the data
extra), both decompressed as the lines are read: a file is never held whole, compressed or not.
Every read goes through vit_jax/storage (a local path or gs://). A compressed stream that is
damaged part way raises DamagedError after the lines before the damage.
"""

import contextlib
import gzip
import io
import json
from typing import Iterator
import zlib

from vit_jax import data
from vit_jax import errors
from vit_jax import storage

EXTENSIONS = (".jsonl", ".jsonl.gz", ".jsonl.zst")
_READ_BYTES = 1 << 20  # read and decompressed at a time


class DamagedError(Exception):
  """The file's compressed stream cannot be decoded past line `after`."""

  def __init__(self, path: str, after: int, reason: str):
    super().__init__(f"{path}: its compressed stream is damaged after line {after} ({reason})")
    self.path, self.after, self.reason = path, after, reason


@contextlib.contextmanager
def open_lines(path: str):
  """(the decompressed bytes of `path` as a binary stream of lines, the exceptions a damaged
  compressed stream raises)."""
  with storage.open(path, "rb") as raw:
    if path.endswith(".gz"):
      with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
        yield stream, (OSError, EOFError, zlib.error)
    elif path.endswith(".zst"):
      zstandard = data.import_extra("zstandard", f"{path} (zstd-compressed JSON Lines)")
      reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
      with io.BufferedReader(reader, _READ_BYTES) as stream:
        yield stream, (zstandard.ZstdError,)
    else:
      yield raw, ()


def lines(path: str) -> Iterator[tuple[int, bytes]]:
  """(line number from 1, the line) of each non-blank line of `path`, in order; DamagedError
  where a compressed stream cannot be decoded further."""
  number = 0
  with open_lines(path) as (stream, damaged):
    iterator = iter(stream)
    while True:
      try:
        line = next(iterator)
      except StopIteration:
        return
      except damaged as e:
        if errors.transient_cause(e):  # the storage did not answer: not a damaged file
          raise
        raise DamagedError(path, number, f"{type(e).__name__}: {e}") from None
      number += 1
      if line.strip():
        yield number, line


def parse(line: bytes):
  """The JSON value of one line; a ValueError with a short reason for a line that is not JSON."""
  try:
    return json.loads(line)
  except UnicodeDecodeError as e:
    raise ValueError(
        f"not UTF-8 (byte 0x{e.object[e.start]:02x} at column {e.start + 1})"
    ) from None
  except json.JSONDecodeError as e:
    raise ValueError(f"not JSON ({e.msg}, column {e.colno})") from None
