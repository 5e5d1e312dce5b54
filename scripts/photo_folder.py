"""Writes a small folder dataset of real photographs, offline: random views of the photos that
ship inside scikit-image and scikit-learn, one class per photo.

  python scripts/photo_folder.py /tmp/photos          # root/{train,test}/<photo>/<i>.jpg
  python -m vit_jax.main --config=configs/vit.py:dataset=folder:/tmp/photos ...

Each view is a random square crop covering 35-80% of the photo's short side, resized to 64 px,
so a model has to recognize the scene from a part of it.
"""

import argparse
import importlib.util
import os

import numpy as np
from PIL import Image

# Bundled with scikit-image (no download); scikit-learn ships china.jpg and flower.jpg.
SKIMAGE_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "retina")


def photos() -> dict:
  """{name: uint8 HxWx3} of every bundled colour photograph."""
  from skimage import data as sk_data  # pylint: disable=g-import-not-at-top
  from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top

  out = {name: getattr(sk_data, name)() for name in SKIMAGE_PHOTOS}
  sample = sk_datasets.load_sample_images()
  for filename, image in zip(sample.filenames, sample.images):
    out[os.path.splitext(os.path.basename(filename))[0]] = image
  return {k: np.asarray(v)[..., :3] for k, v in out.items()}


def random_view(image_HxWx3, rng, size: int) -> Image.Image:
  height, width = image_HxWx3.shape[:2]
  side = int(min(height, width) * rng.uniform(0.35, 0.8))
  top, left = rng.integers(0, height - side + 1), rng.integers(0, width - side + 1)
  crop = Image.fromarray(image_HxWx3[top : top + side, left : left + side])
  return crop.resize((size, size), Image.BILINEAR)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("root")
  parser.add_argument("--train_per_class", type=int, default=80)
  parser.add_argument("--test_per_class", type=int, default=20)
  parser.add_argument("--size", type=int, default=64)
  args = parser.parse_args()
  if os.path.exists(args.root):
    parser.error(f"{args.root} exists; choose a new directory (nothing was written).")
  if importlib.util.find_spec("skimage") is None:  # a test extra, not in the base install
    parser.exit(2, "error: this script needs scikit-image: pip install -e '.[test]'.\n")
  rng = np.random.default_rng(0)
  images = photos()
  for name, image in sorted(images.items()):
    for split, count in (("train", args.train_per_class), ("test", args.test_per_class)):
      directory = os.path.join(args.root, split, name)
      os.makedirs(directory)
      for i in range(count):
        random_view(image, rng, args.size).save(os.path.join(directory, f"{i:03d}.jpg"), quality=92)
  print(f"Wrote {args.root}: {len(images)} classes.")


if __name__ == "__main__":
  main()
