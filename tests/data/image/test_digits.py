"""sklearn_digits: built offline into a fresh data_dir, a faithful copy of sklearn's data."""

import collections

import numpy as np
from sklearn import datasets as sk_datasets
import tensorflow_datasets as tfds

from vit_jax.data.image import digits


def _examples(data_dir, split):
  ds = tfds.builder(digits.NAME, data_dir=data_dir).as_dataset(split=split)
  return [(ex["image"], int(ex["label"])) for ex in tfds.as_numpy(ds)]


def test_builds_offline_with_fixed_split(digits_dir):
  builder = tfds.builder(digits.NAME, data_dir=digits_dir)
  assert builder.is_prepared()
  assert builder.info.splits["train"].num_examples == 1442
  assert builder.info.splits["test"].num_examples == 355
  assert builder.info.features["label"].num_classes == 10


def test_examples_are_sklearn_digits_scaled_to_rgb(digits_dir):
  sk = sk_datasets.load_digits()
  expected = collections.Counter(
      (np.round(img * 255 / 16).astype(np.uint8).tobytes(), int(label))
      for img, label in zip(sk.images, sk.target)
  )
  got = collections.Counter()
  for split in ("train", "test"):
    for image, label in _examples(digits_dir, split):
      assert image.shape == (32, 32, 3) and image.dtype == np.uint8
      assert (image[..., 0] == image[..., 1]).all() and (image[..., 0] == image[..., 2]).all()
      # Nearest 4x upsampling: every 4x4 block is one source pixel.
      source_8x8 = image[::4, ::4, 0]
      np.testing.assert_array_equal(np.kron(source_8x8, np.ones((4, 4), np.uint8)), image[..., 0])
      got[(source_8x8.tobytes(), label)] += 1
  assert got == expected
  assert max(max(k[0]) for k in got) == 255


def test_test_split_is_stratified(digits_dir):
  sk_counts = np.bincount(sk_datasets.load_digits().target, minlength=10)
  test_counts = np.bincount([label for _, label in _examples(digits_dir, "test")], minlength=10)
  np.testing.assert_array_equal(test_counts, sk_counts // 5)
