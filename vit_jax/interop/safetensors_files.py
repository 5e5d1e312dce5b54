"""A Hugging Face directory's safetensors, read and written one tensor at a time.

Reading: `model.safetensors`, or the shards `model.safetensors.index.json` names, opened once;
each tensor is read when it is asked for (`pread`, not a memory map, whose pages would stay
resident until the file is closed) and its names, shapes and dtypes come from the headers
without reading any data. A converter that takes each tensor, converts it and lets it go holds
the converted weights and one source tensor, never two copies of the model. bfloat16 comes back
as ml_dtypes' bfloat16 (numpy has none).

Writing: the same format from {name: a function making the tensor}, computed once to size the
header and again to write it, so the written file never sits in memory beside the params.
"""

from collections.abc import Mapping
import contextlib
import json
import struct

import ml_dtypes
import numpy as np
import safetensors
from safetensors import safe_open

from vit_jax import errors
from vit_jax import storage

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
# safetensors' dtype names <-> numpy's (bfloat16 from ml_dtypes, which JAX ships).
_DTYPES = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
# numpy does not count ml_dtypes' bfloat16 among its floating types.
FLOATS = frozenset(_DTYPES[name] for name in ("F64", "F32", "F16", "BF16"))
_READ_ERRORS = (safetensors.SafetensorError, OSError, ValueError)


def _damaged(path: str, e: Exception) -> errors.ConversionError:
  return errors.ConversionError(
      f"Cannot read {path} as safetensors ({e}); the file is damaged: re-save or re-download it."
  )


def weight_files(path: str) -> list:
  """The safetensors files of a directory: model.safetensors, or the shards of its index."""
  if storage.isfile(storage.join(path, WEIGHTS)):
    return [WEIGHTS]
  index = storage.join(path, INDEX)
  if not storage.isfile(index):
    found = sorted(n for n in storage.listdir(path) if not n.startswith("."))
    raise errors.ConversionError(
        f"{path} has no {WEIGHTS} (or {INDEX}); found {found}. Only safetensors are read, never "
        "pickled .bin files: re-save the model with save_pretrained(dir) (safetensors by default)."
    )
  try:
    weight_map = json.loads(storage.read_text(index))["weight_map"]
  except (ValueError, KeyError, TypeError) as e:
    raise errors.ConversionError(
        f"{index} is not a safetensors index (a JSON object with a weight_map): {e!r}; "
        "re-save or re-download it."
    ) from e
  files = sorted(set(weight_map.values()))
  missing = [f for f in files if not storage.isfile(storage.join(path, f))]
  if missing:
    raise errors.ConversionError(
        f"{path} lacks the shard(s) {missing} that {INDEX} names; download every shard."
    )
  return files


class Tensors(Mapping):
  """{name: np.ndarray} over a directory's safetensors files, each tensor read when asked for.

  A context manager: the files stay open (and a bucket's are downloaded) until it exits.
  """

  def __init__(self, path: str):
    self.path = path
    self._stack = contextlib.ExitStack()
    self._files = {}  # tensor name -> open safe_open handle
    self._where = {}  # tensor name -> its file's path, for messages
    try:
      for name in weight_files(path):
        where = storage.join(path, name)
        local = self._stack.enter_context(storage.local_copy(where))
        try:
          handle = self._stack.enter_context(safe_open(local, framework="np", backend="pread"))
          keys = list(handle.keys())
        except _READ_ERRORS as e:  # a truncated or corrupted header
          raise _damaged(where, e) from e
        for key in keys:
          self._files[key], self._where[key] = handle, where
    except BaseException:
      self._stack.close()
      raise

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self._stack.close()

  def __getitem__(self, name: str) -> np.ndarray:
    handle = self._files[name]
    try:
      return handle.get_tensor(name)
    except _READ_ERRORS as e:
      raise _damaged(self._where[name], e) from e

  def __iter__(self):
    return iter(self._files)

  def __len__(self) -> int:
    return len(self._files)

  def dtype(self, name: str) -> np.dtype:
    """The tensor's dtype, from its file's header."""
    saved = self._files[name].get_slice(name).get_dtype()
    if saved not in _DTYPES:
      raise errors.ConversionError(f"{self._where[name]}: {name} has dtype {saved}, not read here.")
    return _DTYPES[saved]

  def shape(self, name: str) -> tuple:
    """The tensor's shape, from its file's header."""
    return tuple(self._files[name].get_slice(name).get_shape())


def shape_of(tensors: Mapping, name: str) -> tuple:
  """A tensor's shape (a `Tensors`' from its header, reading nothing)."""
  if isinstance(tensors, Tensors):
    return tensors.shape(name)
  return tuple(np.shape(tensors[name]))


def dtypes(tensors: Mapping) -> set:
  """The dtypes of `tensors` (a `Tensors`: from the headers, reading nothing)."""
  if isinstance(tensors, Tensors):
    return {tensors.dtype(name) for name in tensors}
  return {np.asarray(value).dtype for value in tensors.values()}


def write(tensors: dict, path: str, metadata: dict | None = None) -> None:
  """Writes {name: function returning a tensor} as one safetensors file, a tensor at a time."""
  header, offset = {}, 0
  for name, make in tensors.items():  # first pass: shapes and sizes for the header
    value = make()
    if value.dtype not in _NAMES:
      raise errors.ConversionError(f"{name} has dtype {value.dtype}, which safetensors lacks.")
    header[name] = {
        "dtype": _NAMES[value.dtype],
        "shape": list(value.shape),
        "data_offsets": [offset, offset + value.nbytes],
    }
    offset += value.nbytes
    del value
  if metadata:
    header["__metadata__"] = metadata
  encoded = json.dumps(header, separators=(",", ":")).encode()
  encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned, as the library's
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(encoded)))
    f.write(encoded)
    for make in tensors.values():  # little-endian bytes, as every host JAX runs on has them
      f.write(np.ascontiguousarray(make()).reshape(-1).view(np.uint8).data)
    if f.tell() != 8 + len(encoded) + offset:
      raise RuntimeError(f"{path}: a tensor changed shape between the two passes.")
