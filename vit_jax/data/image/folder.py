"""A folder of images laid out `root/<split>/<class>/<image>` as a dataset, listed once into an
index that later starts reuse.

`tfds.ImageFolder` works offline too, but it rejects sub-splits and reads every file before a
per-process shard could drop it. Listing the files here lets each process read only its own share.

Splits and classes are the visible sub-folders (a name starting with "." is skipped).

The index: every split's class folders and their image file names (JSON), written at the first
start as `root/.vit_jax_index.json`, or, where the root cannot be written (read-only data, a bucket
without write access), as `$XDG_CACHE_HOME/vit_jax/folder_index/<hash of root>.json`
(~/.cache/vit_jax/... by default). Nothing is decoded to build it: listing ImageNet's 1.28M files
takes seconds locally.

Each start checks the index against the folder's layout: the split and class folder names and,
for a local root, each class folder's modification time, which changes whenever a file is added,
removed or renamed in it (one stat per class folder: about 2,000 for ImageNet, milliseconds). A
mismatch lists the folder again and rewrites the index. A file rewritten in place under the same
name keeps its entry, which is all the index holds (its bytes are read when training reads it).
A bucket has no folder times: there each class folder's signature is its listing (names and
sizes), so every start lists the bucket (still no decode).

Images are checked where the input pipeline decodes them (vit_jax/data/image/pipeline.py): a file
that does not decode is skipped with a warning naming it, or refused with `bad_images=error`.

The root may be a local folder or a bucket's (gs://...): files are listed and read through
vit_jax/storage.
"""

import dataclasses
import hashlib
import json
import os
import re
import sys

import tensorflow as tf

from vit_jax import errors
from vit_jax import storage
from vit_jax.data import index_file
from vit_jax.data.image import no_autograph

_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
INDEX_NAME = ".vit_jax_index.json"
_INDEX_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class ImageFolder:
  """Splits are the sub-folders of `root`; classes are the union of the
  sub-sub-folder names over all splits, sorted, so label ids agree between
  splits even when a split lacks a class."""

  root: str
  class_names: tuple[str, ...]
  # split -> sorted ((path, label id), ...)
  examples: dict[str, tuple[tuple[str, int], ...]]
  index_path: str  # where the index was read or written

  @classmethod
  def open(cls, root: str) -> "ImageFolder":
    """The folder from its index, which is (re)written first if missing or out of date."""
    root = os.path.expanduser(root)
    if not storage.isdir(root):
      raise errors.MissingFileError(f"Image folder {root!r} does not exist.")
    # The layout is read before any listing, so a file added while listing changes a folder's
    # time after it was read: the next start then lists again rather than missing the file.
    layout = _layout(root)
    fits = lambda index: index.get("format") == _INDEX_FORMAT and index.get("layout") == layout
    index_path, index = index_file.read(root, INDEX_NAME, "folder_index", fits)
    files = index["files"] if index else None
    if files is None:
      files = {
          split: {c: _image_names(storage.join(root, split, c)) for c in classes}
          for split, classes in layout.items()
      }
      index = {"format": _INDEX_FORMAT, "layout": layout, "files": files}
      index_path = index_file.write(root, INDEX_NAME, "folder_index", index)
    class_names = tuple(sorted({c for classes in layout.values() for c in classes}))
    label_of = {name: i for i, name in enumerate(class_names)}
    examples = {
        split: tuple(
            (storage.join(root, split, c, name), label_of[c])
            for c in sorted(by_class)
            for name in by_class[c]
        )
        for split, by_class in files.items()
    }
    if not any(examples.values()):
      raise errors.DataError(
          f"No images found under {root!r}; expected root/<split>/<class>/*.jpg|png."
      )
    return cls(root=root, class_names=class_names, examples=examples, index_path=index_path)

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  def num_examples(self, split: str) -> int:
    return len(self._split(split))

  def classes_in(self, split: str) -> tuple[str, ...]:
    """The classes with at least one image file in `split`, sorted."""
    return tuple(sorted({self.class_names[label] for _, label in self._split(split)}))

  def read(self, split: str, process_index: int = 0, process_count: int = 1) -> tf.data.Dataset:
    """This process's share of `split` as {'image': encoded bytes, 'label': int64, 'path':
    string} ('path' names a file that turns out not to decode).

    Strided sharding (not contiguous ranges) because the file list is sorted
    by class: every process then sees every class. Process 0 gets the largest
    share, as with `tfds.even_splits`.
    """
    paths, labels = self._share(split, process_index, process_count)
    return _load(tf.data.Dataset.from_tensor_slices((paths, labels)), self.root)

  def read_shuffled(self, split: str, process_index: int = 0, process_count: int = 1):
    """A function from a seed (int64 tensor [2]) to `read`'s share in that seed's order. Every
    image is its own file, so the whole share is permuted (paths only; nothing is read)."""
    paths, labels = self._share(split, process_index, process_count)

    def read_in_order(seed_2):
      order = tf.random.experimental.stateless_shuffle(tf.range(tf.size(paths)), seed_2)
      return _load(
          tf.data.Dataset.from_tensor_slices((tf.gather(paths, order), tf.gather(labels, order))),
          self.root,
      )

    return read_in_order

  def _share(self, split: str, process_index: int, process_count: int):
    share = self._split(split)[process_index::process_count]
    paths = tf.constant([p for p, _ in share], tf.string)
    labels = tf.constant([label for _, label in share], tf.int64)
    return paths, labels

  def _split(self, split: str) -> tuple[tuple[str, int], ...]:
    if split not in self.examples:
      raise errors.DataError(
          f"Split {split!r} not found in image folder {self.root!r}; "
          f"available: {sorted(self.examples)}."
      )
    return self.examples[split]


def decode_problem(path: str) -> str | None:
  """Why the file at `path` does not decode as an image (one short line), or None if it does."""
  try:
    return image_problem(storage.read_bytes(path))
  except OSError as e:
    return _reason(e)


def image_problem(data: bytes) -> str | None:
  """Why encoded image `data` does not decode (one short line), or None if it does."""
  try:
    tf.io.decode_image(data, channels=3, expand_animations=False)
    return None
  except tf.errors.OpError as e:
    return _reason(e)


def _reason(e: Exception) -> str:
  reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
  return re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:\w+\].*", "", reason)[:120]  # TF's op and device tags


def warn_skipped(path: str, reason: str) -> None:
  print(f"warning: skipping {path}: not a decodable image ({reason}).", file=sys.stderr, flush=True)


# ---- The index -----------------------------------------------------------------------------------


def _layout(root: str) -> dict[str, dict[str, object]]:
  """{split: {class: signature}}: what the index is checked against at each start."""
  if storage.is_remote(root):
    return {
        split: {c: _listing_signature(storage.join(root, split, c)) for c in _subdirs(split_dir)}
        for split in _subdirs(root)
        for split_dir in [storage.join(root, split)]
    }
  layout = {}
  for split in _subdirs(root):
    with os.scandir(os.path.join(root, split)) as entries:
      layout[split] = {
          e.name: e.stat().st_mtime_ns
          for e in sorted(entries, key=lambda e: e.name)
          if not e.name.startswith(".") and e.is_dir()
      }
  return layout


def _listing_signature(folder: str) -> str:
  sizes = storage.file_sizes(folder)
  return hashlib.sha256(json.dumps(sorted(sizes.items())).encode()).hexdigest()[:16]


def _subdirs(path: str) -> list[str]:
  """The sub-folders of `path`, sorted; hidden ones (.name) are no split or class."""
  return sorted(
      name
      for name in storage.listdir(path)
      if not name.startswith(".") and storage.isdir(storage.join(path, name))
  )


def _image_names(path: str) -> list[str]:
  return sorted(name for name in storage.listdir(path) if name.lower().endswith(_IMAGE_EXTENSIONS))


# ---- Reading -------------------------------------------------------------------------------------


def _load(paths_and_labels: tf.data.Dataset, root: str) -> tf.data.Dataset:
  read = _read_through_storage if storage.is_remote(root) else tf.io.read_file
  return paths_and_labels.map(
      no_autograph(lambda path, label: {"image": read(path), "label": label, "path": path}),
      num_parallel_calls=tf.data.AUTOTUNE,
  )


def _read_through_storage(path_tensor):
  """A bucket's file read in the input pipeline by vit_jax/storage (the client the rest of
  the run uses), not by TensorFlow's own GCS client."""
  read = lambda path: storage.read_bytes(path.numpy().decode())
  data = tf.py_function(read, [path_tensor], tf.string)
  data.set_shape([])
  return data
