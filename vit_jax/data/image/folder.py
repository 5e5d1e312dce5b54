"""A folder of images laid out `root/<split>/<class>/<image>` as a dataset.

`tfds.ImageFolder` works offline too, but it rejects sub-splits and reads
every file before a per-process shard could drop it. Listing the files here
lets each process read only its own share.

A file that does not decode as an image is left out with a warning naming it
(checked once per file version), so one corrupt file never kills a run mid-way;
vit_jax/config/checks.py counts them, or refuses them with bad_images=error.

The root may be a local folder or a bucket's (gs://...): files are listed and read through
vit_jax/storage.py.
"""

import dataclasses
import functools
import os
import re
import sys

import tensorflow as tf

from vit_jax import errors
from vit_jax import storage

_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


@dataclasses.dataclass(frozen=True)
class ImageFolder:
  """Splits are the sub-folders of `root`; classes are the union of the
  sub-sub-folder names over all splits, sorted, so label ids agree between
  splits even when a split lacks a class."""

  root: str
  class_names: tuple[str, ...]
  # split -> sorted ((path, label id), ...)
  examples: dict[str, tuple[tuple[str, int], ...]]

  @classmethod
  def scan(cls, root: str) -> "ImageFolder":
    root = os.path.expanduser(root)
    if not storage.isdir(root):
      raise errors.MissingFileError(f"Image folder {root!r} does not exist.")
    splits = _subdirs(root)
    class_names = tuple(sorted({c for s in splits for c in _subdirs(storage.join(root, s))}))
    label_of = {name: i for i, name in enumerate(class_names)}
    examples = {}
    for split in splits:
      split_dir = storage.join(root, split)
      examples[split] = tuple(
          (path, label_of[c])
          for c in _subdirs(split_dir)
          for path in _image_files(storage.join(split_dir, c))
          if _decodes(path)
      )
    if not any(examples.values()):
      raise errors.DataError(
          f"No images found under {root!r}; expected root/<split>/<class>/*.jpg|png."
      )
    return cls(root=root, class_names=class_names, examples=examples)

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  def num_examples(self, split: str) -> int:
    return len(self._split(split))

  def classes_in(self, split: str) -> tuple[str, ...]:
    """The classes with at least one (decodable) image in `split`, sorted."""
    return tuple(sorted({self.class_names[label] for _, label in self._split(split)}))

  def read(self, split: str, process_index: int = 0, process_count: int = 1) -> tf.data.Dataset:
    """This process's share of `split` as {'image': encoded bytes, 'label': int64}.

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


def undecodable_images(root: str) -> list[str]:
  """Every file under root/<split>/<class>/ with an image extension that does not decode."""
  root = os.path.expanduser(root)
  return [
      path
      for split in _subdirs(root)
      for c in _subdirs(storage.join(root, split))
      for path in _image_files(storage.join(root, split, c))
      if not _decodes(path)
  ]


def _decodes(path: str) -> bool:
  return _decodes_version(path, *storage.size_and_mtime(path))


@functools.lru_cache(maxsize=None)
def _decodes_version(path: str, size: int, mtime_ns: int) -> bool:
  del size, mtime_ns  # part of the cache key only: a rewritten file is checked again
  try:
    tf.io.decode_image(storage.read_bytes(path), channels=3, expand_animations=False)
    return True
  except (tf.errors.OpError, OSError) as e:
    reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
    reason = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:\w+\].*", "", reason)[:120]  # TF's op and device tags
    print(
        f"warning: skipping {path}: not a decodable image ({reason}).", file=sys.stderr, flush=True
    )
    return False


def _subdirs(path: str) -> list[str]:
  return sorted(name for name in storage.listdir(path) if storage.isdir(storage.join(path, name)))


def _image_files(path: str) -> list[str]:
  return sorted(
      storage.join(path, name)
      for name in storage.listdir(path)
      if name.lower().endswith(_IMAGE_EXTENSIONS)
  )


def _load(paths_and_labels: tf.data.Dataset, root: str) -> tf.data.Dataset:
  read = _read_through_storage if storage.is_remote(root) else tf.io.read_file
  return paths_and_labels.map(
      lambda path, label: {"image": read(path), "label": label},
      num_parallel_calls=tf.data.AUTOTUNE,
  )


def _read_through_storage(path_tensor):
  """A bucket's file read in the input pipeline by vit_jax/storage.py (the client the rest of
  the run uses), not by TensorFlow's own GCS client."""
  read = lambda path: storage.read_bytes(path.numpy().decode())
  data = tf.py_function(read, [path_tensor], tf.string)
  data.set_shape([])
  return data
