"""webdataset shards for the tests, written with tarfile as webdataset's TarWriter writes them."""

import io
import os
import tarfile

import numpy as np
import tensorflow as tf


def write_tar(path, members) -> str:
  """A tar at `path` of `members`, (name, bytes) pairs in order."""
  os.makedirs(os.path.dirname(str(path)), exist_ok=True)
  with tarfile.open(path, "w") as tar:
    for name, data in members:
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return str(path)


def shade(value: int, size: int = 8) -> bytes:
  """A PNG of one grey `value` (0..255): a sample's number, read back from its pixels."""
  return tf.io.encode_png(np.full((size, size, 3), value, np.uint8)).numpy()


def sample(key: str, image: bytes, label, *, ext: str = "png", as_json: str | None = None):
  """The members of one sample: KEY.EXT and KEY.cls, or KEY.json with {as_json: label}."""
  if as_json:
    return [(f"{key}.{ext}", image), (f"{key}.json", f'{{"{as_json}": {label}}}'.encode())]
  return [(f"{key}.{ext}", image), (f"{key}.cls", str(label).encode())]


def write_shades(root, layout: dict, num_classes: int = 3, label_of=None) -> dict:
  """Shards `root/shades-SPLIT-NNN.tar` holding `layout` {split: samples per shard}; sample n
  (numbered across splits) is `shade(n)` of class `label_of(n)`, by default n % num_classes.
  Returns {split: [n, ...]} in the shards' order."""
  label_of = label_of or (lambda n: n % num_classes)
  numbers, n = {}, 0
  for split, per_shard in layout.items():
    numbers[split] = []
    for s, count in enumerate(per_shard):
      members = []
      for _ in range(count):
        members += sample(f"s{n:04d}", shade(n), label_of(n))
        numbers[split].append(n)
        n += 1
      write_tar(os.path.join(str(root), f"shades-{split}-{s:03d}.tar"), members)
  return numbers


def shade_numbers(images_bxSxSx3) -> list:
  """The sample numbers of a batch of `shade` images read at full size without augmentation
  (pixels normalized to [-1, 1])."""
  return [int(round((float(image[0, 0, 0]) + 1) * 127.5)) for image in images_bxSxSx3]
