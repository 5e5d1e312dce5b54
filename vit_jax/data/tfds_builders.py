"""TFDS datasets: the image datasets known by name, and the builders of every data family (image
and text): opened, prepared or checked prepared, split-checked.

    builder = tfds_builders.open_builder("cifar10", data_dir=None)

IMAGE_DATASETS is the one table of image datasets: a row's default splits are what a config and
the input pipeline fall back on, and `built_here` names the module that makes the dataset on this
machine (then registering the builder and preparing it on first use is `open_builder`'s job). The
table imports nothing heavy, so a config reads it without TensorFlow. Text datasets have their
rows in data/text/datasets.py.

`open_builder` is the one place a TFDS builder is constructed. Inside `data.opened_once()` (a
training run) each (name, data_dir) is constructed once, so the config checks, the input pipeline
and the evaluators read the same builder instead of opening the dataset again to validate it.
Outside it every call constructs afresh (a builder holds its metadata, not the data).
"""

import dataclasses
import importlib
import os

from vit_jax import data
from vit_jax import errors


@dataclasses.dataclass(frozen=True)
class ImageDataset:
  train_split: str | None  # the default training split; None: evaluation only
  eval_split: str  # the default eval split
  # The module under vit_jax/data/image whose import registers the dataset's TFDS builder: made
  # from what is on this machine (no download), it is prepared on first use. None: TFDS's own.
  built_here: str | None = None


IMAGE_DATASETS = {
    "imagenet2012": ImageDataset("train", "validation"),
    "imagenet_v2": ImageDataset(None, "test"),  # Evaluation-only re-collection of ImageNet val.
    "cifar10": ImageDataset("train", "test"),
    "cifar100": ImageDataset("train", "test"),
    "oxford_iiit_pet": ImageDataset("train", "test"),
    "oxford_flowers102": ImageDataset("train", "test"),
    "sklearn_digits": ImageDataset("train", "test", built_here="digits"),
    "synthetic_shapes": ImageDataset("train", "test", built_here="shapes"),
    # and test_dDD, one per mark distance
    "marks_pair": ImageDataset("train", "test", built_here="marks_pair"),
}
OTHER_IMAGE_DATASET = ImageDataset("train", "test")  # any other TFDS image dataset, or a folder


def base_name(name: str) -> str:
  """A TFDS name without version or config: 'imagenet_v2/matched-frequency' -> 'imagenet_v2',
  'synthetic_shapes:1.0.0' -> 'synthetic_shapes'."""
  return name.split("/")[0].split(":")[0]


def image_dataset(name: str) -> ImageDataset:
  """The row of image dataset `name`, or OTHER_IMAGE_DATASET for one the table does not list."""
  return IMAGE_DATASETS.get(base_name(name), OTHER_IMAGE_DATASET)


def register_built_here(name: str) -> bool:
  """Makes `tfds.builder(name)` resolve when the dataset is built here (importing its module);
  returns whether it is."""
  module = image_dataset(name).built_here
  if module is not None:
    importlib.import_module(f"vit_jax.data.image.{module}")
  return module is not None


def open_builder(name: str, *, data_dir: str | None, prepare: bool = False):
  """The TFDS builder of `name` ('cifar10', 'imagenet_v2/matched-frequency', 'lm1b:1.1.0'),
  prepared: with `prepare`, or when it is built here, it is downloaded or built now when
  missing, else a DatasetNotPreparedError says how to prepare it."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top  (text runs skip TFDS)

  # The datasets built here take seconds (digits) to a minute (shapes): prepared on the spot.
  built_here = register_built_here(name)
  builder = data.opened(("tfds", name, data_dir), lambda: tfds.builder(name, data_dir=data_dir))
  ensure_prepared(builder, prepare=prepare or built_here)
  return builder


def ensure_prepared(builder, *, prepare: bool = False) -> None:
  """Raises DatasetNotPreparedError unless `builder` can be read; with `prepare`, prepares it.

  Under `tfds.testing.mock_data` nothing is on disk yet `as_dataset` is
  patched to serve fake examples, so the verdict comes from actually calling
  `as_dataset` (lazy: no data is read), which a real unprepared builder
  refuses with an AssertionError.
  """
  if builder.is_prepared():
    return
  if prepare:
    builder.download_and_prepare()
    return
  try:
    builder.as_dataset(split=next(iter(builder.info.splits), "train"))
  except AssertionError as e:
    raise errors.DatasetNotPreparedError(how_to_prepare(builder)) from e


def how_to_prepare(builder) -> str:
  root = os.fspath(builder.data_dir_root)
  config = builder.builder_config
  spec = f"{builder.name}/{config.name}" if config else builder.name
  build = f"tfds build {spec} --data_dir={root}"
  lines = [f"Dataset {builder.name!r} is not prepared: nothing found at {builder.data_dir}."]
  if builder.MANUAL_DOWNLOAD_INSTRUCTIONS:
    manual_dir = os.path.join(root, "downloads", "manual")
    if builder.name == "imagenet2012":
      what = "ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar (from https://image-net.org)"
    else:
      what = "the files named in the TFDS instructions below"
    lines += [
        f"It needs a manual download first. Put {what} into",
        f"  {manual_dir}/",
        "then run:",
        f"  {build}",
        f"TFDS instructions:\n{builder.MANUAL_DOWNLOAD_INSTRUCTIONS}",
    ]
  else:
    lines += [
        "Prepare it on a machine with network access (then copy the data_dir here):",
        f"  {build}",
        "or pass download=True to download and prepare it now.",
    ]
  return "\n".join(lines)


def check_split(builder, key: str, value: str, dataset: str, renamed=()) -> None:
  """`--config.<key>=value` names an existing, non-empty split of `builder`, by the split counts
  TFDS recorded when it prepared the data; TFDS parses slices and sums (`train[:10%]`,
  `train+test`). `renamed`: (name, TFDS split) pairs a reader maps, e.g. ("validation", "test").

  A builder with no recorded splits (`tfds.testing.mock_data` without metadata files accepts
  any) is left to the reader.
  """
  splits = builder.info.splits
  if not splits:
    return
  renamed = {name: split for name, split in renamed if name != split}
  tfds_split = renamed.get(value, value)
  shown = repr(value) if tfds_split == value else f"{value!r} (TFDS split {tfds_split!r})"
  available = ", ".join(
      [f"{name} ({info.num_examples} examples)" for name, info in splits.items()]
      + [f"{name} (= {split})" for name, split in renamed.items()]
  )
  try:
    count = splits[tfds_split].num_examples
  except (KeyError, ValueError) as e:  # TFDS's way of saying it is no such split or slice
    # TFDS puts what is wrong with a slice last ("percent slice boundaries should be in [-100,
    # 100]"), after a generic "Error parsing split" line.
    reason = str(e).strip("'\"").splitlines()[-1].split(" Got: ")[0].split(" See format")[0]
    reason = reason.rstrip(".")[:200]
    reason = "" if reason.startswith("Unknown split") else f" ({reason})"  # listed below
    raise errors.DataError(
        f"--config.{key}={shown} is not a split of {dataset!r}{reason}; available: "
        f"{available}, or slices of them such as train[:10%]."
    ) from None
  if count == 0:
    raise errors.DataError(
        f"--config.{key}={shown} of {dataset!r} has no examples; available: {available}."
    )
