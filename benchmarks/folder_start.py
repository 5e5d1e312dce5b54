"""Opening a `folder:` dataset: the first start (listing into the index), a restart (the index
reused), the decode-every-file scan this replaced (timed on a subset, extrapolated), and
`tfds.ImageFolder` on the same folder.

    python -m benchmarks.folder_start                 # 100,000 JPEGs of 32x32 in 100 classes
    python -m benchmarks.folder_start --images 20000  # a quicker run

The folder is generated under /tmp (a few hundred distinct JPEGs written again and again: every
file is a valid JPEG) and deleted at the end.
"""

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from vit_jax.data.image import folder as image_folder

_DISTINCT = 500  # distinct JPEGs; the files cycle through them


def generate(root: str, images: int, classes: int) -> None:
  rng = np.random.default_rng(0)
  jpegs = [
      tf.io.encode_jpeg(rng.integers(0, 256, (32, 32, 3), np.uint8)).numpy()
      for _ in range(_DISTINCT)
  ]
  per_split = {"train": images * 9 // 10, "val": images - images * 9 // 10}
  n = 0
  for split, count in per_split.items():
    for c in range(classes):
      os.makedirs(os.path.join(root, split, f"class_{c:03d}"))
    for i in range(count):
      path = os.path.join(root, split, f"class_{i % classes:03d}", f"{i:07d}.jpg")
      with open(path, "wb") as f:
        f.write(jpegs[n % _DISTINCT])
      n += 1


def timed(fn):
  start = time.perf_counter()
  out = fn()
  return time.perf_counter() - start, out


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--images", type=int, default=100_000)
  parser.add_argument("--classes", type=int, default=100)
  parser.add_argument("--decode_subset", type=int, default=2_000)
  args = parser.parse_args()
  root = tempfile.mkdtemp(prefix="folder_start_", dir="/tmp")
  try:
    seconds, _ = timed(lambda: generate(root, args.images, args.classes))
    print(f"generated {args.images:,} JPEGs in {args.classes} classes: {seconds:.1f} s")
    first, opened = timed(lambda: image_folder.ImageFolder.open(root))
    assert sum(opened.num_examples(s) for s in ("train", "val")) == args.images
    index_mb = os.path.getsize(opened.index_path) / 1e6
    print(f"first start (list, write the index, {index_mb:.1f} MB): {first:.2f} s")
    restart, _ = timed(lambda: image_folder.ImageFolder.open(root))
    print(f"restart (check the layout, read the index): {restart:.2f} s")
    subset = [p for p, _ in opened.examples["train"][: args.decode_subset]]
    decode, _ = timed(lambda: [image_folder.decode_problem(p) for p in subset])
    per_image = decode / len(subset)
    print(
        f"decode-every-file scan (before): {1e3 * per_image:.2f} ms/image on {len(subset):,} "
        f"files -> {per_image * args.images:.0f} s for {args.images:,} at every start "
        f"(ImageNet's 1.28M: {per_image * 1_281_167 / 60:.0f} min)"
    )
    peer, builder = timed(lambda: tfds.ImageFolder(root))
    print(
        f"tfds.ImageFolder (lists every start, no decode): {peer:.2f} s "
        f"({builder.info.splits['train'].num_examples:,} train)"
    )
  finally:
    shutil.rmtree(root)


if __name__ == "__main__":
  main()
