"""folder:/root datasets: tiny PNG/JPEG files through the same pipelines."""

import numpy as np
import pytest
import tensorflow as tf

from vit_jax.data.image import folder as image_folder
from vit_jax.data.image import pipeline


@pytest.fixture
def folder(tmp_path):
  rng = np.random.default_rng(0)
  layout = {"train": {"cat": 5, "dog": 4, "eel": 3}, "test": {"cat": 2, "dog": 3}}
  for split, classes in layout.items():
    for name, count in classes.items():
      (tmp_path / split / name).mkdir(parents=True)
      for i in range(count):
        channels = 1 if i % 2 else 3  # Mixed grayscale and RGB files.
        image = rng.integers(0, 256, size=(10 + i, 12, channels)).astype(np.uint8)
        if i == 0:
          data = tf.io.encode_jpeg(image)
          suffix = "jpg"
        else:
          data = tf.io.encode_png(image)
          suffix = "png"
        (tmp_path / split / name / f"{i}.{suffix}").write_bytes(data.numpy())
  (tmp_path / "train" / "cat" / "notes.txt").write_text("not an image")
  return str(tmp_path)


def test_scan_finds_splits_and_union_of_classes(folder):
  scanned = image_folder.ImageFolder.scan(folder)
  assert scanned.class_names == ("cat", "dog", "eel")
  assert scanned.num_examples("train") == 12 and scanned.num_examples("test") == 5
  with pytest.raises(ValueError, match="available"):
    scanned.num_examples("validation")


def test_shards_are_disjoint_and_complete(folder):
  scanned = image_folder.ImageFolder.scan(folder)
  shares = [list(scanned.read("train", p, 3).as_numpy_iterator()) for p in range(3)]
  assert [len(s) for s in shares] == [4, 4, 4]
  all_bytes = [ex["image"] for s in shares for ex in s]
  assert len(set(all_bytes)) == 12
  assert {int(ex["label"]) for ex in shares[0]} == {0, 1, 2}  # Strided: every class.


def test_folder_through_train_and_eval(folder):
  dataset = "folder:" + folder
  info = pipeline.dataset_info(dataset)
  assert (info.num_classes, info.train_split, info.eval_split) == (3, "train", "test")
  batch = next(
      pipeline.train_iterator(
          dataset, global_batch_size=4, image_size=8, seed=0, process_index=0, process_count=1
      )
  )
  assert batch["image"].shape == (4, 8, 8, 3) and batch["labels"].shape == (4, 3)
  evals = list(
      pipeline.eval_iterator(
          dataset, global_batch_size=4, image_size=8, process_index=0, process_count=1
      )
  )
  assert len(evals) == 2 and sum(b["mask"].sum() for b in evals) == 5
  assert sorted(lab for b in evals for lab, m in zip(b["label"], b["mask"]) if m) == [0, 0, 1, 1, 1]


def test_missing_folder_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="does not exist"):
    pipeline.dataset_info(f"folder:{tmp_path}/nope")


def test_a_folder_in_a_bucket_reads_as_the_local_one(folder, gcs):
  """The same files under gs:// (listed and read through vit_jax/storage.py) give the same
  dataset: classes, counts, and each example's bytes and label in the same order."""
  root = gcs.new_dir("folder")
  gcs.upload(folder, root)
  local, remote = image_folder.ImageFolder.scan(folder), image_folder.ImageFolder.scan(root)
  assert remote.class_names == local.class_names
  assert remote.num_examples("train") == local.num_examples("train") == 12
  read = lambda scanned: [
      (ex["image"], ex["label"]) for ex in scanned.read("train", 1, 2).as_numpy_iterator()
  ]
  assert read(remote) == read(local)
  batches = [
      next(
          pipeline.train_iterator(
              f"folder:{r}", global_batch_size=4, image_size=8, seed=0, process_count=1
          )
      )
      for r in (folder, root)
  ]
  np.testing.assert_array_equal(batches[0]["image"], batches[1]["image"])
