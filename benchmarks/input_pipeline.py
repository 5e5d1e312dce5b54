"""Input pipeline throughput: decoded, augmented 224-px images per second from TFDS data on disk.

A small TFDS dataset of ImageNet-sized JPEGs (smooth colour fields plus noise, so they compress
and decode like photos) is built into a data_dir, then read through our real training pipeline
(`pipeline.train_iterator`: shuffle, decode + Inception crop, resize, flip, normalize, batch).
"""

import os
import time

import numpy as np
import tensorflow_datasets as tfds

NAME = "benchmark_jpegs"


class BenchmarkJpegs(tfds.core.GeneratorBasedBuilder):
  """Random photo-like JPEGs of ImageNet's typical sizes, generated offline."""

  VERSION = tfds.core.Version("1.0.0")
  url_infos = None  # nothing to download
  NUM_IMAGES = 256

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg"),
                "label": tfds.features.ClassLabel(num_classes=1000),
            }
        ),
        supervised_keys=("image", "label"),
    )

  def _split_generators(self, dl_manager):
    del dl_manager
    return {"train": self._generate_examples()}

  def _generate_examples(self):
    rng = np.random.default_rng(0)
    for i in range(self.NUM_IMAGES):
      height, width = (375, 500) if i % 2 else (500, 333)
      yy, xx = np.mgrid[0:height, 0:width] / max(height, width)
      base_HxWx3 = np.stack(
          [np.sin(6 * xx + c + rng.uniform(0, 6)) + np.cos(4 * yy * (c + 1)) for c in range(3)],
          axis=-1,
      )
      image = base_HxWx3 * 60 + 128 + rng.normal(0, 12, (height, width, 3))
      yield i, {"image": np.clip(image, 0, 255).astype(np.uint8), "label": i % 1000}


def prepare(data_dir: str, num_images: int = 256) -> None:
  tfds.disable_progress_bar()
  BenchmarkJpegs.NUM_IMAGES = num_images
  tfds.builder(NAME, data_dir=data_dir).download_and_prepare()


def images_per_sec(
    data_dir: str, batch_size: int = 32, image_size: int = 224, batches: int = 20, warmup: int = 3
) -> float:
  """Steady images/s of the training iterator (all cores of this process)."""
  from vit_jax.data.image import pipeline  # pylint: disable=g-import-not-at-top

  batches_it = pipeline.train_iterator(
      NAME,
      "train",
      global_batch_size=batch_size,
      image_size=image_size,
      seed=0,
      data_dir=data_dir,
      augment=pipeline.Augment(inception_crop=True, flip=True),
      process_index=0,
      process_count=1,
  )
  for _ in range(warmup):
    next(batches_it)
  start = time.perf_counter()
  for _ in range(batches):
    next(batches_it)
  return batches * batch_size / (time.perf_counter() - start)


def cores() -> int:
  return len(os.sched_getaffinity(0))
