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
import tarfile

from vit_jax import data
from vit_jax import errors
from vit_jax import startup


@dataclasses.dataclass(frozen=True)
class ImageDataset:
  train_split: str | None  # the default training split; None: evaluation only
  eval_split: str  # the default eval split
  # The module under vit_jax/data/image whose import registers the dataset's TFDS builder: made
  # from what is on this machine (no download), it is prepared on first use. None: TFDS's own.
  built_here: str | None = None
  # The features holding an example's class (ClassLabel) and, on multi-label data, all its
  # classes (Sequence(ClassLabel)); `labels_alone`: score against `labels` without `label`, and
  # leave out examples with none (ReaL's relabelled validation: the original label is not one of
  # its labels where the raters rejected it).
  label_feature: str = "label"
  labels_feature: str = "labels"
  labels_alone: bool = False


IMAGE_DATASETS = {
    "imagenet2012": ImageDataset("train", "validation"),
    "imagenet_v2": ImageDataset(None, "test"),  # Evaluation-only re-collection of ImageNet val.
    # ImageNet's validation images with the ReaL labels (Beyer et al. 2020), evaluation only.
    "imagenet2012_real": ImageDataset(
        None,
        "validation",
        label_feature="original_label",
        labels_feature="real_label",
        labels_alone=True,
    ),
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
  startup.import_tensorflow()  # without Keras, before TFDS imports it
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
    download_and_prepare(builder)
    return
  try:
    builder.as_dataset(split=next(iter(builder.info.splits), "train"))
  except AssertionError as e:
    raise errors.DatasetNotPreparedError(how_to_prepare(builder)) from e


def how_to_prepare(builder) -> str:
  """Says where the data is missing and the command that prepares it: `python -m vit_jax.prepare`
  with this command line's config flags (vit_jax/prepare.py), which works on the base install
  (`tfds build` needs Apache Beam)."""
  from vit_jax.config import args as config_args  # pylint: disable=g-import-not-at-top

  root = os.fspath(builder.data_dir_root)
  is_image = "image" in builder.info.features  # else a text dataset, whose config we cannot guess
  command = config_args.prepare_command(dataset=builder.name if is_image else None, data_dir=root)
  lines = [f"Dataset {builder.name!r} is not prepared: nothing found at {builder.data_dir}."]
  if builder.MANUAL_DOWNLOAD_INSTRUCTIONS:
    lines += [
        f"It needs a manual download first: put {manual_files(builder.name)} into",
        f"  {default_manual_dir(root)}/  (or pass --manual_dir=DIR to the command below)",
        "then run:",
        f"  {command}",
        "(docs/imagenet.md)" if builder.name.startswith("imagenet2012") else "",
    ]
  else:
    lines += [
        "Prepare it with (it downloads; on a machine without network, run it elsewhere and copy",
        f"the data_dir here): {command}",
        "or set --config.download=true to download and prepare it now.",
    ]
  return "\n".join(line for line in lines if line)


def default_manual_dir(data_dir_root: str) -> str:
  """Where TFDS looks for a manual download: DATA_DIR/downloads/manual."""
  return os.path.join(data_dir_root, "downloads", "manual")


def manual_files(name: str) -> str:
  """The files a dataset's manual download must provide, in words."""
  if base_name(name) in ("imagenet2012", "imagenet2012_real"):
    tars = "ILSVRC2012_img_val.tar"
    if base_name(name) == "imagenet2012":
      tars = "ILSVRC2012_img_train.tar and " + tars
    return f"{tars} (from https://image-net.org)"
  return "the files its TFDS instructions name"


def prepare(name: str, *, data_dir: str | None, manual_dir: str | None = None) -> bool:
  """Downloads (or reads from `manual_dir`) and prepares TFDS dataset `name` unless it is
  prepared; returns whether it prepared it now. TFDS writes into an `incomplete.*` folder and
  renames it when done, so an interrupted run leaves nothing a run could read; rerun it."""
  startup.import_tensorflow()  # without Keras, before TFDS imports it
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  register_built_here(name)
  builder = tfds.builder(name, data_dir=data_dir)
  if builder.is_prepared():
    return False
  download_and_prepare(builder, manual_dir)
  return True


# TFDS tries a URL 10 times, over about 3 minutes, when the network does not answer; a download
# here tries it DOWNLOAD_RETRIES + 1 times (about 3 s of waits) and then says so in one line: a
# network that does not answer that soon is not there, and waiting minutes to learn it helps no
# one. (A dropped transfer is another matter: TFDS does not resume it either way.)
DOWNLOAD_RETRIES = 4


def download_and_prepare(builder, manual_dir: str | None = None) -> None:
  """`builder.download_and_prepare()`, a manual download read from `manual_dir` (default
  DATA_DIR/downloads/manual); a failure is one line: a download that did not get through a
  DownloadFailedError naming the URL and what to do instead, a missing manual download a
  DatasetNotPreparedError naming the files, a damaged one a DataError."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from tensorflow_datasets.core.download import downloader  # pylint: disable=g-import-not-at-top

  downloader.MAX_RETRIES = DOWNLOAD_RETRIES  # read by each download as it starts
  name, root = builder.name, os.fspath(builder.data_dir_root)
  manual_dir = manual_dir or default_manual_dir(root)
  try:
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir)
    )
  except (OSError, tarfile.ReadError) as e:  # no network, or a damaged download
    url = _url_of(e)
    if url is not None:
      from vit_jax.config import args as config_args  # pylint: disable=g-import-not-at-top

      command = config_args.prepare_command(dataset=name, data_dir=root)
      raise errors.DownloadFailedError(
          f"could not download {name!r}: {url} did not answer in {DOWNLOAD_RETRIES + 1} tries "
          f"({_innermost(e)}). Prepare it where the network reaches it ({command}) and copy "
          f"{root} here, or fix the network (a proxy: HTTPS_PROXY)."
      ) from e
    raise errors.DataError(
        f"could not prepare {name!r}: {str(e).splitlines()[0][:200]}. Check the files in "
        f"{manual_dir}/, or prepare it on a machine with network access and copy {root} here."
    ) from e
  except AssertionError as e:  # TFDS's way of saying the manual download is missing
    if not builder.MANUAL_DOWNLOAD_INSTRUCTIONS:
      raise
    raise errors.DatasetNotPreparedError(
        f"{name!r} needs a manual download: put {manual_files(name)} into {manual_dir}/ "
        f"(or pass --manual_dir=DIR); TFDS said: {str(e).splitlines()[0][:200]}"
    ) from e


def _url_of(exc: BaseException) -> str | None:
  """The URL of the request that failed in `exc` or an exception it was raised from (requests
  names it), or None when no download failed."""
  seen = set()
  while exc is not None and id(exc) not in seen:
    seen.add(id(exc))
    url = getattr(getattr(exc, "request", None), "url", None)
    if url:
      return url
    exc = exc.__cause__ or exc.__context__
  return None


def _innermost(exc: BaseException) -> str:
  """The first exception `exc` was raised from, as "Type: its first line"."""
  seen = set()
  while id(exc) not in seen and (exc.__cause__ or exc.__context__) is not None:
    seen.add(id(exc))
    exc = exc.__cause__ or exc.__context__
  lines = str(exc).strip().splitlines()
  return f"{type(exc).__name__}: {lines[0][:160] if lines else ''}".rstrip(": ")


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
