"""Training from webdataset shards (wds:): a tiny run trains and evaluates, a resumed run equals
the straight one, the same images train to the same accuracy as a folder: dataset, and a bad
shard stops the command line in one line."""

import os

import ml_collections
import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import helpers
from tests import tiny_configs as configs
from tests.data.image import wds_shards
from tests.survival import conftest as survival
from vit_jax.training import train


@pytest.fixture(scope="module")
def digits(digits_dir):
  """{split: [(PNG bytes, label), ...]} of the embedded digits (the TFDS records' bytes)."""
  builder = tfds.builder("sklearn_digits", data_dir=digits_dir)
  read = lambda split: builder.as_dataset(
      split=split, shuffle_files=False, decoders={"image": tfds.decode.SkipDecoding()}
  )
  return {
      split: [(e["image"], int(e["label"])) for e in read(split).as_numpy_iterator()]
      for split in ("train", "test")
  }


@pytest.fixture(scope="module")
def digit_shards(tmp_path_factory, digits):
  """The digits as shards of 100 samples: digits-train-000.tar, ..., digits-test-003.tar."""
  root = tmp_path_factory.mktemp("digit_shards")
  for split, examples in digits.items():
    for s in range(0, len(examples), 100):
      members = []
      for n, (png, label) in enumerate(examples[s : s + 100], s):
        members += wds_shards.sample(f"{split}{n:05d}", png, label)
      wds_shards.write_tar(root / f"digits-{split}-{s // 100:03d}.tar", members)
  return f"wds:{root}"


def wds_config(digits_dir, dataset, steps, **settings):
  """The tiny ViT on `dataset`: a constant rate (a run cut in two takes the same steps), the
  test-split eval only, one compilation cache for the module's runs."""
  config = configs.tiny_vit(digits_dir, steps)
  config.dataset = dataset
  config.compilation_cache_dir = os.path.join(digits_dir, "compilation_cache")
  config.optimizer.update(warmup_steps=0, schedule="constant")
  config.update(settings)
  config.evals = ml_collections.ConfigDict({"eval": config.evals.eval.to_dict()})
  return config


@pytest.fixture(scope="module")
def straight(tmp_path_factory, digits_dir, digit_shards):
  """(workdir, result) of 6 steps from the shards, blocks of 32 (buffer 64): steps start inside
  blocks and shards."""
  workdir = tmp_path_factory.mktemp("wds_straight") / "w"
  config = wds_config(digits_dir, digit_shards, 6, shuffle_buffer=64)
  return workdir, train.train_and_evaluate(config, str(workdir))


def test_a_tiny_run_trains_and_evaluates_from_shards(straight):
  workdir, result = straight
  rows = helpers.read_metrics(workdir)
  assert [r["step"] for r in rows if "train_loss" in r] == list(range(1, 7))
  assert "eval/accuracy" in rows[-1] and result["eval/accuracy"] == rows[-1]["eval/accuracy"]


def test_a_resumed_run_equals_the_straight_one(straight, tmp_path, digits_dir, digit_shards):
  workdir, _ = straight
  resumed = tmp_path / "resumed"
  first = wds_config(digits_dir, digit_shards, 3, shuffle_buffer=64)
  train.train_and_evaluate(first, str(resumed))  # its last checkpoint: step 3, example 48
  train.train_and_evaluate(wds_config(digits_dir, digit_shards, 6, shuffle_buffer=64), resumed)
  a, b = configs.read_state(workdir, 6), configs.read_state(resumed, 6)
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_array_equal(b[key], a[key], err_msg=key)


def test_the_same_images_reach_the_accuracy_they_reach_as_a_folder(tmp_path, digits_dir, digits):
  """The digits written both ways, one sample per shard named in the folder's file order, with a
  shuffle buffer of one: each epoch's shard order is then the folder's file order (the same seed
  draws both), so the two runs see the same batches and can be held to the same accuracy, not to
  one within the noise of a different order."""
  for split, examples in digits.items():
    for n, (png, label) in enumerate(examples):
      key = f"{label}-{n:05d}"  # class, then number: a folder's order
      wds_shards.write_tar(tmp_path / "shards" / f"digits-{split}-{key}.tar", [
          (f"{key}.png", png), (f"{key}.cls", str(label).encode())
      ])  # fmt: skip
      os.makedirs(tmp_path / "folder" / split / str(label), exist_ok=True)
      (tmp_path / "folder" / split / str(label) / f"{key}.png").write_bytes(png)
  accuracy = {}
  for source in ("shards", "folder"):
    dataset = f"wds:{tmp_path / source}" if source == "shards" else f"folder:{tmp_path / source}"
    config = wds_config(
        digits_dir, dataset, 100, shuffle_buffer=1, batch_size=32, eval_max_batches=None
    )
    result = train.train_and_evaluate(config, str(tmp_path / f"w_{source}"))
    accuracy[source] = result["eval/accuracy"]
  assert accuracy["folder"] > 0.5  # it learned: 10 classes (64.8% when written)
  # Within 2 points, the criterion; the same batches give exactly the same.
  assert accuracy["shards"] == accuracy["folder"], accuracy


def test_a_truncated_shard_stops_the_command_line_in_one_line(tmp_path, digits_dir, digits):
  for split in ("train", "test"):
    png, label = digits[split][0]
    wds_shards.write_tar(tmp_path / "shards" / f"d-{split}.tar", wds_shards.sample("a", png, label))
  bad = tmp_path / "shards" / "d-train.tar"
  bad.write_bytes(bad.read_bytes()[:700])
  workdir = tmp_path / "w"
  result = helpers.run(
      survival.tiny_command(workdir, digits_dir, f"--config.dataset=wds:{tmp_path / 'shards'}")
  )
  assert result.returncode == 2, result.stderr[-3000:]
  survival.assert_one_line_error(result.stderr, f"{bad} is truncated")
  assert not workdir.exists()
