"""Dataset names -> readers of encoded images, one share per process; and the checks of an image
data config before training (`check_config`: the dataset opens, both splits read).

A source yields {'image': encoded bytes, 'label': int64} in a fixed order with known
cardinality (and 'path', string, for a folder's files, which are checked only where the pipeline
decodes them; and 'labels', int64 (n,), every class of a multi-label example, where the TFDS
dataset has a `labels` Sequence(ClassLabel) feature, as ImageNet-21k's does), and for training
the same examples with their files in a seeded order. Decoding is left to the pipeline, so
skipping examples on resume costs no JPEG decode.

Names: any TFDS image classification dataset ('imagenet2012', 'cifar10',
'imagenet_v2/matched-frequency', 'cifar10:3.0.2', ...) or 'folder:/path/to/root' for
root/<split>/<class>/*.jpg|png, listed once into an index (data/image/folder.py); a folder's eval
split is its test/, else validation/, else val/ folder; or 'hf:NAME_OR_DIR', a Hugging Face hub
dataset or a folder of one (data/hub.py), whose eval split is its validation split (its own or
held out of train), else its test split; or 'wds:PATTERN' for webdataset shards
(data/image/webdataset.py: tars of KEY.jpg with KEY.cls, splits named in the shards' names). The
datasets with default splits of their own, and those built here (prepared on first use), are the
rows of data/tfds_builders.py IMAGE_DATASETS.
"""

import dataclasses
import functools
from typing import Callable

import tensorflow as tf
import tensorflow_datasets as tfds

from vit_jax import data
from vit_jax import errors
from vit_jax.data import tfds_builders
from vit_jax.data.image import no_autograph

FOLDER_PREFIX = "folder:"
WDS_PREFIX = "wds:"

_FOLDER_EVAL_SPLITS = ("test", "validation", "val")
_FILES_READ_AT_ONCE = 16  # TFDS's default interleave cycle length.
_HUB_ROWS_READ_AT_ONCE = 64  # an hf: dataset's images fetched by one call into its Arrow table


@dataclasses.dataclass(frozen=True)
class ImageSource:
  name: str
  num_classes: int
  train_split: str | None
  eval_split: str | None
  # (split, process_index, process_count) -> that process's share of split.
  read: Callable[[str, int, int], tf.data.Dataset]
  # (split, process_index, process_count) -> None, or a function from a seed (int64 tensor [2])
  # to the same share with its files read in a seeded order; None: the source has no file
  # list (e.g. under tfds.testing.mock_data), so only the fixed order of `read` exists.
  read_files_shuffled: Callable[[str, int, int], Callable[[tf.Tensor], tf.data.Dataset] | None]
  # (config key, split) -> None, or a DataError naming the splits there are: the source checks
  # its own split names from what it already opened (TFDS's recorded counts, a folder's scan).
  check_split: Callable[[str, str], None]
  # split -> the class names present in it, where splits can disagree (folders); None for TFDS,
  # whose splits share one label list.
  classes_in: Callable[[str], tuple[str, ...]] | None = None
  # Whether examples also carry 'labels': all their classes (multi-hot training targets).
  multi_label: bool = False
  # Whether `labels` alone are the targets, without `label` (data/tfds_builders.py ImageDataset).
  labels_alone: bool = False
  # (split, process_index, process_count) -> a function from (seed, start) to
  # `read_files_shuffled`'s share for that seed from its example `start` on, reached without
  # reading the examples before it; None: the source can only be read from the start. A source
  # that has it is shuffled in blocks, so a resume reads one block (data/image/pipeline.py).
  read_from: Callable[[str, int, int], Callable[[tf.Tensor, tf.Tensor], tf.data.Dataset]] | None = (
      None
  )


def open_source(
    dataset: str,
    *,
    data_dir: str | None = None,
    download: bool = False,
    read_options: data.ReadOptions | None = None,
) -> ImageSource:
  """`read_options`: the config's (data.read_options), which hf: and wds: datasets need: the
  columns or the JSON field that hold images and labels, and whether an image that does not
  decode is left out or refused (`bad_images`)."""
  if dataset.startswith(FOLDER_PREFIX):
    return _folder_source(dataset[len(FOLDER_PREFIX) :])
  if dataset.startswith((data.HUB_PREFIX, WDS_PREFIX)) and read_options is None:
    raise ValueError(f"{dataset}: open_source needs the config's read_options.")
  if dataset.startswith(data.HUB_PREFIX):
    return _hub_source(dataset, data_dir, read_options)
  if dataset.startswith(WDS_PREFIX):
    return _webdataset_source(dataset[len(WDS_PREFIX) :], read_options)
  return _tfds_source(dataset, data_dir=data_dir, download=download)


def _folder_source(root: str) -> ImageSource:
  # pylint: disable-next=g-import-not-at-top  (TFDS runs skip the folder scanner)
  from vit_jax.data.image import folder as image_folder

  folder = data.opened(("folder", root), lambda: image_folder.ImageFolder.open(root))
  eval_split = next((s for s in _FOLDER_EVAL_SPLITS if s in folder.examples), None)
  return ImageSource(
      name=FOLDER_PREFIX + folder.root,
      num_classes=folder.num_classes,
      train_split="train" if "train" in folder.examples else None,
      eval_split=eval_split,
      read=folder.read,
      read_files_shuffled=folder.read_shuffled,
      check_split=functools.partial(_check_folder_split, folder),
      classes_in=folder.classes_in,
  )


def _check_folder_split(folder, key: str, split: str) -> None:
  name = FOLDER_PREFIX + folder.root
  if split not in folder.examples:
    raise errors.DataError(
        f"--config.{key}={split!r} is not a split of {name!r}; available: "
        f"{', '.join(sorted(folder.examples))} (its subfolders)."
    )
  if folder.num_examples(split) == 0:
    raise errors.DataError(f"--config.{key}={split!r} of {name!r} has no images.")


def _hub_source(dataset: str, cache_dir: str | None, read_options) -> ImageSource:
  """An hf: dataset's rows: each process reads every process_count-th row of a split (as a
  folder's files), and training permutes its whole share each epoch (the rows are read by
  index, so any order costs the same)."""
  # pylint: disable-next=g-import-not-at-top  (only hf: datasets load the `datasets` library)
  from vit_jax.data import hub

  images = data.opened(
      ("hf images", dataset, read_options, cache_dir),
      lambda: hub.open_images(dataset, read_options, cache_dir),
  )

  def read(split: str, process_index: int, process_count: int) -> tf.data.Dataset:
    share = images.rows(split)[process_index::process_count]
    return _hub_rows(images, split, share, len(share))

  def read_files_shuffled(split: str, process_index: int, process_count: int):
    share = images.rows(split)[process_index::process_count]

    def read_in_order(seed_2):
      order = tf.random.experimental.stateless_shuffle(tf.range(len(share)), seed_2)
      return _hub_rows(images, split, tf.gather(share, order), len(share))

    return read_in_order

  return ImageSource(
      name=dataset,
      num_classes=len(images.class_names),
      train_split="train" if "train" in images.splits else None,
      eval_split=images.eval_split,
      read=read,
      read_files_shuffled=read_files_shuffled,
      check_split=lambda key, split: images.rows(split, key=key),
  )


def _hub_rows(images, split: str, rows, count: int) -> tf.data.Dataset:
  """{'image', 'label'} of the `count` `rows` (int64, a tensor or array) of `split`, in that
  order: fetched _HUB_ROWS_READ_AT_ONCE at a time from the Arrow table (no image decoded)."""

  def fetch(rows_n):
    return images.fetch(split, rows_n.numpy())

  @no_autograph
  def fetch_op(rows_n):
    encoded_n, labels_n = tf.py_function(fetch, [rows_n], [tf.string, tf.int64])
    encoded_n.set_shape([None])
    labels_n.set_shape([None])
    return {"image": encoded_n, "label": labels_n}

  chunks = tf.data.Dataset.from_tensor_slices(rows).batch(_HUB_ROWS_READ_AT_ONCE)
  examples = chunks.map(fetch_op, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return examples.unbatch().apply(tf.data.experimental.assert_cardinality(count))


def _webdataset_source(pattern: str, read_options: data.ReadOptions) -> ImageSource:
  # pylint: disable-next=g-import-not-at-top  (only runs that name wds: index shards)
  from vit_jax.data.image import webdataset

  label_key = read_options.label_key
  shards = data.opened(
      ("wds", pattern, label_key), lambda: webdataset.Shards.open(pattern, label_key)
  )
  shards.check_images(read_options.bad_images)

  def read_files_shuffled(split: str, process_index: int, process_count: int):
    read_from = shards.read_from(split, process_index, process_count)
    return lambda seed_2: read_from(seed_2, tf.constant(0, tf.int64))

  return ImageSource(
      name=WDS_PREFIX + pattern,
      num_classes=shards.num_classes,
      train_split="train" if "train" in shards.splits else None,
      eval_split=shards.eval_split,
      read=shards.read,
      read_files_shuffled=read_files_shuffled,
      check_split=functools.partial(_check_webdataset_split, shards),
      read_from=shards.read_from,
  )


def _check_webdataset_split(shards, key: str, split: str) -> None:
  try:
    shards.num_examples(split)
  except errors.DataError as e:
    raise errors.DataError(f"--config.{key}={e}") from None


def _tfds_source(dataset: str, *, data_dir: str | None, download: bool) -> ImageSource:
  base_name = tfds_builders.base_name(dataset)
  if base_name not in tfds_builders.IMAGE_DATASETS:
    try:
      tfds.builder_cls(base_name)
    except tfds.core.DatasetNotFoundError as e:
      raise errors.ConfigError(
          f"Unknown dataset {dataset!r}. Known: {sorted(tfds_builders.IMAGE_DATASETS)}, any "
          f"other TFDS image classification dataset, or "
          f"'{FOLDER_PREFIX}/path/to/root' (root/<split>/<class>/*.jpg|png), or "
          f"'{WDS_PREFIX}/path/to/shards' (webdataset tars)."
      ) from e
  builder = tfds_builders.open_builder(dataset, data_dir=data_dir, prepare=download)
  features = builder.info.features
  feature_of = dict(features.items())
  row = tfds_builders.image_dataset(dataset)
  if not (
      isinstance(feature_of.get("image"), tfds.features.Image)
      and isinstance(feature_of.get(row.label_feature), tfds.features.ClassLabel)
  ):
    raise errors.ConfigError(
        f"{dataset!r} is not an image classification dataset: it needs an "
        f"'image' Image and a {row.label_feature!r} ClassLabel feature, got {features}."
    )
  labels_feature = feature_of.get(row.labels_feature)
  multi_label = isinstance(labels_feature, tfds.features.Sequence) and isinstance(
      labels_feature.feature, tfds.features.ClassLabel
  )

  @no_autograph
  def keep(ex):
    kept = {"image": ex["image"], "label": ex[row.label_feature]}
    if multi_label:
      kept["labels"] = ex[row.labels_feature]
    return kept

  def read(split: str, process_index: int, process_count: int) -> tf.data.Dataset:
    share = tfds.split_for_jax_process(
        split, process_index=process_index, process_count=process_count
    )
    ds = builder.as_dataset(
        split=share,
        shuffle_files=False,  # Fixed order; the pipeline shuffles with its own seed.
        decoders={"image": tfds.decode.SkipDecoding()},
        # No autocache: an eval that stops after eval_max_batches would leave TFDS's cache of a
        # small split half-read, and TF then warns on every eval.
        read_config=tfds.ReadConfig(skip_prefetch=True, try_autocache=False),
    )
    return ds.map(keep)

  def read_files_shuffled(split: str, process_index: int, process_count: int):
    share = tfds.split_for_jax_process(
        split, process_index=process_index, process_count=process_count
    )
    if builder.info.file_format != tfds.core.FileFormat.TFRECORD or not builder.info.splits:
      return None  # No record files to order (another format, or mocked data).
    instructions = builder.info.splits[share].file_instructions
    files = tf.constant([i.filename for i in instructions])
    skips = tf.constant([i.skip for i in instructions], tf.int64)
    takes = tf.constant([i.take for i in instructions], tf.int64)
    num_examples = sum(i.take for i in instructions)

    @no_autograph
    def parse(record):
      ex = features.deserialize_example(record, decoders={"image": tfds.decode.SkipDecoding()})
      return keep(ex)

    def read_in_order(seed_2):
      order = tf.random.experimental.stateless_shuffle(tf.range(len(instructions)), seed_2)
      pieces = tf.data.Dataset.from_tensor_slices(
          (tf.gather(files, order), tf.gather(skips, order), tf.gather(takes, order))
      )
      # Several files at once, as TFDS reads them; deterministic, so the order is the seed's.
      records = pieces.interleave(
          no_autograph(lambda f, skip, take: tf.data.TFRecordDataset(f).skip(skip).take(take)),
          cycle_length=_FILES_READ_AT_ONCE,
          num_parallel_calls=tf.data.AUTOTUNE,
          deterministic=True,
      )
      examples = records.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
      return examples.apply(tf.data.experimental.assert_cardinality(num_examples))

    return read_in_order

  return ImageSource(
      name=dataset,
      num_classes=features[row.label_feature].num_classes,
      train_split=row.train_split,
      eval_split=row.eval_split,
      read=read,
      read_files_shuffled=read_files_shuffled,
      multi_label=multi_label,
      labels_alone=row.labels_alone,
      check_split=lambda key, split: tfds_builders.check_split(builder, key, split, dataset),
  )


# ---- Checks of an image data config before training ----------------------------------------------


def check_config(config) -> None:
  """The image dataset `config.dataset` opens and both splits read. A folder's images are not
  decoded here: the pipeline checks each where it decodes it."""
  source = open_source(
      config.dataset,
      data_dir=config.data_dir,
      download=config.download,
      read_options=data.read_options(config),
  )
  for key in data.SPLIT_KEYS:
    _check_split(source, config.dataset, key, config[key] or getattr(source, key))
  if config.num_classes is not None and source.num_classes != config.num_classes:
    raise errors.DataError(
        f"{config.dataset!r} has {source.num_classes} classes (labels 0 to "
        f"{source.num_classes - 1}), not --config.num_classes={config.num_classes}: the labels "
        "are one-hot over the dataset's classes. Set it to the dataset's count, or leave it "
        "unset to read it from the dataset."
    )
  if source.classes_in is not None and not config.allow_class_mismatch:
    _check_classes_agree(config, source)


def check_split(config, dataset: str, split: str | None, *, key: str) -> int:
  """`split` of `dataset` (its default eval split when None) exists and holds examples, read
  with the run's data_dir; returns the dataset's class count. `key` is the config key that names
  the split (`--config.<key>`), for the error message."""
  source = open_source(
      dataset,
      data_dir=config.data_dir,
      download=config.download,
      read_options=data.read_options(config),
  )
  _check_split(source, dataset, key, split or source.eval_split)
  return source.num_classes


def _check_split(source, dataset: str, key: str, split: str | None):
  if split is None:
    raise errors.ConfigError(f"--config.{key} is unset and {dataset!r} has no default one; set it.")
  source.check_split(key, split)  # names the splits there are, with sizes
  try:  # and reading it: a folder's splits, or a TFDS split under mock_data
    ds = source.read(split, 0, 1)
  except errors.UserError:
    raise
  except (ValueError, KeyError) as e:  # TFDS's way of saying the split does not exist
    raise errors.DataError(
        f"--config.{key}={split!r} is not a split of {dataset!r} "
        f"({str(e).splitlines()[0][:200]}); choose an existing split."
    ) from e
  if int(ds.cardinality()) == 0:
    raise errors.DataError(f"--config.{key}={split!r} of {dataset!r} is empty.")
  # An unlabelled split (TFDS gives label -1, as in ImageNet's test split, whose labels were never
  # released) would train on nothing and score 0% without a word; its first example tells.
  first = next(iter(ds.take(1)))
  if int(first["label"]) < 0:
    raise errors.DataError(
        f"--config.{key}={split!r} of {dataset!r} has no labels (label -1): nothing to train on "
        "or score. Choose a labelled split (for ImageNet: validation, or train[99%:] held out); "
        "python -m vit_jax.predict classifies unlabelled images."
    )


def _check_classes_agree(config, source) -> None:
  """The train and eval splits must hold the same classes: a class only in the eval split is
  one the model never learns, and one only in training is never scored."""
  chosen = {key: config[key] or getattr(source, key) for key in data.SPLIT_KEYS}
  classes = {key: set(source.classes_in(split)) for key, split in chosen.items()}
  train, evaluated = classes["train_split"], classes["eval_split"]
  if train == evaluated:
    return
  parts = []
  for key, other in (("eval_split", "train_split"), ("train_split", "eval_split")):
    only = sorted(classes[key] - classes[other])
    if only:
      parts.append(f"{chosen[key]!r} has {', '.join(only)}, which {chosen[other]!r} lacks")
  raise errors.DataError(
      f"the classes of --config.train_split={chosen['train_split']!r} and "
      f"--config.eval_split={chosen['eval_split']!r} of {config.dataset} differ: "
      f"{'; '.join(parts)}. Give both splits the same class folders, or set "
      "--config.allow_class_mismatch=true to train and score them as they are."
  )
