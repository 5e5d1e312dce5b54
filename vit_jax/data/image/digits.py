"""scikit-learn's bundled 8x8 digits as a TFDS dataset: the offline default.

The generator only reads the CSV that ships inside scikit-learn, so
`download_and_prepare` works without network. Registering the builder (by
importing this module) makes `tfds.builder('sklearn_digits')` resolve, and the
examples then flow through exactly the same pipeline as ImageNet.
"""

import numpy as np
import tensorflow_datasets as tfds

NAME = "sklearn_digits"
IMAGE_SIZE = 32  # 8x8 upsampled 4x (nearest) so random crops get sub-digit granularity.
_UPSAMPLE = IMAGE_SIZE // 8
_TEST_EVERY = 5  # Every 5th example of each class is a test example: ~80/20, stratified.


class SklearnDigits(tfds.core.GeneratorBasedBuilder):
  """1797 handwritten digits (0..9), grayscale replicated to RGB."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "8x8 digits upsampled to 32x32 RGB; 80/20 split."}
  # Nothing is downloaded, so there are no URL checksums. Saying so directly
  # also skips tfds 4.9.10's checksum-file lookup, which imports the
  # `importlib_resources` backport (not installed on Python >= 3.9).
  url_infos = None

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description=(
            "scikit-learn's optical recognition of handwritten digits "
            "(UCI), read from the copy bundled with scikit-learn."
        ),
        features=tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(shape=(IMAGE_SIZE, IMAGE_SIZE, 3)),
                "label": tfds.features.ClassLabel(num_classes=10),
            }
        ),
        supervised_keys=("image", "label"),
        homepage="https://scikit-learn.org/stable/datasets/toy_dataset.html",
    )

  def _split_generators(self, dl_manager):
    del dl_manager  # Nothing to download.
    return {
        "train": self._generate_examples(is_test=False),
        "test": self._generate_examples(is_test=True),
    }

  def _generate_examples(self, is_test: bool):
    # Imported here: only building the dataset reads scikit-learn (1 s of a run's start).
    from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top

    digits = sk_datasets.load_digits()
    images_Nx8x8 = digits.images  # float64 in [0, 16]
    labels_N = digits.target
    # Position of each example among the examples of its class, in file order.
    rank_in_class_N = np.zeros_like(labels_N)
    for c in range(10):
      members = np.flatnonzero(labels_N == c)
      rank_in_class_N[members] = np.arange(len(members))
    for i, (image_8x8, label) in enumerate(zip(images_Nx8x8, labels_N)):
      if (rank_in_class_N[i] % _TEST_EVERY == _TEST_EVERY - 1) != is_test:
        continue
      yield i, {"image": _to_rgb_uint8(image_8x8), "label": int(label)}


def _to_rgb_uint8(image_8x8: np.ndarray) -> np.ndarray:
  """[0, 16] float 8x8 -> uint8 [0, 255] of shape (IMAGE_SIZE, IMAGE_SIZE, 3)."""
  gray_8x8 = np.round(image_8x8 * (255.0 / 16.0)).astype(np.uint8)
  block = np.ones((_UPSAMPLE, _UPSAMPLE), np.uint8)
  gray_SxS = np.kron(gray_8x8, block)
  return np.repeat(gray_SxS[:, :, None], 3, axis=2)
