"""TFDS builders for every data family (image and text): opened, checked prepared, split-checked.

    builder = tfds_builders.open_builder("cifar10", data_dir=None)

`open_builder` is the one place a TFDS builder is constructed. Inside `data.opened_once()` (a
training run) each (name, data_dir) is constructed once, so the config checks, the input pipeline
and the evaluators read the same builder instead of opening the dataset again to validate it.
Outside it every call constructs afresh (a builder holds its metadata, not the data).
"""

import os

from vit_jax import data
from vit_jax import errors


def open_builder(name: str, *, data_dir: str | None, prepare: bool = False):
  """The TFDS builder of `name` ('cifar10', 'imagenet_v2/matched-frequency', 'lm1b:1.1.0'),
  prepared: with `prepare` it is downloaded or built now when missing, else a
  DatasetNotPreparedError says how to prepare it."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top  (text runs skip TFDS)

  builder = data.opened(("tfds", name, data_dir), lambda: tfds.builder(name, data_dir=data_dir))
  ensure_prepared(builder, prepare=prepare)
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
