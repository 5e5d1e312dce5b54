"""Image classification input pipelines (train and eval) for JAX training.

    it = train_iterator("imagenet2012", "train", global_batch_size=4096,
                        image_size=224, seed=0, start_step=step)
    batch = next(it)  # this process's rows only

Train batches: image float32 (b, S, S, 3) in [-1, 1]; labels float32
(b, num_classes) (one-hot, or multi-hot for a multi-label source, after smoothing / mixup /
cutmix); label int32 (b,), the example's (first) class. Eval labels are one-hot of `label`, or
multi-hot for a multi-label source (unsmoothed, unmixed; all 0 on padding rows). Eval batches
add mask float32 (b,): 1 for real examples, 0 for padding.
b = global_batch_size // process_count.

Determinism and exact resume: each process reads a fixed-order share of the
split. Epoch e is that share shuffled with a seed derived from (seed, process,
e), and examples are numbered globally (e * share_size + position). Every
random op is stateless, keyed by (seed, process, example number) or, for
mixup/cutmix, (seed, process, batch number). Resuming at step k therefore
jumps straight to the right epoch and skips the remaining examples while they
are still encoded bytes (at most one epoch of reading, no decoding), then
produces the same batches as the original run.

Each epoch reads the share's files in a new order, drawn from (seed, process, e)
(a folder's images are files, so its whole share is permuted), then shuffles
examples in a buffer of `shuffle_buffer` (big_vision: 250k for ImageNet), at most
the share (`host_shuffle_buffer`). Sources without a file list (mocked TFDS data)
are read in their fixed order. A source that can start reading at any example
(`ImageSource.read_from`: webdataset shards, through their index) is shuffled in
blocks instead: consecutive blocks of half the buffer (the whole share when the
buffer holds it), each permuted by a seed from (seed, process, e, block), the next
read while one is consumed, so about `shuffle_buffer` encoded images are held; a
resume then reads from the start of the block that holds its example, not the epoch.

Host input at pod scale: a process's share is the split divided by the input
shards (one per process by default), so it shrinks as the slice grows: ImageNet's
train[:99%] on a v5p-64 (8 hosts) is about 158k images per host, less than the
i1k recipe's 250k buffer. A buffer that holds the whole share is read whole
before each epoch's first batch and on each resume; the pipeline says so when it
happens. Every pipeline runs with `data.tf_data_options()` (a private thread pool
per pipeline as large as the host's cores, an autotune RAM budget).

A folder's images are checked where they are decoded, not at start (webdataset shards' when they
are indexed): a file that does not decode is warned about once, naming it, and its row of the
training batch is filled with a good row of the same batch (an eval row gets mask 0); with the
config's `bad_images="error"` (in its `read_options`) it raises a DataError naming it when its
batch is reached. Batch shapes and the example numbering stay those
of the complete share, so a resumed run still makes the same batches.
"""

import dataclasses
import math
from typing import Iterator

import jax
import numpy as np
import tensorflow as tf

from vit_jax import data
from vit_jax import errors
from vit_jax.data.image import augment as image_augment
from vit_jax.data.image import no_autograph
from vit_jax.data.image import sources

DatasetNotPreparedError = errors.DatasetNotPreparedError

_WARNED = set()  # the undecodable files this process has warned about: each once

# Tags that keep the seed streams of different purposes independent.
_EXAMPLE_SEEDS, _BATCH_SEEDS, _SHUFFLE_SEEDS, _FILE_ORDER_SEEDS = 0, 1, 2, 3


@dataclasses.dataclass(frozen=True)
class Augment:
  """Training augmentation. The defaults are a plain ImageNet recipe."""

  inception_crop: bool = True  # Else: resize the whole image to S x S.
  flip: bool = True
  randaugment: tuple[int, float] | None = None  # (num_layers, magnitude 0..20)
  mixup_alpha: float = 0.0
  cutmix_alpha: float = 0.0
  label_smoothing: float = 0.0


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
  name: str
  num_classes: int
  train_split: str | None  # Default splits; None if the dataset has none.
  eval_split: str | None


def dataset_info(
    dataset: str,
    *,
    data_dir: str | None = None,
    download: bool = False,
    read_options: data.ReadOptions | None = None,
) -> DatasetInfo:
  source = sources.open_source(
      dataset, data_dir=data_dir, download=download, read_options=read_options
  )
  return DatasetInfo(source.name, source.num_classes, source.train_split, source.eval_split)


def split_size(
    dataset: str,
    split: str | None = None,
    *,
    data_dir: str | None = None,
    download: bool = False,
    read_options: data.ReadOptions | None = None,
) -> int:
  """Examples in `split` (a slice such as "train[:10%]" counts its share); None: the train split."""
  source = sources.open_source(
      dataset, data_dir=data_dir, download=download, read_options=read_options
  )
  split = _split_or_default(split, source.train_split, source, "train")
  return _cardinality(source.read(split, 0, 1), f"{dataset} {split}")


def train_iterator(
    dataset: str,
    split: str | None = None,
    *,
    global_batch_size: int,
    image_size: int,
    seed: int,
    start_step: int = 0,
    data_dir: str | None = None,
    augment: Augment = Augment(),
    shuffle_buffer: int = 10_000,
    process_index: int | None = None,
    process_count: int | None = None,
    download: bool = False,
    read_options: data.ReadOptions | None = None,
) -> Iterator[dict[str, np.ndarray]]:
  """Infinite, shuffled, augmented batches of this process's share.

  Two calls with the same arguments yield identical batches, and
  `start_step=k` yields exactly batches k, k+1, ... of `start_step=0`.
  `split=None` uses the dataset's default train split.
  """
  process_index, process_count = _process(process_index, process_count)
  batch_size = _per_process_batch(global_batch_size, process_count)
  source = sources.open_source(
      dataset, data_dir=data_dir, download=download, read_options=read_options
  )
  split = _split_or_default(split, source.train_split, source, "train")
  share = source.read(split, process_index, process_count)
  share_size = _cardinality(share, f"{dataset} {split}")
  if share_size == 0:
    raise errors.DataError(f"{dataset} {split} has no examples for process {process_index}.")
  base_seed_2 = tf.constant([seed, process_index], tf.int64)
  read_files_shuffled = source.read_files_shuffled(split, process_index, process_count)
  read_from = source.read_from and source.read_from(split, process_index, process_count)
  buffer_size = host_shuffle_buffer(shuffle_buffer, share_size)
  first_epoch, skip_in_epoch = divmod(start_step * batch_size, share_size)
  if buffer_size < shuffle_buffer:
    print(
        f"note: shuffle_buffer={shuffle_buffer} is more than the {share_size:,} examples of input "
        f"shard {process_index} of {process_count} ({dataset} {split}): the buffer holds the "
        "whole shard, which each epoch and each resume reads before its first batch.",
        flush=True,
    )

  @no_autograph
  def epoch(e):
    if read_from is not None:  # the first epoch from where the run resumes, not replayed
      start = tf.where(e == first_epoch, tf.constant(skip_in_epoch, tf.int64), 0)
      shuffled = _block_shuffled(
          read_from,
          image_augment.fold_in(base_seed_2, _FILE_ORDER_SEEDS, e),
          image_augment.fold_in(base_seed_2, _SHUFFLE_SEEDS, e),
          share_size if buffer_size == share_size else max(1, buffer_size // 2),
          start,
      )
      return shuffled.enumerate(start).map(no_autograph(lambda i, ex: (e * share_size + i, ex)))
    if read_files_shuffled is None:
      examples = share
    else:
      examples = read_files_shuffled(image_augment.fold_in(base_seed_2, _FILE_ORDER_SEEDS, e))
    shuffle_seed = tf.random.stateless_uniform(
        [],
        image_augment.fold_in(base_seed_2, _SHUFFLE_SEEDS, e),
        minval=None,
        maxval=None,
        dtype=tf.int64,
    )
    shuffled = examples.shuffle(buffer_size, seed=shuffle_seed, reshuffle_each_iteration=False)
    return shuffled.enumerate().map(no_autograph(lambda i, ex: (e * share_size + i, ex)))

  @no_autograph
  def preprocess(index, example):
    seed_2 = image_augment.fold_in(base_seed_2, _EXAMPLE_SEEDS, index)
    crop_seed_2, flip_seed_2, randaug_seed_2 = tf.unstack(
        tf.random.experimental.stateless_split(seed_2, 3)
    )
    if augment.inception_crop:
      image = image_augment.decode_and_inception_crop(example["image"], crop_seed_2)
    else:
      image = image_augment.decode(example["image"])
    image_SxSx3 = image_augment.resize(image, [image_size, image_size])
    image_SxSx3.set_shape([image_size, image_size, 3])
    if augment.flip:
      image_SxSx3 = image_augment.random_flip(image_SxSx3, flip_seed_2)
    if augment.randaugment:
      num_layers, magnitude = augment.randaugment
      image_SxSx3 = image_augment.randaugment(image_SxSx3, num_layers, magnitude, randaug_seed_2)
    preprocessed = {
        "image": image_augment.normalize(image_SxSx3),
        "label": tf.cast(example["label"], tf.int32),
        "index": index,
    }
    if source.multi_label:  # after the shuffle buffer, which keeps the short class lists
      preprocessed["targets"] = image_augment.multi_hot(
          example["label"], example["labels"], source.num_classes, labels_alone=source.labels_alone
      )
    if checked:
      preprocessed["bad_path"] = tf.constant("")
    return preprocessed

  @no_autograph
  def undecodable(index, example):
    row = {
        "image": tf.zeros([image_size, image_size, 3], tf.float32),
        "label": tf.cast(example["label"], tf.int32),
        "index": index,
        "bad_path": example["path"],
    }
    if source.multi_label:
      row["targets"] = tf.zeros([source.num_classes], tf.float32)
    return row

  @no_autograph
  def mix(batch):
    if checked:
      batch = _fill_bad_rows(batch)
    if source.multi_label:
      labels_bxC = image_augment.smooth(batch["targets"], augment.label_smoothing)
    else:
      labels_bxC = image_augment.smooth_one_hot(
          batch["label"], source.num_classes, augment.label_smoothing
      )
    # Batches start at multiples of batch_size in the global numbering.
    batch_seed_2 = image_augment.fold_in(base_seed_2, _BATCH_SEEDS, batch["index"][0] // batch_size)
    images_bxSxSx3, labels_bxC = image_augment.mix_batch(
        batch["image"], labels_bxC, batch_seed_2, augment.mixup_alpha, augment.cutmix_alpha
    )
    mixed = {"image": images_bxSxSx3, "labels": labels_bxC, "label": batch["label"]}
    if checked:
      mixed["bad_path"] = batch["bad_path"]
    return mixed

  checked = "path" in share.element_spec  # a folder's files, checked as they are decoded
  ds = tf.data.Dataset.counter(first_epoch).flat_map(epoch)
  if read_from is None:
    ds = ds.skip(skip_in_epoch)  # Still encoded bytes here, so skipping is cheap.
  ds = _decode(ds, preprocess, undecodable if checked else None)
  ds = ds.batch(batch_size, drop_remainder=True)
  ds = ds.map(mix, num_parallel_calls=tf.data.AUTOTUNE)
  ds = ds.with_options(data.tf_data_options()).prefetch(tf.data.AUTOTUNE)
  return _checked_batches(ds.as_numpy_iterator(), read_options and read_options.bad_images)


def _block_shuffled(read_from, file_seed_2, shuffle_seed_2, block_size: int, start):
  """The examples from `start` on of the epoch `read_from` reads in `file_seed_2`'s file order,
  shuffled within consecutive blocks of `block_size`, each permuted by a seed from
  `shuffle_seed_2` and its number. Starting inside a block reads from that block's first example;
  the next block is read while one is consumed, so two blocks of encoded images are held."""
  first_block = start // block_size
  blocks = read_from(file_seed_2, first_block * block_size).batch(block_size).prefetch(1)

  @no_autograph
  def permuted(number, block):
    n = tf.shape(block["label"])[0]
    order = tf.random.experimental.stateless_shuffle(
        tf.range(n), image_augment.fold_in(shuffle_seed_2, number)
    )
    return tf.data.Dataset.from_tensor_slices({k: tf.gather(v, order) for k, v in block.items()})

  shuffled = blocks.enumerate(first_block).flat_map(permuted)
  return shuffled.skip(start - first_block * block_size)


class EvalIterator:
  """One pass over a split: `num_batches` batches, the same on every process.

  `num_examples` counts the whole split (all processes); the padding rows
  that fill the last batches have mask 0.
  """

  def __init__(
      self, ds: tf.data.Dataset, num_examples: int, num_batches: int, bad_images: str | None = None
  ):
    self.num_examples = num_examples
    self.num_batches = num_batches
    self._it = _checked_batches(ds.as_numpy_iterator(), bad_images)

  def __iter__(self) -> "EvalIterator":
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    return next(self._it)


def eval_crop_fraction(inception_crop: bool, eval_view: str = "crop") -> float | None:
  """`eval_view` "crop": the view that matches training's, a central 87.5% crop after Inception
  crops, else the whole image (training then resizes the whole image; a crop would zoom eval by
  14%). "resize": None, the whole image squeezed to the square (`augment.eval_crop`)."""
  if eval_view == "resize":
    return None
  return 0.875 if inception_crop else 1.0


def eval_iterator(
    dataset: str,
    split: str | None = None,
    *,
    global_batch_size: int,
    image_size: int,
    data_dir: str | None = None,
    crop_fraction: float | None = 0.875,
    process_index: int | None = None,
    process_count: int | None = None,
    download: bool = False,
    read_options: data.ReadOptions | None = None,
) -> EvalIterator:
  """Every example of `split` exactly once, as central crops of the image
  resized to image_size / crop_fraction (crop_fraction=1: no border cut; None: the whole image
  resized to image_size x image_size)."""
  process_index, process_count = _process(process_index, process_count)
  batch_size = _per_process_batch(global_batch_size, process_count)
  source = sources.open_source(
      dataset, data_dir=data_dir, download=download, read_options=read_options
  )
  split = _split_or_default(split, source.eval_split, source, "eval")
  name = f"{dataset} {split}"
  whole_split = source.read(split, 0, 1)
  num_examples = _cardinality(whole_split, name)
  # With fewer examples than processes the last shares are empty, which TFDS
  # refuses to read; such a process only yields padding.
  if process_index < num_examples:
    share = source.read(split, process_index, process_count)
  else:
    share = whole_split.take(0)
  share_size = _cardinality(share, name)
  # Shares are sized like tfds.even_splits: process 0's is the largest.
  largest_share = _cardinality(source.read(split, 0, process_count), name)
  num_batches = math.ceil(largest_share / batch_size)

  @no_autograph
  def preprocess(example):
    image_SxSx3 = image_augment.eval_crop(example["image"], image_size, crop_fraction)
    label = tf.cast(example["label"], tf.int32)
    if source.multi_label:  # every class of the example, as big_vision scores prec@1 against
      labels_C = image_augment.multi_hot(
          example["label"], example["labels"], source.num_classes, labels_alone=source.labels_alone
      )
    else:
      labels_C = tf.one_hot(label, source.num_classes, dtype=tf.float32)
    row = {
        "image": image_augment.normalize(image_SxSx3),
        "label": label,
        "labels": labels_C,
        "mask": tf.constant(1.0, tf.float32),
    }
    if checked:
      row["bad_path"] = tf.constant("")
    return row

  @no_autograph
  def padding(path):
    row = {
        "image": tf.zeros([image_size, image_size, 3], tf.float32),
        "label": tf.constant(0, tf.int32),
        "labels": tf.zeros([source.num_classes], tf.float32),
        "mask": tf.constant(0.0, tf.float32),
    }
    if checked:
      row["bad_path"] = path
    return row

  checked = "path" in share.element_spec  # a folder's files, checked as they are decoded
  num_padding = num_batches * batch_size - share_size
  assert num_padding >= 0, (num_padding, share_size, largest_share)

  undecodable = no_autograph(lambda example: padding(example["path"]))  # not scored
  ds = _decode(share, preprocess, undecodable if checked else None)
  padding_rows = tf.data.Dataset.from_tensors(padding(tf.constant(""))).repeat(num_padding)
  ds = ds.concatenate(padding_rows)
  ds = ds.batch(batch_size, drop_remainder=True)
  ds = ds.with_options(data.tf_data_options()).prefetch(tf.data.AUTOTUNE)
  bad_images = read_options and read_options.bad_images
  return EvalIterator(ds, num_examples=num_examples, num_batches=num_batches, bad_images=bad_images)


def _decode(ds: tf.data.Dataset, preprocess, undecodable) -> tf.data.Dataset:
  """`ds.map(preprocess)`; with `undecodable`, an element whose preprocess fails (its image does
  not decode) becomes `undecodable(element)` instead, in its place.

  Each element is its own one-element dataset whose error `ignore_errors` drops, followed by the
  `undecodable` row, of which `take(1)` keeps the first. Unlike `ignore_errors` on the whole
  stream (which drops the element), every position keeps a row, so the example numbering, and
  with it exact resume, stays that of the complete share; the interleave is deterministic
  (one element per inner dataset), so the order is the input's. No image is decoded twice.
  """
  if undecodable is None:
    return ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)

  @no_autograph
  def one(*element):
    decoded = tf.data.Dataset.from_tensors(element).map(preprocess).ignore_errors()
    return decoded.concatenate(tf.data.Dataset.from_tensors(element).map(undecodable)).take(1)

  return ds.interleave(
      one,
      cycle_length=tf.data.AUTOTUNE,
      block_length=1,
      num_parallel_calls=tf.data.AUTOTUNE,
      deterministic=True,
  )


def _fill_bad_rows(batch: dict) -> dict:
  """Each row whose image did not decode takes a good row of the same batch (the k-th bad row the
  k-th good one, cyclically), so the batch keeps its size and, being a function of the same
  examples, is the same on resume. A batch without a good row is left as it is
  (`_checked_batches` refuses it)."""
  bad_b = tf.strings.length(batch["bad_path"]) > 0
  rows = tf.range(tf.shape(bad_b)[0])
  good_g = tf.concat([tf.boolean_mask(rows, ~bad_b), [0]], axis=0)  # never empty
  num_good = tf.shape(good_g)[0] - 1
  kth_bad_b = tf.cumsum(tf.cast(bad_b, tf.int32)) - 1
  take_b = tf.where(
      bad_b & (num_good > 0), tf.gather(good_g, kth_bad_b % tf.maximum(num_good, 1)), rows
  )
  # 'index' stays: the batch's mixup seed is drawn from its first row's number.
  kept = ("index", "bad_path")
  return {k: v if k in kept else tf.gather(v, take_b) for k, v in batch.items()}


def _checked_batches(batches, bad_images: str | None):
  """`batches` without their 'bad_path' rows: each named file is refused (`bad_images` "error")
  or warned about once (skip, None)."""
  for batch in batches:
    bad_paths = [p.decode() for p in batch.pop("bad_path", ()) if p]
    for path in bad_paths:
      if path in _WARNED and bad_images != "error":
        continue
      # pylint: disable-next=g-import-not-at-top  (only folders have paths to report)
      from vit_jax.data.image import folder

      reason = folder.decode_problem(path) or "it failed to decode in the input pipeline"
      if bad_images == "error":
        raise errors.DataError(
            f"{path} is not a decodable image ({reason}); remove or re-encode it, or set "
            "--config.bad_images=skip. The checkpoints saved so far are kept."
        )
      folder.warn_skipped(path, reason)
      _WARNED.add(path)
    if bad_paths and "mask" not in batch and len(bad_paths) == len(batch["label"]):
      raise errors.DataError(
          f"none of the {len(bad_paths)} images of a training batch decodes ({bad_paths[0]}, "
          "...); remove or re-encode them."
      )
    yield batch


def _process(process_index: int | None, process_count: int | None) -> tuple[int, int]:
  if process_index is None:
    process_index = jax.process_index()
  if process_count is None:
    process_count = jax.process_count()
  if not 0 <= process_index < process_count:
    raise ValueError(f"process_index {process_index} not in [0, {process_count}).")
  return process_index, process_count


def _per_process_batch(global_batch_size: int, process_count: int) -> int:
  if global_batch_size % process_count:
    raise errors.ConfigError(
        f"global_batch_size {global_batch_size} is not divisible by the "
        f"{process_count} processes."
    )
  return global_batch_size // process_count


def _split_or_default(split: str | None, default: str | None, source, purpose: str) -> str:
  if split is not None:
    return split
  if default is None:
    raise errors.ConfigError(f"{source.name} has no default {purpose} split; pass split=.")
  return default


def _cardinality(ds: tf.data.Dataset, name: str) -> int:
  n = int(ds.cardinality())
  if n < 0:
    raise ValueError(f"Size of {name} is unknown; the pipeline needs it.")
  return n


def host_shuffle_buffer(shuffle_buffer: int, share_size: int) -> int:
  """The shuffle buffer of a process's share: `shuffle_buffer`, at most the share. A larger one
  would hold no more examples; to shuffle without reading the whole share first, choose a
  `shuffle_buffer` below it."""
  return min(shuffle_buffer, share_size)
