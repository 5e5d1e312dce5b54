"""JSON Lines files, plain or compressed, streamed line by line: one record per non-blank line.

    for number, line in jsonl.lines("gs://b/web/part-0001.jsonl.zst", "zstd"):
      record = jsonl.parse(line)      # a ValueError naming what is wrong with a bad line

The codec is the caller's to name (vit_jax/data/text/files.py decides it by the file's
extension): None reads the file as it is, "gzip" through zlib and "zstd" through zstandard (the
data extra), both decompressed as the lines are read: a file is never held whole, compressed or
not. Every read goes through vit_jax/storage (a local path or gs://).

A compressed file is read whole or not at all: DamagedError, after the lines before the damage,
where its stream cannot be decoded, ends inside a gzip member or zstd frame (a truncated file),
holds no member or frame (an empty file), or fails a check: gzip's CRC and length of every
member, a zstd frame's content size and its checksum where it has one (the zstd tool writes one;
python-zstandard's ZstdCompressor only with write_checksum=True). A byte changed inside a zstd
frame without a checksum that still decodes gives different text, unseen.
"""

import contextlib
import io
import json
from typing import Iterator, Optional
import zlib

from vit_jax import data
from vit_jax import storage

CODECS = (None, "gzip", "zstd")
_READ_BYTES = 1 << 20  # read from the file at a time
_DECODE_BYTES = 1 << 16  # compressed bytes decoded at a time (what they decode to stays small)


class DamagedError(Exception):
  """The file's compressed stream cannot be decoded past line `after`."""

  def __init__(self, path: str, after: int, reason: str):
    super().__init__(f"{path}: its compressed stream is damaged after line {after} ({reason})")
    self.path, self.after, self.reason = path, after, reason


class _Damaged(Exception):
  """Where the compressed stream being read cannot be decoded further (the reason)."""


def _decoder(path: str, codec: str):
  """(a new decoder of one gzip member or zstd frame, the errors it raises)."""
  if codec == "gzip":
    return lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), zlib.error
  zstandard = data.import_extra("zstandard", f"{path} (zstd-compressed JSON Lines)")
  return zstandard.ZstdDecompressor().decompressobj, zstandard.ZstdError


def _decompressed(raw, path: str, codec: str) -> Iterator[bytes]:
  """The bytes of the members or frames of `raw`, one after another, decoded a part at a time;
  _Damaged where one cannot be decoded or the file ends inside one."""
  new_decoder, decode_error = _decoder(path, codec)
  unit = "gzip member" if codec == "gzip" else "zstd frame"
  decoder, members = None, 0
  for compressed in iter(lambda: raw.read(_READ_BYTES), b""):
    for at in range(0, len(compressed), _DECODE_BYTES):
      part = compressed[at : at + _DECODE_BYTES]
      while part:
        if decoder is None:
          if codec == "gzip":  # gzip allows zero bytes after a member, as padding
            part = part.lstrip(b"\0")
            if not part:
              break
          decoder, members = new_decoder(), members + 1
        try:
          decoded = decoder.decompress(part)
        except decode_error as e:
          raise _Damaged(str(e)) from None
        yield decoded
        part = b""
        if decoder.eof:  # the member or frame is whole (and checked): the rest begins another
          part, decoder = decoder.unused_data, None
  if decoder is not None:
    raise _Damaged(f"the file ends inside a {unit}")
  if not members:
    raise _Damaged(f"the file holds no {unit}")


class _Stream(io.RawIOBase):
  """Chunks of bytes as a raw binary stream, to be read through io.BufferedReader."""

  def __init__(self, chunks: Iterator[bytes]):
    super().__init__()
    self._chunks, self._chunk, self._at = chunks, memoryview(b""), 0

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    while self._at == len(self._chunk):
      chunk = next(self._chunks, None)
      if chunk is None:
        return 0
      self._chunk, self._at = memoryview(chunk), 0
    size = min(len(buffer), len(self._chunk) - self._at)
    buffer[:size] = self._chunk[self._at : self._at + size]
    self._at += size
    return size


@contextlib.contextmanager
def open_lines(path: str, codec: Optional[str]):
  """The decompressed bytes of `path` (compressed by `codec`, one of CODECS) as a binary stream
  of lines; reading it raises _Damaged where a compressed stream is damaged."""
  if codec not in CODECS:
    raise ValueError(f"{path}: codec {codec!r} is not one of {CODECS}")
  with storage.open(path, "rb") as raw:
    if codec is None:
      yield raw
      return
    chunks = _decompressed(raw, path, codec)
    with contextlib.closing(chunks), io.BufferedReader(_Stream(chunks), _READ_BYTES) as stream:
      yield stream


def lines(path: str, codec: Optional[str]) -> Iterator[tuple[int, bytes]]:
  """(line number from 1, the line) of each non-blank line of `path` (compressed by `codec`), in
  order; DamagedError where a compressed stream is damaged, after the lines before it."""
  number = 0
  with open_lines(path, codec) as stream:
    iterator = iter(stream)
    while True:
      try:
        line = next(iterator)
      except StopIteration:
        return
      except _Damaged as e:
        raise DamagedError(path, number, str(e)) from None
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
