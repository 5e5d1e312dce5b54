"""What the image datasets drawn here share (synthetic_shapes, marks_pair): a TFDS builder whose
splits are drawn from a fixed seed each, a chunk of examples at a time, and stored as PNG.

Nothing is downloaded: `download_and_prepare` draws the images (the image pipeline does it on
first use; vit_jax/data/tfds_builders.py IMAGE_DATASETS names the module of each).
"""

import abc
import io

from PIL import Image
import tensorflow_datasets as tfds

_CHUNK = 1000  # examples drawn at once (vectorised); the examples do not depend on it


def image_and_label(image_size: int, class_names) -> dict:
  """The features of every drawn dataset: an RGB image of image_size x image_size and its class."""
  return {
      "image": tfds.features.Image(shape=(image_size, image_size, 3)),
      "label": tfds.features.ClassLabel(names=class_names),
  }


class DrawnImages(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """A subclass names its TFDS dataset (by its class name), describes it, and draws examples."""

  VERSION = tfds.core.Version("1.0.0")
  url_infos = None  # nothing is downloaded (and it skips tfds's checksum-file lookup)
  DESCRIPTION: str

  @abc.abstractmethod
  def _features(self) -> dict:
    """{name: TFDS feature}: `image_and_label(...)` and any more."""

  @abc.abstractmethod
  def _split_sizes(self) -> dict[str, int]:
    """Examples per split (module constants, which tests shrink to prepare a small copy)."""

  @abc.abstractmethod
  def _draw(self, split: str, indices: range) -> list[dict]:
    """The examples of `split` at `indices`, each with its image as uint8 (S, S, 3)."""

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description=self.DESCRIPTION,
        features=tfds.features.FeaturesDict(self._features()),
        supervised_keys=("image", "label"),
    )

  def _split_generators(self, dl_manager):
    del dl_manager  # Nothing to download.
    return {split: self._generate_examples(split) for split in self._split_sizes()}

  def _generate_examples(self, split: str):
    size = self._split_sizes()[split]
    for start in range(0, size, _CHUNK):
      indices = range(start, min(start + _CHUNK, size))
      for index, example in zip(indices, self._draw(split, indices)):
        yield index, {**example, "image": _png(example["image"])}


def _png(image_SxSx3) -> bytes:
  """PNG bytes, which TFDS stores as they are: PIL encodes twice as fast as TFDS's TF op."""
  buffer = io.BytesIO()
  Image.fromarray(image_SxSx3).save(buffer, format="PNG")
  return buffer.getvalue()
