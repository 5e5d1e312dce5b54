"""The token store: a text dataset tokenized once, then read by index (format, reading, checks).

`python -m vit_jax.prepare --config=... --output=DIR` writes one (data/text/store_writer.py);
`--config.token_store=DIR` trains on it. DIR, on a local disk or in a bucket (gs://), holds:

    DIR/plan.json                   what is being prepared: the dataset and its data_dir, its
                                    kind, the tokenizer's settings and fingerprint, each split's
                                    shard count (first)
    DIR/tokenizer/                  the tokenizer the tokens are ids of (vit_jax/data/tokenizers)
    DIR/files.json                  a files: dataset's files and each one's document count, which
                                    its shards start reading from (vit_jax/data/text/files.py),
                                    and each one's size, which a rerun of prepare compares
    DIR/SPLIT/NNNNN.FIELD.tokens    shard NNNNN's examples' FIELD tokens, one after another:
                                    uint16 where the vocabulary fits, else uint32, little-endian
    DIR/SPLIT/NNNNN.FIELD.offsets   int64, one more than the shard's examples: example i's tokens
                                    are [offsets[i], offsets[i + 1])
    DIR/SPLIT/NNNNN.labels          int32, one per example (labeled datasets only)
    DIR/SPLIT/NNNNN.json            the shard's counts, written after its arrays: the shard is done
    DIR/store.json                  the manifest: the plan and every shard's counts (last)

The fields of an example follow the dataset's kind: documents ("text",), pairs ("source",
"target"), labeled ("text0", ...) and a label. Documents are stored as the tokenizer encodes
them, without special tokens; readers add their own (EOS between documents, [CLS] and [SEP]).

Training reads only a store whose store.json exists, so an interrupted preparation is never
read; `open_store` also checks that every shard's files are there at their stated sizes, and
that the offsets it loads are consistent, and refuses anything else in one line.

Why flat arrays (nanoGPT's train.bin, levanter's token cache) rather than ArrayRecord records:
a causal-LM window is one contiguous slice of the token array, read in one request without
parsing records; a local store is a memory map; a store in a bucket is read by byte ranges,
fetched concurrently for a whole batch, through the same storage layer as every other file (the
open-source ArrayRecord reader opens local files only: google/array_record issue 120).
"""

import dataclasses
import json
import threading
from typing import Sequence

import numpy as np

from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib

FORMAT = "vit_jax token store"
VERSION = 1
MANIFEST_FILE = "store.json"
PLAN_FILE = "plan.json"
FILES_FILE = "files.json"
FIELDS = {"documents": ("text",), "pairs": ("source", "target")}
OFFSET_DTYPE = np.dtype("<i8")
LABEL_DTYPE = np.dtype("<i4")


def tokenizer_dir(store: str) -> str:
  """Where a store keeps its tokenizer: where a workdir keeps its own."""
  return workdir_lib.tokenizer_dir(store)


def fields_of(kind: str, texts_per_example: int = 1) -> tuple[str, ...]:
  """The token fields of an example of `kind` (labeled: one per text)."""
  if kind == "labeled":
    return tuple(f"text{i}" for i in range(texts_per_example))
  return FIELDS[kind]


def token_dtype(vocab_size: int) -> np.dtype:
  return np.dtype("<u2") if vocab_size <= 2**16 else np.dtype("<u4")


def shard_name(index: int) -> str:
  return f"{index:05d}"


def tokens_file(shard: str, field: str) -> str:
  return f"{shard}.{field}.tokens"


def offsets_file(shard: str, field: str) -> str:
  return f"{shard}.{field}.offsets"


def labels_file(shard: str) -> str:
  return f"{shard}.labels"


def done_file(shard: str) -> str:
  return f"{shard}.json"


def tokenizer_settings(config) -> dict:
  """What decides a run's tokenizer: the keys of its config's `tokenizer` block a store records
  and a run on it must repeat."""
  tc = config.tokenizer
  return {
      "kind": tc.kind,
      "vocab_size": tc.vocab_size,
      "path": tc.path,
      "max_train_texts": tc.max_train_texts,
  }


# ---- Arrays read by range ---------------------------------------------------------------------


class Array:
  """A flat array of `length` elements read by element ranges: in memory, a memory map of a local
  file, or byte-range reads of an object in a bucket (downloaded once where it is asked for
  whole)."""

  def __init__(
      self, dtype, length: int, *, path: str | None = None, data: np.ndarray | None = None
  ):
    self.dtype, self.length, self.path = np.dtype(dtype), length, path
    self._data = data
    self._lock = threading.Lock()

  @property
  def remote(self) -> bool:
    return self._data is None and storage.is_remote(self.path)

  @staticmethod
  def download(arrays: Sequence["Array"]) -> None:
    """Reads every array of `arrays` in a bucket whole, all at once (concurrent requests)."""
    missing = [a for a in arrays if a.remote]
    if missing:
      wanted = [(a.path, 0, a.length * a.dtype.itemsize) for a in missing]
      for array, data in zip(missing, storage.read_ranges(wanted)):
        with array._lock:  # pylint: disable=protected-access
          array._data = np.frombuffer(data, array.dtype)  # pylint: disable=protected-access

  def whole(self) -> np.ndarray:
    """The whole array (a memory map for a local file; downloaded once from a bucket)."""
    with self._lock:
      if self._data is None:
        if not self.length:  # a shard of empty texts: a file of 0 bytes cannot be mapped
          self._data = np.zeros(0, self.dtype)
        elif storage.is_remote(self.path):
          self._data = np.frombuffer(storage.read_bytes(self.path), self.dtype)
        else:
          self._data = np.memmap(self.path, self.dtype, mode="r")
      return self._data


def read_ranges(requests: Sequence[tuple[Array, int, int]]) -> list[np.ndarray]:
  """Elements [start, stop) of each (array, start, stop), in order; the ranges of arrays in a
  bucket are fetched in one concurrent call."""
  out = [None] * len(requests)
  remote = []
  for i, (array, start, stop) in enumerate(requests):
    if array.remote:
      remote.append(i)
    else:
      out[i] = np.asarray(array.whole()[start:stop])
  if remote:
    fetched = storage.read_ranges(
        (
            requests[i][0].path,
            requests[i][1] * requests[i][0].dtype.itemsize,
            requests[i][2] * requests[i][0].dtype.itemsize,
        )
        for i in remote
    )
    for i, data in zip(remote, fetched):
      out[i] = np.frombuffer(data, requests[i][0].dtype)
  return out


# ---- A split: its shards' examples in order ---------------------------------------------------


@dataclasses.dataclass
class Shard:
  examples: int
  tokens: dict  # field -> Array of its tokens
  offsets: dict  # field -> Array of examples + 1 offsets
  labels: Array | None = None
  name: str = "memory"


class Split:
  """One split of a dataset as token fields of examples, read by example index: the shards'
  examples one after another. Example e is example e - starts[k] of shard k."""

  def __init__(self, fields: Sequence[str], shards: Sequence[Shard], where: str = "memory"):
    self.fields, self.shards, self.where = tuple(fields), list(shards), where
    counts = [s.examples for s in self.shards]
    self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    self.num_examples = int(self.starts[-1])
    self._offsets = {}
    self._lock = threading.Lock()

  def offsets(self, shard: int, field: str) -> np.ndarray:
    """Shard `shard`'s offsets of `field` (loaded once, checked for consistency)."""
    key = (shard, field)
    with self._lock:
      cached = self._offsets.get(key)
    if cached is not None:
      return cached
    s = self.shards[shard]
    offsets = s.offsets[field].whole()
    if (
        len(offsets) != s.examples + 1
        or offsets[0] != 0
        or offsets[-1] != s.tokens[field].length
        or np.any(offsets[1:] < offsets[:-1])
    ):
      raise errors.DataError(
          f"{self.where} is damaged: {offsets_file(s.name, field)} is inconsistent with "
          f"{tokens_file(s.name, field)}; prepare it again into a new --output."
      )
    with self._lock:
      self._offsets[key] = offsets
    return offsets

  def locate(self, example_N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(shard, index within it) of each global example index."""
    example_N = np.asarray(example_N, np.int64)
    shard_N = np.searchsorted(self.starts, example_N, side="right") - 1
    return shard_N, example_N - self.starts[shard_N]

  def lengths(self, field: str) -> np.ndarray:
    """Every example's token count of `field` (int64, num_examples): loads every shard's
    offsets (a bucket's in one concurrent call)."""
    Array.download([s.offsets[field] for s in self.shards])
    return np.concatenate(
        [np.diff(self.offsets(k, field)) for k in range(len(self.shards))] or [np.zeros(0, int)]
    ).astype(np.int64)

  def bounds(self, field: str, example_N) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shard, first token, end token) of each global example's `field` within its shard."""
    shard_N, local_N = self.locate(example_N)
    begin_N, end_N = np.empty_like(local_N), np.empty_like(local_N)
    for shard in np.unique(shard_N):
      at = shard_N == shard
      offsets = self.offsets(int(shard), field)
      begin_N[at], end_N[at] = offsets[local_N[at]], offsets[local_N[at] + 1]
    return shard_N, begin_N, end_N

  def spans(self, field: str, example_N, start_N, stop_N) -> list[np.ndarray]:
    """Tokens [start, stop) of `field` of each global example (clipped to its length), read
    together."""
    shard_N, begin_N, end_N = self.bounds(field, example_N)
    first_N = np.minimum(begin_N + np.asarray(start_N, np.int64), end_N)
    last_N = np.minimum(begin_N + np.asarray(stop_N, np.int64), end_N)
    return read_ranges(
        [
            (self.shards[k].tokens[field], int(a), int(b))
            for k, a, b in zip(shard_N, first_N, last_N)
        ]
    )

  def examples(self, field: str, example_N) -> list[np.ndarray]:
    """The whole `field` token sequence of each global example."""
    example_N = np.asarray(example_N, np.int64)
    return self.spans(field, example_N, np.zeros_like(example_N), np.full_like(example_N, 2**62))

  def labels(self, example_N) -> np.ndarray:
    shard_N, local_N = self.locate(example_N)
    reads = [(self.shards[s].labels, int(i), int(i) + 1) for s, i in zip(shard_N, local_N)]
    return np.array([label[0] for label in read_ranges(reads)], np.int32)


def in_memory(fields: Sequence[str], examples: Sequence[Sequence[np.ndarray]], labels=None):
  """A Split of one in-memory shard: `examples[i][f]` the token ids of field f of example i."""
  tokens, offsets = {}, {}
  for f, field in enumerate(fields):
    parts = [np.asarray(example[f], np.int32) for example in examples]
    lengths = np.array([len(p) for p in parts], np.int64)
    offsets_N = np.concatenate([[0], np.cumsum(lengths)])
    tokens_T = np.concatenate(parts or [np.zeros(0, np.int32)])
    offsets[field] = Array(OFFSET_DTYPE, len(offsets_N), data=offsets_N)
    tokens[field] = Array(np.int32, len(tokens_T), data=tokens_T)
  label_array = None
  if labels is not None:
    label_array = Array(LABEL_DTYPE, len(labels), data=np.asarray(labels, np.int32))
  return Split(fields, [Shard(len(examples), tokens, offsets, label_array)])


# ---- A store on disk or in a bucket -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Store:
  path: str
  manifest: dict

  @property
  def dataset(self) -> str:
    return self.manifest["dataset"]

  @property
  def kind(self) -> str:
    return self.manifest["kind"]

  @property
  def fields(self) -> tuple[str, ...]:
    return tuple(self.manifest["fields"])

  @property
  def tokenizer_settings(self) -> dict:
    """The config's tokenizer settings it was made with (`tokenizer_settings`)."""
    return self.manifest["tokenizer_settings"]

  @property
  def tokenizer_fingerprint(self) -> str:
    return self.manifest["tokenizer_fingerprint"]

  @property
  def splits(self) -> tuple[str, ...]:
    return tuple(self.manifest["splits"])

  def tokenizer_dir(self) -> str:
    return tokenizer_dir(self.path)

  def split(self, name: str) -> Split:
    """Split `name`, read from the store's files (nothing is read until a batch asks)."""
    if name not in self.manifest["splits"]:
      raise errors.DataError(
          f"the token store {self.path} has the splits {', '.join(self.splits)}, not {name!r}; "
          "prepare that split too (python -m vit_jax.prepare ... --splits=...)."
      )
    folder = storage.join(self.path, name)
    dtype = np.dtype(self.manifest["dtype"])
    shards = []
    for entry in self.manifest["splits"][name]["shards"]:
      shard, count = entry["name"], entry["examples"]
      at = lambda file: storage.join(folder, file)  # pylint: disable=cell-var-from-loop
      shards.append(
          Shard(
              count,
              {
                  f: Array(dtype, entry["tokens"][f], path=at(tokens_file(shard, f)))
                  for f in self.fields
              },
              {
                  f: Array(OFFSET_DTYPE, count + 1, path=at(offsets_file(shard, f)))
                  for f in self.fields
              },
              Array(LABEL_DTYPE, count, path=at(labels_file(shard)))
              if self.manifest["labels"]
              else None,
              name=f"{name}/{shard}",
          )
      )
    return Split(self.fields, shards, where=f"token store {self.path}")


def expected_sizes(manifest: dict, split: str) -> dict[str, int]:
  """{file name: size in bytes} of every file of `split` a finished store holds."""
  itemsize = np.dtype(manifest["dtype"]).itemsize
  sizes = {}
  for entry in manifest["splits"][split]["shards"]:
    shard = entry["name"]
    for field in manifest["fields"]:
      sizes[tokens_file(shard, field)] = entry["tokens"][field] * itemsize
      sizes[offsets_file(shard, field)] = (entry["examples"] + 1) * OFFSET_DTYPE.itemsize
    if manifest["labels"]:
      sizes[labels_file(shard)] = entry["examples"] * LABEL_DTYPE.itemsize
  return sizes


# What a manifest holds that reading the store needs, and its JSON type.
_MANIFEST_KEYS = {
    "dataset": str,
    "kind": str,
    "fields": list,
    "dtype": str,
    "labels": bool,
    "splits": dict,
    "tokenizer_settings": dict,
    "tokenizer_fingerprint": str,
}


def _check_manifest(manifest: dict) -> None:
  """A ValueError saying what `manifest` lacks that reading the store needs: a damaged store.json
  may still be JSON (a changed letter of a key, a number for a name)."""
  try:
    for key, kind in _MANIFEST_KEYS.items():
      if not isinstance(manifest[key], kind):
        raise ValueError(f"its {key!r} is not a {kind.__name__}")
    np.dtype(manifest["dtype"])
    for split, value in manifest["splits"].items():
      for entry in value["shards"]:
        counts = (entry["examples"], *(entry["tokens"][f] for f in manifest["fields"]))
        if not isinstance(entry["name"], str) or not all(type(n) is int for n in counts):
          raise ValueError(f"a shard of split {split!r} has no name or counts")
  except (KeyError, TypeError, AttributeError) as e:
    raise ValueError(f"{type(e).__name__}: {e}") from None


def open_store(path: str, splits: Sequence[str] = ()) -> Store:
  """The finished store at `path`, with the files of `splits` checked (present, at the sizes the
  manifest states); a DataError naming what is wrong otherwise."""
  storage.check(path)
  manifest_path = storage.join(path, MANIFEST_FILE)
  if not storage.exists(manifest_path):
    if storage.exists(storage.join(path, PLAN_FILE)):
      raise errors.DataError(
          f"the token store {path} is not finished ({MANIFEST_FILE} is missing: its preparation "
          "was interrupted or is still running); rerun the same python -m vit_jax.prepare "
          "command to finish it."
      )
    raise errors.DataError(
        f"--config.token_store={path} is not a token store (no {MANIFEST_FILE}); make one with "
        "python -m vit_jax.prepare --config=... --output=DIR."
    )
  try:
    manifest = json.loads(storage.read_text(manifest_path))
    if not isinstance(manifest, dict) or (manifest.get("format"), manifest.get("version")) != (
        FORMAT,
        VERSION,
    ):
      raise ValueError("not this format or version")
    _check_manifest(manifest)
  except (ValueError, UnicodeDecodeError) as e:
    raise errors.DataError(
        f"{manifest_path} is damaged or of another format ({e}); prepare the store again into a "
        "new --output."
    ) from None
  store = Store(path, manifest)
  for split in splits:
    store.split(split)  # a DataError naming the splits it has
    folder = storage.join(path, split)
    have = storage.file_sizes(folder) if storage.isdir(folder) else {}
    for name, size in expected_sizes(manifest, split).items():
      if have.get(name) != size:
        state = "missing" if name not in have else f"{have[name]} bytes, not {size}"
        raise errors.DataError(
            f"the token store {path} is damaged: {split}/{name} is {state}; prepare it again "
            "into a new --output (or restore the file)."
        )
  return store
