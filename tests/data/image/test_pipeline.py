"""Train/eval pipelines: determinism, exact resume, eval coverage, errors, mocked TFDS."""

import collections
import itertools
import re
import types

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import helpers
from tests import tiny_configs as configs
from vit_jax.data import tfds_builders
from vit_jax.data.image import pipeline

_AUG = pipeline.Augment(randaugment=(2, 9), mixup_alpha=0.2, cutmix_alpha=1.0, label_smoothing=0.1)


def _train(digits_dir, **kwargs):
  args = dict(
      dataset="sklearn_digits",
      split="train[:40]",
      global_batch_size=16,
      image_size=16,
      seed=3,
      data_dir=digits_dir,
      augment=_AUG,
      process_index=0,
      process_count=1,
  )
  return pipeline.train_iterator(**{**args, **kwargs})


def _take(it, n):
  return list(itertools.islice(it, n))


def _assert_same_batches(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    assert x.keys() == y.keys()
    for k in x:
      np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def test_train_batches_shapes_and_ranges(digits_dir):
  (batch,) = _take(_train(digits_dir), 1)
  assert set(batch) == {"image", "labels", "label"}
  assert batch["image"].shape == (16, 16, 16, 3) and batch["image"].dtype == np.float32
  assert -1.0 <= batch["image"].min() and batch["image"].max() <= 1.0
  assert batch["labels"].shape == (16, 10) and batch["labels"].dtype == np.float32
  np.testing.assert_allclose(batch["labels"].sum(1), 1.0, rtol=1e-5)
  assert batch["label"].shape == (16,) and batch["label"].dtype == np.int32
  assert set(batch["label"]) <= set(range(10))


def test_train_is_deterministic_and_seeded(digits_dir):
  first = _take(_train(digits_dir), 3)
  _assert_same_batches(first, _take(_train(digits_dir), 3))
  other = _take(_train(digits_dir, seed=4), 1)[0]
  assert not np.array_equal(first[0]["image"], other["image"])


def test_train_resumes_exactly_across_epochs(digits_dir):
  # 40 examples, 16 per batch: batches 4..6 start inside epoch 1 and cross into epoch 2.
  fresh = _take(_train(digits_dir), 7)
  _assert_same_batches(fresh[4:], _take(_train(digits_dir, start_step=4), 3))


def test_train_epochs_cover_share_and_reshuffle(digits_dir):
  plain = pipeline.Augment(inception_crop=False, flip=False)
  batches = _take(_train(digits_dir, global_batch_size=8, augment=plain), 10)
  # No augmentation: 5 batches = one epoch of the 40 examples, each exactly once.
  epochs = [np.concatenate([b["image"] for b in batches[i : i + 5]]) for i in (0, 5)]
  rows = [sorted(row.tobytes() for row in epoch) for epoch in epochs]
  assert rows[0] == rows[1] and len(set(rows[0])) > 30
  assert not np.array_equal(epochs[0], epochs[1])  # Epoch order differs.


@pytest.fixture(scope="module")
def sharded_digits_dir(tmp_path_factory):
  """The digits dataset written as 40 files (about 36 examples each)."""
  data_dir = str(tmp_path_factory.mktemp("tfds_digits_sharded"))
  builder = tfds.builder("sklearn_digits", data_dir=data_dir)
  builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=40))
  assert builder.info.splits["train"].num_shards == 40
  return data_dir


def _epoch_orders(data_dir, num_epochs, **kwargs):
  """Each epoch's examples as positions in the split's file order (shuffle buffer 1: the order
  the files were read in)."""
  plain = pipeline.Augment(inception_crop=False, flip=False)
  size = pipeline.split_size("sklearn_digits", "train[:120]", data_dir=data_dir)
  batches = _take(
      _train(
          data_dir,
          split="train[:120]",
          augment=plain,
          global_batch_size=8,
          shuffle_buffer=1,
          **kwargs,
      ),
      num_epochs * size // 8,
  )
  rows = [row.tobytes() for b in batches for row in b["image"]]
  file_order = [
      row.tobytes()
      for a, b in zip(_file_starts(data_dir), _file_starts(data_dir)[1:] + [120])
      for batch in _fixed_order(data_dir, f"train[{a}:{b}]")
      for row, mask in zip(batch["image"], batch["mask"])
      if mask
  ]
  position = {row: i for i, row in enumerate(file_order)}
  assert len(position) == size == 120
  return [[position[r] for r in rows[e * size : (e + 1) * size]] for e in range(num_epochs)]


def _file_starts(data_dir):
  """Where each file of the train split starts, among the first 120 examples."""
  info = tfds.builder("sklearn_digits", data_dir=data_dir).info.splits["train"]
  return [int(i) for i in np.cumsum([0] + info.shard_lengths) if i < 120]


def _fixed_order(data_dir, split):
  """`split` (here: within one file) in the file's own order."""
  return pipeline.eval_iterator(
      "sklearn_digits",
      split,
      global_batch_size=8,
      image_size=16,
      data_dir=data_dir,
      crop_fraction=1.0,
      process_index=0,
      process_count=1,
  )


def test_files_are_read_in_a_new_order_every_epoch(sharded_digits_dir):
  epochs = _epoch_orders(sharded_digits_dir, 3)
  for order in epochs:
    assert sorted(order) == list(range(120))  # every example once
  assert epochs[0] != list(range(120))  # not the files' fixed order
  assert len({tuple(order) for order in epochs}) == 3
  # Each epoch begins with the first example of one of the files the split spans.
  file_starts = set(_file_starts(sharded_digits_dir))
  starts = {order[0] for order in epochs}
  assert len(file_starts) >= 3 and starts <= file_starts and len(starts) > 1


def test_train_resumes_exactly_with_shuffled_files(sharded_digits_dir):
  # 120 examples, 8 a batch: batches 20..24 are inside epoch 1, 30..32 cross into epoch 2.
  fresh = _take(_train(sharded_digits_dir, split="train[:120]", global_batch_size=8), 33)
  for start in (20, 30):
    resumed = _take(
        _train(sharded_digits_dir, split="train[:120]", global_batch_size=8, start_step=start),
        33 - start,
    )
    _assert_same_batches(fresh[start:], resumed)


def test_two_processes_get_different_halves(digits_dir):
  plain = pipeline.Augment(inception_crop=False, flip=False)
  per_process = [
      _take(
          _train(digits_dir, augment=plain, global_batch_size=8, process_index=p, process_count=2),
          5,
      )
      for p in (0, 1)
  ]
  for batches in per_process:
    assert batches[0]["image"].shape == (4, 16, 16, 3)
  seen = [{row.tobytes() for b in batches for row in b["image"]} for batches in per_process]
  assert len(seen[0]) == len(seen[1]) == 20  # 20 = this process's share, each seen once.
  assert not seen[0] & seen[1]


def test_eval_covers_split_exactly_once_across_two_processes(digits_dir):
  # 355 test examples -> shares of 178 and 177 -> 6 batches of 32 on both.
  per_process = [
      pipeline.eval_iterator(
          "sklearn_digits",
          global_batch_size=64,
          image_size=32,
          data_dir=digits_dir,
          crop_fraction=1.0,
          process_index=p,
          process_count=2,
      )
      for p in (0, 1)
  ]
  batches = [list(it) for it in per_process]
  assert [len(b) for b in batches] == [6, 6] == [it.num_batches for it in per_process]
  assert per_process[0].num_examples == 355
  real = collections.Counter()
  for b in itertools.chain(*batches):
    assert b["image"].shape == (32, 32, 32, 3) and b["mask"].dtype == np.float32
    np.testing.assert_array_equal(b["labels"].sum(1), b["mask"])
    for image, label, mask in zip(b["image"], b["label"], b["mask"]):
      if mask:
        real[(np.round((image + 1) * 127.5).astype(np.uint8).tobytes(), int(label))] += 1
  assert sum(real.values()) == 355
  # crop_fraction=1 at native size is lossless, so compare with the raw split.
  ds = tfds.builder("sklearn_digits", data_dir=digits_dir).as_dataset(split="test")
  expected = collections.Counter(
      (ex["image"].tobytes(), int(ex["label"])) for ex in tfds.as_numpy(ds)
  )
  assert real == expected


def test_eval_pads_short_and_empty_shares(digits_dir):
  # 3 examples over 4 processes: shares 1, 1, 1, 0 -> one batch of 2 everywhere.
  masks = []
  for p in range(4):
    it = pipeline.eval_iterator(
        "sklearn_digits",
        "test[:3]",
        global_batch_size=8,
        image_size=8,
        data_dir=digits_dir,
        process_index=p,
        process_count=4,
    )
    assert it.num_examples == 3 and it.num_batches == 1
    masks += [b["mask"] for b in it]
  np.testing.assert_array_equal(masks, [[1, 0], [1, 0], [1, 0], [0, 0]])


@pytest.mark.parametrize("dataset,size,classes", [("imagenet2012", 224, 1000), ("cifar10", 32, 10)])
def test_mocked_tfds_pipelines(dataset, size, classes):
  with tfds.testing.mock_data(num_examples=6):
    (batch,) = _take(
        pipeline.train_iterator(
            dataset,
            global_batch_size=4,
            image_size=size,
            seed=0,
            augment=_AUG,
            process_index=0,
            process_count=1,
        ),
        1,
    )
    assert batch["image"].shape == (4, size, size, 3)
    assert batch["labels"].shape == (4, classes)
    evals = list(
        pipeline.eval_iterator(
            dataset, global_batch_size=4, image_size=size, process_index=0, process_count=1
        )
    )
  assert len(evals) == 2 and evals[0]["image"].shape == (4, size, size, 3)
  assert sum(b["mask"].sum() for b in evals) == 6


def test_not_prepared_dataset_says_how_to_build(tmp_path):
  # vit_jax.prepare, not `tfds build`: that needs Apache Beam, which the base install lacks.
  command = "python -m vit_jax.prepare --config=configs/vit.py:dataset=cifar10"
  command += f" --config.data_dir={tmp_path}"
  with pytest.raises(pipeline.DatasetNotPreparedError, match=re.escape(command)) as e:
    pipeline.train_iterator(
        "cifar10",
        global_batch_size=4,
        image_size=32,
        seed=0,
        data_dir=str(tmp_path),
        process_index=0,
        process_count=1,
    )
  assert "--config.download=true" in str(e.value) and "tfds build" not in str(e.value)


def test_imagenet_not_prepared_names_manual_tars(tmp_path):
  with pytest.raises(pipeline.DatasetNotPreparedError) as e:
    pipeline.dataset_info("imagenet2012", data_dir=str(tmp_path))
  message = str(e.value)
  assert f"{tmp_path}/downloads/manual" in message
  assert "ILSVRC2012_img_train.tar" in message and "docs/imagenet.md" in message
  assert "python -m vit_jax.prepare --config=configs/vit.py:dataset=imagenet2012" in message


def test_unknown_dataset_lists_known_names():
  with pytest.raises(ValueError, match="imagenet2012.*folder:"):
    pipeline.dataset_info("no_such_dataset")


def test_default_splits(digits_dir):
  info = pipeline.dataset_info("sklearn_digits", data_dir=digits_dir)
  assert (info.num_classes, info.train_split, info.eval_split) == (10, "train", "test")
  imagenet = tfds_builders.image_dataset("imagenet2012")
  assert (imagenet.train_split, imagenet.eval_split) == ("train", "validation")
  # Another TFDS dataset (any version or config) falls back on train and test.
  assert tfds_builders.image_dataset("caltech101:3.0.2") == tfds_builders.OTHER_IMAGE_DATASET


def test_imagenet_epochs_count_the_examples_of_the_split_trained_on():
  config = configs.load("vit", "dataset=imagenet2012")
  # TFDS's imagenet2012 train split holds 1,281,167 images (TFDS catalog); TFDS's own slicing
  # rule says how many of them the configured split takes.
  (absolute,) = tfds.core.ReadInstruction.from_spec(config.train_split).to_absolute(
      {"train": types.SimpleNamespace(num_examples=1_281_167)}
  )
  trained_on = absolute.to - (absolute.from_ or 0)
  assert config.train_split == "train[:99%]" and trained_on == 1_268_355
  assert config.total_steps == 90 * trained_on // config.batch_size
  assert config.shuffle_buffer == 250_000  # big_vision/configs/vit_s16_i1k.py:49
  sweep = helpers.repo_file("experiments/sweeps/vit_i1k_paper.py")
  # Each run's budget is whole epochs at the batch of the recipe its config names.
  for run in sweep.get_sweep().runs:
    variant_config = configs.load("vit", run["config"].split(":", 1)[1])
    budgets = [e * trained_on // variant_config.batch_size for e in sweep.EPOCHS]
    assert run["total_steps"] in budgets, run


def test_the_shuffle_buffer_is_at_most_the_shard_and_says_so(digits_dir, capsys):
  source = pipeline.sources.open_source("sklearn_digits", data_dir=digits_dir)
  # train[:40] in 3 input shards: 14, 13 and 13 examples (TFDS's even split).
  shares = [int(source.read("train[:40]", index, 3).cardinality()) for index in range(3)]
  assert shares == [14, 13, 13]
  (batch,) = _take(
      _train(digits_dir, global_batch_size=15, shuffle_buffer=1_000, process_count=3), 1
  )
  assert batch["image"].shape[0] == 5
  assert "shuffle_buffer=1000 is more than the 14 examples of input shard 0 of 3" in (
      capsys.readouterr().out
  )
  _take(_train(digits_dir, global_batch_size=15, shuffle_buffer=14, process_count=3), 1)
  assert "shuffle_buffer" not in capsys.readouterr().out  # a buffer within the shard: no note


def test_the_i1k_recipe_on_a_v5p_64_buffers_at_most_a_hosts_share():
  config = configs.load("vit", "dataset=imagenet2012,variant=L/16")
  assert (config.target_topology, config.shuffle_buffer) == ("v5p-64", 250_000)
  hosts = 8  # v5p-64: 32 chips, 4 per host (cloud.google.com/tpu/docs/v5p, "2x4x4": 8 hosts)
  # Host 0's share of train[:99%] (1,268,355 images) by TFDS's own rule for a process's split.
  share_split = tfds.split_for_jax_process(config.train_split, process_index=0, process_count=hosts)
  (absolute,) = share_split.to_absolute({"train": types.SimpleNamespace(num_examples=1_281_167)})
  share = absolute.to - (absolute.from_ or 0)
  assert share == -(-1_268_355 // hosts) == 158_545  # the largest of the 8 even shares
  assert pipeline.host_shuffle_buffer(config.shuffle_buffer, share) == share < 250_000
  assert pipeline.host_shuffle_buffer(10_000, share) == 10_000
