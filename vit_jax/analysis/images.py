"""Image files in, as the model saw them in evaluation; class names out.

Images go through the trainer's own eval preprocessing (`augment.eval_crop`: resize the short
side to size / crop_fraction, central crop; then `augment.normalize`), so a prediction here is the
prediction the trainer's evaluation made.
"""

import json

import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax import storage
from vit_jax.data import tfds_builders
from vit_jax.data.image import augment
from vit_jax.data.image import folder as image_folder
from vit_jax.data.image import imagenet_names
from vit_jax.data.image import pipeline  # hides accelerators from TF before TF touches them
from vit_jax.data.image import sources
from vit_jax.interop import hf_format


def crop_fraction(loaded) -> float | None:
  """The eval crop the model's trainer used (`pipeline.eval_crop_fraction`); an imported model,
  whose training config we do not have, gets the standard central 87.5% crop."""
  config = loaded.workdir_config
  if not config:
    return pipeline.eval_crop_fraction(inception_crop=True)
  return pipeline.eval_crop_fraction(config["augment"]["inception_crop"], config["eval_view"])


_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


def expand(paths) -> list:
  """Files as given, and the image files under each folder (recursively, sorted)."""
  files = []
  for path in paths:
    if storage.isdir(path):
      found = sorted(
          f for f in storage.files_under(path) if storage.name(f).lower().endswith(_EXTENSIONS)
      )
      if not found:
        raise errors.MissingFileError(
            f"No image files (.jpg/.png/.bmp/.gif) under the folder {path}."
        )
      files.extend(found)
    elif storage.isfile(path):
      files.append(path)
    else:
      raise errors.MissingFileError(f"Image file {path} does not exist.")
  return files


def load_images(paths, size: int, crop_fraction: float | None):
  """(crops_BxSxSx3 uint8 for display, images_BxSxSx3 float32 in [-1, 1] for the model)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  crops = []
  for path in paths:
    data = storage.read_bytes(path)
    try:
      crop = augment.eval_crop(tf.constant(data), size, crop_fraction)
    except (tf.errors.InvalidArgumentError, ValueError) as e:
      raise errors.DataError(
          f"{path} is not an image that can be decoded (JPEG, PNG, BMP or GIF): "
          f"{str(e).splitlines()[0][:120]}"
      ) from None
    crops.append(crop.numpy())
  crops_BxSxSx3 = np.stack(crops)
  return crops_BxSxSx3, np.asarray(augment.normalize(crops_BxSxSx3))


def _tfds_names(dataset: str, data_dir=None):
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  tfds_builders.register_built_here(dataset)
  label = tfds.builder(dataset, data_dir=data_dir).info.features["label"]
  return list(label.names)


def class_names(loaded, num_classes: int, labels_file: str | None = None) -> list:
  """Names for the model's classes: a labels file (one per line) if given, else the dataset info
  of the workdir's dataset, a Hugging Face config's id2label, or ImageNet's for 1000 classes.
  An ImageNet WordNet id (TFDS's only name for those classes) reads "tench (n01440764)"."""
  if labels_file:
    names = [line.strip() for line in storage.read_text(labels_file).splitlines() if line.strip()]
  else:
    names = [
        f"{imagenet_names.NAMES[n]} ({n})" if n in imagenet_names.NAMES else n
        for n in _dataset_names(loaded, num_classes)
    ]
  if len(names) != num_classes:
    raise errors.ConfigError(
        f"{len(names)} class names for a model with {num_classes} classes; pass a "
        "--labels file with one name per line."
    )
  return names


def _dataset_names(loaded, num_classes: int) -> list:
  if not loaded.workdir_config:
    return _imported_names(loaded.path, num_classes)
  dataset = loaded.workdir_config["dataset"]
  if dataset.startswith(sources.FOLDER_PREFIX):
    return list(image_folder.ImageFolder.open(dataset[len(sources.FOLDER_PREFIX) :]).class_names)
  if dataset.startswith(data.HUB_PREFIX):  # its ClassLabel's names
    from vit_jax.data import hub  # pylint: disable=g-import-not-at-top  (hf: datasets only)

    config = loaded.workdir_config
    return list(hub.open_images(dataset, data.read_options(config), config["data_dir"]).class_names)
  if dataset.startswith(sources.WDS_PREFIX):  # class ids only
    return _numbered_names(num_classes)
  return _tfds_names(dataset, loaded.workdir_config["data_dir"])


def _imported_names(path: str, num_classes: int) -> list:
  hf_config = storage.join(path, hf_format.HF_CONFIG)
  if storage.isdir(path) and storage.isfile(hf_config):
    id2label = json.loads(storage.read_text(hf_config)).get("id2label") or {}
    if len(id2label) == num_classes:
      return [id2label[str(i)] for i in range(num_classes)]
  return _numbered_names(num_classes)


def _numbered_names(num_classes: int) -> list:
  if num_classes == 1000:  # ImageNet's, by TFDS's imagenet2012 label file (offline)
    return _tfds_names("imagenet2012")
  return [f"class_{i}" for i in range(num_classes)]
