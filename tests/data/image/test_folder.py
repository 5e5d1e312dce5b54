"""folder:/root datasets: tiny PNG/JPEG files through the same pipelines."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from vit_jax import data
from vit_jax import errors
from vit_jax.data import index_file
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
  scanned = image_folder.ImageFolder.open(folder)
  assert scanned.class_names == ("cat", "dog", "eel")
  assert scanned.num_examples("train") == 12 and scanned.num_examples("test") == 5
  with pytest.raises(ValueError, match="available"):
    scanned.num_examples("validation")


def test_shards_are_disjoint_and_complete(folder):
  scanned = image_folder.ImageFolder.open(folder)
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
  """The same files under gs:// (listed and read through vit_jax/storage) give the same
  dataset: classes, counts, and each example's bytes and label in the same order."""
  root = gcs.new_dir("folder")
  gcs.upload(folder, root)
  local, remote = image_folder.ImageFolder.open(folder), image_folder.ImageFolder.open(root)
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


# ---- The index: written at the first start, reused after, rewritten when the folder changes ------


def _index(root):
  return os.path.join(root, image_folder.INDEX_NAME)


def test_the_index_is_written_once_and_reused(folder):
  first = image_folder.ImageFolder.open(folder)
  assert first.index_path == _index(folder)
  written = os.stat(_index(folder)).st_mtime_ns
  again = image_folder.ImageFolder.open(folder)
  assert again.examples == first.examples and os.stat(_index(folder)).st_mtime_ns == written
  # The files come from the index, not from listing the folder again: an entry dropped from the
  # index (its layout still current) stays dropped.
  _, index = index_file.read(folder, image_folder.INDEX_NAME, "folder_index", lambda _: True)
  index["files"]["train"]["cat"].remove("1.png")
  index_file.write(folder, image_folder.INDEX_NAME, "folder_index", index)
  restarted = image_folder.ImageFolder.open(folder)
  assert restarted.num_examples("train") == 11
  assert os.path.join(folder, "train", "cat", "1.png") not in dict(restarted.examples["train"])


def test_opening_decodes_nothing(folder):
  """A file that does not decode is listed like any other: the pipeline checks it when read."""
  broken = os.path.join(folder, "train", "dog", "broken.jpg")
  with open(broken, "wb") as f:
    f.write(b"not a jpeg")
  assert broken in dict(image_folder.ImageFolder.open(folder).examples["train"])


@pytest.mark.parametrize("change", ["add", "remove", "new class"])
def test_a_changed_folder_is_indexed_again(folder, change):
  assert image_folder.ImageFolder.open(folder).num_examples("train") == 12
  written = os.stat(_index(folder)).st_mtime_ns
  if change == "add":
    shutil.copy(
        os.path.join(folder, "train", "dog", "1.png"), os.path.join(folder, "train", "dog", "9.png")
    )
  elif change == "remove":
    os.remove(os.path.join(folder, "train", "eel", "2.png"))
  else:
    os.makedirs(os.path.join(folder, "test", "eel"))
    shutil.copy(os.path.join(folder, "train", "eel", "1.png"), os.path.join(folder, "test", "eel"))
  reopened = image_folder.ImageFolder.open(folder)
  counts = {"add": (13, 5), "remove": (11, 5), "new class": (12, 6)}[change]
  assert (reopened.num_examples("train"), reopened.num_examples("test")) == counts
  assert os.stat(_index(folder)).st_mtime_ns != written
  assert image_folder.ImageFolder.open(folder).examples == reopened.examples


def test_a_root_that_cannot_be_written_keeps_its_index_in_the_cache(
    folder, tmp_path_factory, monkeypatch
):
  cache = tmp_path_factory.mktemp("cache")  # outside the folder
  monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
  # The index's temporary file cannot be created where a folder of its name stands (as root, the
  # tests' user here, a chmod would not stop the write); hidden folders are no split.
  os.makedirs(_index(folder) + ".tmp")
  first = image_folder.ImageFolder.open(folder)
  assert first.index_path.startswith(str(cache)) and not os.path.exists(_index(folder))
  written = os.stat(first.index_path).st_mtime_ns
  again = image_folder.ImageFolder.open(folder)
  assert again.examples == first.examples and os.stat(first.index_path).st_mtime_ns == written


# ---- Images checked where the pipeline decodes them ---------------------------------------------


def _train(dataset, **kwargs):
  plain = pipeline.Augment(inception_crop=False, flip=False)
  settings = dict(image_size=8, seed=0, augment=plain, process_index=0, process_count=1)
  return pipeline.train_iterator(dataset, **{**settings, **kwargs})


def _break(folder, *parts):
  path = os.path.join(folder, *parts)
  with open(path, "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n garbage")
  return path


def test_an_undecodable_image_is_skipped_when_read_and_resume_is_exact(folder, capsys):
  """13 train files, one broken: every batch keeps 4 rows (the broken one's row filled by a good
  row), the file is warned about once, and a resumed pipeline makes the same batches."""
  broken = _break(folder, "train", "dog", "broken.png")
  dataset = "folder:" + folder
  it = _train(dataset, global_batch_size=4)
  batches = [next(it) for _ in range(8)]  # 32 rows: the broken file is read twice or more
  assert capsys.readouterr().err.count(f"warning: skipping {broken}: not a decodable image") == 1
  rows = [row.tobytes() for b in batches for row in b["image"]]
  assert np.zeros((8, 8, 3), np.float32).tobytes() not in rows
  assert all(b["image"].shape == (4, 8, 8, 3) and "bad_path" not in b for b in batches)
  resumed = _train(dataset, global_batch_size=4, start_step=5)
  for step in range(5, 8):
    got = next(resumed)
    for key in ("image", "labels", "label"):
      np.testing.assert_array_equal(got[key], batches[step][key])


def test_an_undecodable_eval_image_is_not_scored(folder, capsys):
  broken = _break(folder, "test", "cat", "broken.png")
  evals = list(
      pipeline.eval_iterator(
          "folder:" + folder, global_batch_size=4, image_size=8, process_index=0, process_count=1
      )
  )
  assert sum(b["mask"].sum() for b in evals) == 5  # the 5 good files of 6
  assert broken in capsys.readouterr().err


def test_bad_images_error_refuses_the_file_when_its_batch_is_read(folder):
  broken = _break(folder, "train", "eel", "broken.png")
  refuse = data.ReadOptions(bad_images="error")  # the config's --config.bad_images=error
  it = _train("folder:" + folder, global_batch_size=13, read_options=refuse)  # the whole epoch
  with pytest.raises(errors.DataError, match=f"{broken} is not a decodable image.*bad_images=skip"):
    next(it)
