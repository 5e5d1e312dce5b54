"""webdataset shards of images (`wds:PATTERN`) as a dataset, read through an index made once.

A shard is a tar of samples. A sample is a run of consecutive members that share a KEY, the
member's path up to the first dot of its file name (webdataset's grouping): one image, KEY.jpg,
.jpeg, .png or .webp, and its class, KEY.cls (an integer as text) or, for a sample without one,
the field `--config.label_key` (default "label") of KEY.json. Other members (KEY.txt, ...)
are ignored. Class ids run from 0; the class count is the largest label of any shard plus one
(a --config.num_classes other than it is refused before training).

PATTERN (local or gs://) is a folder (every .tar below it), a glob (`*`, `?`, `[...]`, `**`), or
either with brace ranges as webdataset and OpenCLIP write them (`shards-{0000..1023}.tar`,
expanded by the braceexpand package of the data extra).

Splits: a shard belongs to the split named by a word of its file name, else by its folder's name:
train, validation, val or test (`imagenet1k-train-0000.tar` and `imagenet1k-validation-00.tar`, as
timm's webdataset copies of ImageNet are named; or `train/0000.tar` and `val/0000.tar`). Training
reads `train`; evaluation `test`, else `validation`, else `val` (as a folder: dataset's). A split
may be sliced as TFDS slices its own (`train[:99%]`, `train[99%:]`, `train[:10000]`): the ImageNet
recipes' held-out minival then works on shards as on TFDS.

The index: per shard, where each sample's image starts and ends in it, the sample's class, and
the images that do not decode, made by reading every shard once (each image decoded once, with
the op the pipeline decodes with), written beside the shards (INDEX_NAME in the folder that holds
them all) or, where that cannot be written, in $XDG_CACHE_HOME/vit_jax/wds_index/ (~/.cache/...).
A start reuses a shard's entry while its size (and, locally, its modification time) is
unchanged, and reads only the shards that are new or changed; `python -m vit_jax.prepare` makes
it ahead of a run. Everything a shard can get wrong is found then, before any training: not a
tar, truncated, a sample without an image or a label, a label that is not an integer (an error
each), and images that do not decode: left out with a warning naming each, or an error with
`--config.bad_images=error`.

Reading: each process reads a contiguous share of the split's samples, shards in name order (as
TFDS splits among processes), CHUNK samples' bytes at a time, one range of the shard each (through
vit_jax/storage, so a bucket's too). Training reads the share's pieces of shards in a new order
each epoch, seeded by the run's seed, the process and the epoch (`read_from`), and starts anywhere
in it at that example's bytes: the pipeline shuffles examples within blocks
(data/image/pipeline.py), so a resumed run reads one block, never the epoch before it. Images
reach the pipeline encoded; it decodes, crops and augments them with the ops of every other
source.

The index is made with Python's tarfile; training reads byte ranges it names, without parsing a
tar. The webdataset package reads shards for PyTorch (`import webdataset` imports torch) and
streams each from its start, which a resume in the middle of a shard cannot use.
"""

import concurrent.futures
import dataclasses
import functools
import json
import os
import posixpath
import re
import sys
import tarfile
import types

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from vit_jax import data
from vit_jax import errors
from vit_jax import storage
from vit_jax.data import index_file
from vit_jax.data.image import no_autograph

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")
SPLIT_WORDS = ("train", "validation", "val", "test")
EVAL_SPLITS = ("test", "validation", "val")  # the first present is the default eval split
INDEX_NAME = ".vit_jax_wds_index.json"
CHUNK = 64  # samples whose bytes are read at once (one read of a file's range)
_INDEX_FORMAT = 1
_SCAN_THREADS = 16  # shards indexed at once (reading is I/O: a bucket's latency, a cold disk)
# webdataset's key and extension: the path up to the first dot of the file name, and the rest.
_KEY_AND_EXTENSION = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")
_END_OF_ARCHIVE = tarfile.BLOCKSIZE  # tar ends with zero blocks: at least one must be there
_WARNINGS_SHOWN = 5  # undecodable images named one a line; the rest counted
_warned = set()  # the patterns whose undecodable images this process has warned about


@dataclasses.dataclass(frozen=True)
class Shards:
  """The shards a pattern names, by split, with every sample's place from their index."""

  pattern: str
  label_key: str
  paths: tuple[str, ...]  # every shard, sorted
  splits: dict[str, tuple[int, ...]]  # split -> indices into `paths`, in name order
  starts: np.ndarray  # int64 (shards + 1,): the number of each shard's first sample; the total
  # int64 (samples,) each, in shard order: where the image's bytes start in its shard, how many
  # there are, and the sample's class
  offsets: np.ndarray
  sizes: np.ndarray
  labels: np.ndarray
  num_classes: int  # the largest label of any sample, plus one
  bad: tuple[tuple[str, str], ...]  # ("MEMBER in SHARD", why) of each image that does not decode
  index_path: str

  @classmethod
  def open(cls, pattern: str, label_key: str) -> "Shards":
    paths = match(pattern)
    split_of = {p: _split_of(p) for p in paths}
    unnamed = [p for p, split in split_of.items() if split is None]
    if unnamed:
      raise errors.DataError(
          f"wds:{pattern}: {unnamed[0]} names no split"
          + (f" (nor do {len(unnamed) - 1} more)" if len(unnamed) > 1 else "")
          + f": put one of {', '.join(SPLIT_WORDS)} in each shard's file or folder name "
          "(imagenet-train-0000.tar, imagenet-validation-00.tar)."
      )
    entries, index_path = _indexed(paths, label_key)
    splits = {}
    for i, path in enumerate(paths):
      splits.setdefault(split_of[path], []).append(i)
    bad = [(path, *b) for path in paths for b in entries[path]["bad"]]
    good = {p: np.ones(len(entries[p]["labels"]), bool) for p in paths}
    for path, sample, _, _ in bad:
      good[path][sample] = False
    column = lambda name: np.concatenate(
        [np.array(entries[p][name], np.int64)[good[p]] for p in paths]
    )
    return cls(
        pattern=pattern,
        label_key=label_key,
        paths=tuple(paths),
        splits={split: tuple(ids) for split, ids in sorted(splits.items())},
        starts=np.cumsum([0] + [int(good[p].sum()) for p in paths], dtype=np.int64),
        offsets=column("offsets"),
        sizes=column("sizes"),
        labels=column("labels"),
        num_classes=1 + max(max(entries[p]["labels"]) for p in paths),
        bad=tuple((f"{member} in {path}", why) for path, _, member, why in bad),
        index_path=index_path,
    )

  def check_images(self, bad_images: str) -> None:
    """The images that do not decode: a DataError naming the first (`bad_images` "error"), or,
    once per process, a warning naming each (up to _WARNINGS_SHOWN) that they are left out."""
    # pylint: disable-next=g-import-not-at-top  (the folder source's wording)
    from vit_jax.data.image import folder

    if not self.bad:
      return
    (name, why), more = self.bad[0], len(self.bad) - 1
    if bad_images == "error":
      raise errors.DataError(
          f"{name} is not a decodable image ({why})"
          + (f", nor are {more} more" if more else "")
          + "; write its shard again without it, or set --config.bad_images=skip to leave such "
          "images out."
      )
    if self.pattern in _warned:
      return
    _warned.add(self.pattern)
    for name, why in self.bad[:_WARNINGS_SHOWN]:
      folder.warn_skipped(name, why)
    if len(self.bad) > _WARNINGS_SHOWN:
      print(
          f"warning: skipping {len(self.bad) - _WARNINGS_SHOWN} more images of wds:{self.pattern} "
          "that do not decode.",
          file=sys.stderr,
          flush=True,
      )

  @property
  def eval_split(self) -> str | None:
    return next((s for s in EVAL_SPLITS if s in self.splits), None)

  def num_examples(self, split: str) -> int:
    """Samples in `split`, a split or a slice of one as TFDS writes it (train[:99%])."""
    return sum(take for _, _, take in self._pieces(split))

  def _pieces(self, split: str) -> list:
    """(shard, samples skipped, samples taken) pieces of `split`, in order. Slices (train[:99%],
    train[10:20], train[2shard:], train[:5]+val) are TFDS's own, read by TFDS's parser."""
    counts = {
        s: [int(self.starts[i + 1] - self.starts[i]) for i in ids] for s, ids in self.splits.items()
    }
    infos = {
        s: types.SimpleNamespace(num_examples=sum(c), shard_lengths=c) for s, c in counts.items()
    }
    try:
      ranges = tfds.core.ReadInstruction.from_spec(split).to_absolute(infos)
    except (ValueError, AssertionError) as e:
      raise errors.DataError(
          f"{split!r} is not a split of wds:{self.pattern} ({str(e).splitlines()[0][:200]}); "
          f"available: {', '.join(f'{s} ({sum(c):,} samples)' for s, c in counts.items())} (the "
          "split words in the shards' names), or slices of them such as train[:99%]."
      ) from None
    pieces = []
    for r in ranges:
      whole = [(i, 0, c) for i, c in zip(self.splits[r.splitname], counts[r.splitname])]
      pieces += _cut(whole, r.from_ or 0, sum(counts[r.splitname]) if r.to is None else r.to)
    return pieces

  def read(self, split: str, process_index: int = 0, process_count: int = 1) -> tf.data.Dataset:
    """This process's share of `split` in the shards' order, as {'image': encoded bytes, 'label':
    int64}; images that do not decode are left out."""
    pieces = self._share(split, process_index, process_count)
    columns = tuple(tf.constant([p[i] for p in pieces], tf.int64, [len(pieces)]) for i in range(3))
    examples = self._examples(tf.data.Dataset.from_tensor_slices(columns))
    total = sum(take for _, _, take in pieces)
    return examples.apply(tf.data.experimental.assert_cardinality(total))

  def read_from(self, split: str, process_index: int = 0, process_count: int = 1):
    """A function from (seed, an int64 tensor [2]; start, an int64 scalar) to `read`'s share with
    its pieces of shards in that seed's order, from its example `start` on: reading starts at
    that example's bytes; nothing before it is read."""
    pieces = self._share(split, process_index, process_count)
    shards, skips, takes = (tf.constant([p[i] for p in pieces], tf.int64) for i in range(3))

    def read_in_order_from(seed_2, start):
      order = tf.random.experimental.stateless_shuffle(tf.range(len(pieces)), seed_2)
      takes_o = tf.gather(takes, order)
      ends = tf.cumsum(takes_o)
      first = tf.searchsorted(ends, tf.reshape(start, [1]), side="right")[0]
      into_first = start - (ends[first] - takes_o[first])
      moved = tf.one_hot(0, len(pieces) - first, dtype=tf.int64) * into_first
      rest = (
          tf.gather(shards, order)[first:],
          tf.gather(skips, order)[first:] + moved,
          takes_o[first:] - moved,
      )
      return self._examples(tf.data.Dataset.from_tensor_slices(rest))

    return read_in_order_from

  def _share(self, split: str, process_index: int, process_count: int) -> list:
    """The pieces of this process's contiguous share of `split`: the first `n % process_count`
    processes get one example more, as `tfds.even_splits` gives."""
    pieces = self._pieces(split)
    base, extra = divmod(sum(take for _, _, take in pieces), process_count)
    lo = process_index * base + min(process_index, extra)
    return _cut(pieces, lo, lo + base + (process_index < extra))

  @functools.cached_property
  def _tensors(self) -> dict:
    """The index as tensors, made once and captured by every pipeline (not copied into each)."""
    return {
        "paths": tf.constant(self.paths),
        "starts": tf.constant(self.starts),
        "offsets": tf.constant(self.offsets),
        "sizes": tf.constant(self.sizes),
        "labels": tf.constant(self.labels),
    }

  def _examples(self, pieces: tf.data.Dataset) -> tf.data.Dataset:
    """The samples of (shard, skip, take) `pieces`, read CHUNK samples' bytes at a time."""
    starts = self._tensors["starts"]

    @no_autograph
    def chunks(shard, skip, take):
      first = starts[shard] + skip
      return tf.data.Dataset.range(first, first + take, CHUNK).map(
          no_autograph(lambda begin: (shard, begin, tf.minimum(first + take, begin + CHUNK)))
      )

    read = pieces.flat_map(chunks).map(
        no_autograph(self._read_chunk), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return read.unbatch()

  def _read_chunk(self, shard, begin, end) -> dict:
    t = self._tensors
    offsets_n, sizes_n = t["offsets"][begin:end], t["sizes"][begin:end]
    path = t["paths"][shard]
    first_byte, end_byte = offsets_n[0], offsets_n[-1] + sizes_n[-1]
    data = tf.py_function(_read_bytes, [path, first_byte, end_byte], tf.string)
    data.set_shape([])
    return {
        "image": tf.strings.substr(data, offsets_n - first_byte, sizes_n),
        "label": t["labels"][begin:end],
    }


def _cut(pieces: list, lo: int, hi: int) -> list:
  """The (shard, skip, take) pieces of samples [lo, hi) of `pieces` read one after another."""
  out, at = [], 0
  for shard, skip, take in pieces:
    begin, end = max(lo, at), min(hi, at + take)
    if begin < end:
      out.append((shard, skip + begin - at, end - begin))
    at += take
  return out


def _read_bytes(path, begin, end) -> bytes:
  """Bytes [begin, end) of shard `path` (tensors), through vit_jax/storage."""
  return storage.read_ranges([(path.numpy().decode(), int(begin), int(end))])[0]


def match(pattern: str) -> list[str]:
  """The shards of `pattern`: a folder's .tar files, or a glob's matches (braces expanded)."""
  patterns = [pattern]
  if "{" in pattern:
    braceexpand = data.import_extra("braceexpand", f"wds:{pattern} (a pattern with braces)")
    patterns = list(braceexpand.braceexpand(pattern))
  paths = set()
  for p in patterns:
    if not any(c in p for c in "*?[") and storage.isdir(p):
      p = storage.join(p, "**", "*.tar")
    paths.update(storage.glob(p))
  if not paths:
    raise errors.DataError(
        f"wds:{pattern} matches no file: give a folder of .tar shards, a glob "
        "(/data/imagenet-train-*.tar) or a brace range (/data/imagenet-train-{0000..1023}.tar)."
    )
  return sorted(paths)


def _split_of(path: str) -> str | None:
  """The split word among the words of the shard's file name, else its folder's whole name."""
  words = re.split(r"[^a-z0-9]+", storage.name(path).lower())
  found = next((w for w in words if w in SPLIT_WORDS), None)
  folder = storage.name(storage.parent(path)).lower()
  return found or (folder if folder in SPLIT_WORDS else None)


# ---- Scanning a shard ----------------------------------------------------------------------------


def _grouped(tar: tarfile.TarFile, path: str):
  """(key, {extension: member}) of each sample of `tar`, in order (webdataset's grouping)."""
  key, members = None, {}
  try:
    for member in iter(tar.next, None):
      found = _KEY_AND_EXTENSION.match(member.name) if member.isfile() else None
      if not found:
        continue
      if found.group(1) != key:
        if members:
          yield key, members
        key, members = found.group(1), {}
      extension = found.group(2).lower()
      if extension in members:
        raise errors.DataError(
            f"{path}: sample {key!r} holds {member.name} twice; write each member once."
        )
      members[extension] = member
  except (tarfile.TarError, EOFError) as e:
    raise errors.DataError(f"{path} is truncated or damaged ({e}); copy or write it again.") from e
  if members:
    yield key, members


def _image_member(members: dict, key: str, path: str) -> tarfile.TarInfo:
  images = [members[e] for e in IMAGE_EXTENSIONS if e in members]
  if len(images) != 1:
    has = ", ".join(f".{e}" for e in members)
    raise errors.DataError(
        f"{path}: sample {key!r} has {'no image' if not images else 'several images'} (it holds "
        f"{has}); each sample needs one of {', '.join('.' + e for e in IMAGE_EXTENSIONS)}."
    )
  return images[0]


def _label(tar: tarfile.TarFile, members: dict, key: str, path: str, label_key: str) -> int:
  """The sample's class: KEY.cls, else the `label_key` field of KEY.json."""
  if "cls" in members:
    text = tar.extractfile(members["cls"]).read().decode("utf-8", "replace").strip()
    where = f"{members['cls'].name} holds {text[:40]!r}"
    try:
      label = int(text)
    except ValueError:
      label = None
  elif "json" in members:
    name = members["json"].name
    try:
      fields = json.loads(tar.extractfile(members["json"]).read())
    except ValueError as e:
      raise errors.DataError(f"{path}: {name} is not JSON ({e}).") from e
    if not isinstance(fields, dict) or label_key not in fields:
      keys = ", ".join(sorted(fields)) if isinstance(fields, dict) else type(fields).__name__
      raise errors.DataError(
          f"{path}: sample {key!r} has no label: {name} has no field {label_key!r} (it has "
          f"{keys or 'none'}); name the field with --config.label_key."
      )
    label = fields[label_key]
    where = f"{name}'s {label_key!r} is {json.dumps(label)[:40]}"
    if isinstance(label, bool) or not isinstance(label, int):
      label = None
  else:
    raise errors.DataError(
        f"{path}: sample {key!r} has no label: no {key}.cls nor {key}.json (it holds "
        f"{', '.join('.' + e for e in members)})."
    )
  if label is None or label < 0:
    raise errors.DataError(
        f"{path}: sample {key!r} has a label that is not a class id: {where}; labels are "
        "integers 0, 1, 2, ..."
    )
  return label


def _scan(path: str, label_key: str) -> dict:
  """A shard's index entry, its every sample checked, each image decoded."""
  # pylint: disable-next=g-import-not-at-top  (the pipeline's decode and the folder's wording)
  from vit_jax.data.image import folder

  offsets, sizes, labels, bad = [], [], [], []
  with storage.open(path, "rb") as f:
    try:
      tar = tarfile.open(fileobj=f, mode="r:")
    except tarfile.TarError as e:
      raise errors.DataError(
          f"{path} is not a tar file ({e}); shards are uncompressed tars of KEY.jpg and KEY.cls "
          "files."
      ) from e
    with tar:
      samples = list(_grouped(tar, path))  # the headers first: a truncated shard says so first
      end = tar.offset  # where the end-of-archive blocks start
      f.seek(end)
      if f.read(_END_OF_ARCHIVE) != bytes(_END_OF_ARCHIVE):
        raise errors.DataError(
            f"{path} is truncated: it ends at byte {end} without tar's end-of-archive blocks "
            "(a copy that stopped early); copy or write it again."
        )
      for key, members in samples:
        image = _image_member(members, key, path)
        why = folder.image_problem(tar.extractfile(image).read())
        if why:
          bad.append([len(labels), image.name, why])
        offsets.append(image.offset_data)
        sizes.append(image.size)
        labels.append(_label(tar, members, key, path, label_key))
  if not labels:
    raise errors.DataError(f"{path} holds no samples (KEY.jpg with KEY.cls or KEY.json).")
  return {"offsets": offsets, "sizes": sizes, "labels": labels, "bad": bad, "label_key": label_key}


# ---- The index -----------------------------------------------------------------------------------


def _indexed(paths: list[str], label_key: str) -> tuple[dict, str]:
  """({path: index entry}, the index's path): the stored entries of unchanged shards, the others
  scanned now and the index rewritten."""
  folder = _common_folder(paths)
  signatures = _signatures(paths)
  index_path, index = index_file.read(
      folder, INDEX_NAME, "wds_index", lambda index: index.get("format") == _INDEX_FORMAT
  )
  stored = index["shards"] if index else {}
  entries = {}
  for path in paths:
    entry = stored.get(_relative(path, folder))
    signature = signatures[path]  # None: not in its folder's listing (read it again)
    if entry and signature and entry["signature"] == signature and entry["label_key"] == label_key:
      entries[path] = entry
  missing = [p for p in paths if p not in entries]
  if missing:
    with concurrent.futures.ThreadPoolExecutor(min(_SCAN_THREADS, len(missing))) as pool:
      scans = [pool.submit(_scan, path, label_key) for path in missing]
      try:
        for path, scan in zip(missing, scans):
          entries[path] = {**scan.result(), "signature": signatures[path]}
      except BaseException:  # the first bad shard: the shards not yet begun are not read
        for scan in scans:
          scan.cancel()
        raise
    stored.update({_relative(p, folder): entries[p] for p in missing})
    index = {"format": _INDEX_FORMAT, "shards": stored}
    index_path = index_file.write(folder, INDEX_NAME, "wds_index", index)
  return entries, index_path


def _common_folder(paths: list[str]) -> str:
  if storage.is_remote(paths[0]):
    bucket = storage.bucket(paths[0])
    within = [posixpath.dirname(p[len(bucket) :]) for p in paths]
    return bucket + posixpath.commonpath(within)
  return os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])


def _relative(path: str, folder: str) -> str:
  if storage.is_remote(path):
    return path[len(folder) :].lstrip("/")
  return os.path.relpath(path, folder)


def _signatures(paths: list[str]) -> dict:
  """{path: what changes when the shard is rewritten}: local size and time; in a bucket the size,
  from one listing per folder."""
  if not storage.is_remote(paths[0]):
    return {p: list(storage.size_and_mtime(p)) for p in paths}
  sizes = {}
  for folder in sorted({storage.parent(p) for p in paths}):
    sizes.update({storage.join(folder, n): [s] for n, s in storage.file_sizes(folder).items()})
  return {p: sizes.get(p) for p in paths}
