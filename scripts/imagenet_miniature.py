"""Writes a miniature ImageNet in the official manual-download format, offline, for trying the
documented preparation (docs/imagenet.md) without the 150 GB of real tars.

  python scripts/imagenet_miniature.py /tmp/manual      # the three ILSVRC2012 tars
  python -m vit_jax.prepare --config=configs/vit.py:dataset=imagenet2012 \
      --config.data_dir=/tmp/tfds --manual_dir=/tmp/manual

What image-net.org ships, in small:
- ILSVRC2012_img_train.tar: one tar per class (`n01440764.tar`), each of `<wnid>_<n>.JPEG`;
- ILSVRC2012_img_val.tar: `ILSVRC2012_val_00000001.JPEG`, ... flat; a validation image's class is
  its line in the validation_labels.txt that TFDS ships (the labels were published apart);
- ILSVRC2012_img_test.tar: `ILSVRC2012_test_00000001.JPEG`, ... whose labels were never released;
- and the oddities the real set has: grayscale JPEGs, a CMYK JPEG and a PNG named `.JPEG` (TFDS's
  builder converts the ones it lists by name, so these take names from its lists).

The classes are those of the first validation images, each drawn as a noisy flat colour of its
own, so a model trained for a few steps scores above chance on validation.
"""

import argparse
import io
import os
import tarfile

import numpy as np
from PIL import Image

CMYK_IMAGE = "n01739381_1309.JPEG"  # in TFDS imagenet2012 CMYK_IMAGES: a CMYK JPEG in the real set
PNG_IMAGE = "n02105855_2933.JPEG"  # TFDS imagenet2012 PNG_IMAGES: a PNG named .JPEG in the real set
IMAGE_SIZE = 48


def validation_wnids() -> list[str]:
  """The class (WordNet id) of each official validation image, in file-name order."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top  (only for its file)

  path = tfds.core.tfds_path("datasets/imagenet2012/validation_labels.txt")
  return path.read_text().split()


def _image(wnid: str, rng, mode: str = "RGB", fmt: str = "JPEG") -> bytes:
  """A flat colour of the class (from its id) with noise, encoded."""
  colour = np.frombuffer(wnid.encode(), np.uint8)[-3:].astype(np.float32) * 37 % 256
  pixels = colour + rng.normal(0, 25, (IMAGE_SIZE, IMAGE_SIZE, 3))
  image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).convert(mode)
  out = io.BytesIO()
  image.save(out, format=fmt)
  return out.getvalue()


def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
  info = tarfile.TarInfo(name)
  info.size = len(payload)
  tar.addfile(info, io.BytesIO(payload))


def _tar_bytes(files: dict[str, bytes]) -> bytes:
  out = io.BytesIO()
  with tarfile.open(fileobj=out, mode="w") as tar:
    for name, payload in files.items():
      _add(tar, name, payload)
  return out.getvalue()


def write(manual_dir: str, *, train_per_class: int = 8, validation: int = 24, test: int = 6):
  """Writes the three tars into `manual_dir`; returns the classes of the training tar."""
  rng = np.random.default_rng(0)
  os.makedirs(manual_dir, exist_ok=True)
  val_wnids = validation_wnids()[:validation]
  classes = sorted(set(val_wnids) | {CMYK_IMAGE.split("_")[0], PNG_IMAGE.split("_")[0]})
  with tarfile.open(os.path.join(manual_dir, "ILSVRC2012_img_train.tar"), "w") as train:
    for c, wnid in enumerate(classes):
      files = {}
      for i in range(train_per_class):
        mode = "L" if (c + i) % 5 == 0 else "RGB"  # some grayscale, as in the real set
        files[f"{wnid}_{i + 1}.JPEG"] = _image(wnid, rng, mode)
      if CMYK_IMAGE.startswith(wnid):
        files[CMYK_IMAGE] = _image(wnid, rng, "CMYK")
      if PNG_IMAGE.startswith(wnid):
        files[PNG_IMAGE] = _image(wnid, rng, fmt="PNG")
      _add(train, f"{wnid}.tar", _tar_bytes(files))
  with tarfile.open(os.path.join(manual_dir, "ILSVRC2012_img_val.tar"), "w") as val:
    for i, wnid in enumerate(val_wnids):
      _add(val, f"ILSVRC2012_val_{i + 1:08d}.JPEG", _image(wnid, rng, "L" if i % 7 == 3 else "RGB"))
  with tarfile.open(os.path.join(manual_dir, "ILSVRC2012_img_test.tar"), "w") as test_tar:
    for i in range(test):
      _add(test_tar, f"ILSVRC2012_test_{i + 1:08d}.JPEG", _image(classes[i % len(classes)], rng))
  return classes


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("manual_dir", help="where the tars go (TFDS's manual_dir)")
  parser.add_argument("--train_per_class", type=int, default=8)
  parser.add_argument("--validation", type=int, default=24, help="validation images")
  args = parser.parse_args()
  classes = write(args.manual_dir, train_per_class=args.train_per_class, validation=args.validation)
  print(f"wrote {args.manual_dir}: {len(classes)} classes, {args.validation} validation images")


if __name__ == "__main__":
  main()
