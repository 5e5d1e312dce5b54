"""wds: datasets: webdataset shards indexed once, split by their names, read in a new shard order
each epoch, resumed at their example without reading what came before, and every bad input one
clear error."""

import io
import itertools
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests.data.image import wds_shards
from vit_jax import data
from vit_jax import errors
from vit_jax.data.image import pipeline
from vit_jax.data.image import sources
from vit_jax.data.image import webdataset

# train: 3 shards of 7, 5 and 9 samples (0..20); validation: one of 4 (21..24).
LAYOUT = {"train": (7, 5, 9), "validation": (4,)}
_PLAIN = pipeline.Augment(inception_crop=False, flip=False)
OPTIONS = data.ReadOptions(label_key="label")  # configs/vit.py's


@pytest.fixture
def shades(tmp_path):
  root = tmp_path / "shards"
  return str(root), wds_shards.write_shades(root, LAYOUT)


def _train(dataset, **kwargs):
  settings = dict(
      global_batch_size=4,
      image_size=8,
      seed=0,
      augment=_PLAIN,
      process_index=0,
      process_count=1,
      read_options=OPTIONS,
  )
  return pipeline.train_iterator(dataset, **{**settings, **kwargs})


def _numbers(batches) -> list:
  return [n for batch in batches for n in wds_shards.shade_numbers(batch["image"])]


def test_the_index_gives_splits_classes_and_counts_and_is_reused(shades):
  root, numbers = shades
  source = sources.open_source(f"wds:{root}", read_options=OPTIONS)
  assert (source.train_split, source.eval_split, source.num_classes) == ("train", "validation", 3)
  assert [int(source.read(s, 0, 1).cardinality()) for s in ("train", "validation")] == [21, 4]
  examples = list(source.read("train", 0, 1).as_numpy_iterator())
  assert [e["image"] for e in examples] == [wds_shards.shade(n) for n in numbers["train"]]
  assert [int(e["label"]) for e in examples] == [n % 3 for n in numbers["train"]]
  index = os.path.join(root, webdataset.INDEX_NAME)
  written = os.stat(index).st_mtime_ns
  webdataset.Shards.open(root, "label")
  assert os.stat(index).st_mtime_ns == written  # reused
  # A shard written again is indexed again (its entry only).
  wds_shards.write_tar(
      os.path.join(root, "shades-validation-000.tar"),
      wds_shards.sample("new", wds_shards.shade(200), 7),
  )
  again = webdataset.Shards.open(root, "label")
  assert again.num_examples("validation") == 1 and again.num_classes == 8
  assert os.stat(index).st_mtime_ns != written


def test_a_folder_a_glob_and_a_brace_range_name_the_same_shards(shades):
  root, _ = shades
  named = [
      webdataset.match(root),
      webdataset.match(os.path.join(root, "shades-*.tar")),
      webdataset.match(os.path.join(root, "shades-{train-{000..002},validation-000}.tar")),
  ]
  assert named[0] == named[1] == named[2] and len(named[0]) == 4


def test_processes_read_contiguous_shares_the_first_the_largest(shades):
  root, numbers = shades
  source = sources.open_source(f"wds:{root}", read_options=OPTIONS)
  shares = [
      [n for e in source.read("train", p, 4).as_numpy_iterator() for n in [e["image"]]]
      for p in range(4)
  ]
  assert [len(s) for s in shares] == [6, 5, 5, 5]  # 21 samples, as tfds.even_splits gives
  assert sum(shares, []) == [wds_shards.shade(n) for n in numbers["train"]]


def test_splits_slice_as_tfds_slices_them(shades):
  root, numbers = shades
  source = sources.open_source(f"wds:{root}", read_options=OPTIONS)

  def read(split, process=0, count=1):
    examples = source.read(split, process, count).as_numpy_iterator()
    return [_number(e["image"]) for e in examples]

  train = numbers["train"]
  assert read("train[:10]") + read("train[10:]") == train
  assert read("train[1shard:2shard]") == train[7:12]
  assert read("train[-2:]+validation[:1]") == train[-2:] + numbers["validation"][:1]
  assert read("train[3:20]", 0, 2) + read("train[3:20]", 1, 2) == train[3:20]
  assert read("train[3:20]", 0, 2) == train[3:12]
  _check(f"wds:{root}", train_split="train[:90%]", eval_split="train[90%:]")
  with pytest.raises(errors.DataError, match=r"'train\[30:\]' is not a split.*incompatible"):
    _check(f"wds:{root}", train_split="train[30:]")


def _number(png: bytes) -> int:
  return int(tf.io.decode_png(png)[0, 0, 0])


# The train shard that holds each sample of LAYOUT: 0..6, 7..11, 12..20.
_SHARD_OF = {n: int(np.searchsorted([7, 12, 21], n, side="right")) for n in range(21)}


def test_each_epoch_reads_the_shards_in_a_new_order_and_every_sample_once(shades):
  root, numbers = shades
  # Shuffle buffer 1: blocks of one, so an epoch is its shards one after the other.
  batches = itertools.islice(_train(f"wds:{root}", global_batch_size=3, shuffle_buffer=1), 28)
  read = _numbers(batches)
  orders = []
  for e in range(4):
    epoch = read[e * 21 : (e + 1) * 21]
    assert sorted(epoch) == numbers["train"]
    runs = [s for s, _ in itertools.groupby(_SHARD_OF[n] for n in epoch)]
    assert sorted(runs) == [0, 1, 2]  # each shard read whole, in turn
    orders.append(tuple(runs))
  assert len(set(orders)) > 1


@pytest.mark.parametrize("buffer", [6, 100])
def test_training_resumes_at_its_example_across_blocks_and_epochs(shades, buffer):
  """Blocks of 3 (buffer 6) or the whole share (buffer 100); 4 a batch, 21 samples: steps 1..13
  start inside blocks, shards and epochs."""
  root, numbers = shades
  dataset = f"wds:{root}"
  fresh = list(itertools.islice(_train(dataset, shuffle_buffer=buffer), 14))
  read = _numbers(fresh)
  assert sorted(read[:21]) == numbers["train"] and read[:21] != numbers["train"]
  for start in (1, 3, 5, 7, 11, 13):
    (resumed,) = itertools.islice(_train(dataset, shuffle_buffer=buffer, start_step=start), 1)
    for key in ("image", "labels", "label"):
      np.testing.assert_array_equal(resumed[key], fresh[start][key], err_msg=f"{start} {key}")


def test_a_resume_reads_nothing_before_its_example(shades):
  """The shards an epoch reads before the example a resume starts at are deleted: reading from
  there still gives the rest of the epoch; reading from its start no longer can."""
  root, _ = shades
  read_from = webdataset.Shards.open(root, "label").read_from("train")
  seed, start = tf.constant([3, 4], tf.int64), 15

  def read(at):
    examples = read_from(seed, tf.constant(at, tf.int64)).as_numpy_iterator()
    return [_number(e["image"]) for e in examples]

  whole = read(0)
  assert read(start) == whole[start:]
  shard = lambda n: os.path.join(root, f"shades-train-{_SHARD_OF[n]:03d}.tar")
  before = {shard(n) for n in whole[:start]} - {shard(whole[start])}
  assert before  # the first piece holds at most 9 of the 15
  for path in before:
    os.remove(path)
  assert read(start) == whole[start:]
  with pytest.raises(tf.errors.OpError, match="No such file"):
    read(0)


def test_labels_from_a_json_field_named_by_the_config(tmp_path):
  members = wds_shards.sample("a", wds_shards.shade(1), 4, as_json="y")
  members += wds_shards.sample("b", wds_shards.shade(2), 2, as_json="y")
  wds_shards.write_tar(tmp_path / "pets-train-0.tar", members)
  wds_shards.write_tar(
      tmp_path / "pets-test-0.tar", wds_shards.sample("c", wds_shards.shade(3), 0, as_json="y")
  )
  source = sources.open_source(f"wds:{tmp_path}", read_options=data.ReadOptions(label_key="y"))
  assert (source.num_classes, source.eval_split) == (5, "test")
  labels = [int(e["label"]) for e in source.read("train", 0, 1).as_numpy_iterator()]
  assert labels == [4, 2]
  missing = (
      r"pets-test-0.tar: sample 'c' has no label: c.json has no field 'label' \(it has y\); name "
      r"the field with --config.label_key"
  )
  with pytest.raises(errors.DataError, match=missing):
    sources.open_source(f"wds:{tmp_path}", read_options=OPTIONS)  # "label" is not there
  _check(f"wds:{tmp_path}", label_key="y")  # the config's key reaches the shards


def test_jpeg_png_and_webp_images_go_through_the_pipeline(tmp_path):
  from PIL import Image  # pylint: disable=g-import-not-at-top

  def encoded(fmt, value):
    out = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(out, format=fmt, lossless=True)
    return out.getvalue()

  members = wds_shards.sample("a", encoded("JPEG", 40), 0, ext="jpg")
  members += wds_shards.sample("b", encoded("PNG", 120), 1, ext="png")
  members += wds_shards.sample("c", encoded("WEBP", 200), 2, ext="webp")
  wds_shards.write_tar(tmp_path / "mixed-train-0.tar", members)
  wds_shards.write_tar(tmp_path / "mixed-val-0.tar", wds_shards.sample("d", encoded("PNG", 9), 1))
  evals = list(
      pipeline.eval_iterator(
          f"wds:{tmp_path}", "train", global_batch_size=3, image_size=8, crop_fraction=1.0,
          process_index=0, process_count=1, read_options=OPTIONS,
      )
  )  # fmt: skip
  (batch,) = evals
  pixels = (batch["image"][:, 4, 4, 0] + 1) * 127.5
  np.testing.assert_allclose(pixels, [40, 120, 200], atol=2)  # JPEG's rounding
  assert list(batch["label"]) == [0, 1, 2]


def test_shards_written_by_webdataset_read_the_same(tmp_path):
  """The webdataset package's own writer (the test extras have it): keys in folders (one with a
  dot in its name), .jpg with .cls, and a member that is neither."""
  import webdataset as wds  # pylint: disable=g-import-not-at-top  (imports torch)

  jpegs = [tf.io.encode_jpeg(np.full((6, 9, 3), 40 * i, np.uint8)).numpy() for i in range(5)]
  for split, numbers in (("train", range(4)), ("val", range(4, 5))):
    with wds.TarWriter(str(tmp_path / f"cats-{split}-0.tar")) as writer:
      for i in numbers:
        writer.write({"__key__": f"v1.{i}/img{i}", "jpg": jpegs[i], "cls": i, "txt": "a cat"})
  source = sources.open_source(f"wds:{tmp_path}", read_options=OPTIONS)
  assert (source.num_classes, source.eval_split) == (5, "val")
  examples = list(source.read("train", 0, 1).as_numpy_iterator())
  assert [(e["image"], int(e["label"])) for e in examples] == [(jpegs[i], i) for i in range(4)]


def test_shards_in_a_bucket_read_as_the_local_ones(shades, gcs):
  root, _ = shades
  bucket = gcs.new_dir("shards")
  gcs.upload(root, bucket)
  share = lambda r: sources.open_source(f"wds:{r}", read_options=OPTIONS).read("train", 1, 2)
  read = lambda r: [(e["image"], e["label"]) for e in share(r).as_numpy_iterator()]
  assert read(bucket) == read(root) and len(read(root)) == 10
  assert webdataset.INDEX_NAME in gcs.objects(bucket)  # beside the shards, in the bucket
  batches = [next(_train(f"wds:{r}", shuffle_buffer=6, start_step=3)) for r in (root, bucket)]
  np.testing.assert_array_equal(batches[0]["image"], batches[1]["image"])


# ---- Bad input: one DataError naming the problem, before anything is written --------------------


def _check(dataset, **settings):
  """The checks a run makes before any work (sources.check_config)."""
  config = helpers.vit_config("", dataset=dataset)
  config.update(settings)
  with data.opened_once():
    sources.check_config(config)


def _cut(path, keep):
  with open(path, "rb") as f:
    content = f.read()
  with open(path, "wb") as f:
    f.write(content[: keep(len(content))])


def test_a_pattern_that_matches_nothing(tmp_path):
  with pytest.raises(errors.DataError, match=r"wds:.*nope-\*.tar matches no file"):
    _check(f"wds:{tmp_path}/nope-*.tar")


def test_a_shard_that_is_not_a_tar(shades):
  root, _ = shades
  bad = os.path.join(root, "shades-train-001.tar")
  with open(bad, "wb") as f:
    f.write(b"PK\x03\x04 a zip, say" * 100)
  with pytest.raises(errors.DataError, match=f"{bad} is not a tar file"):
    _check(f"wds:{root}")


@pytest.mark.parametrize("where", ["in an image", "in a header", "at a member's end"])
def test_a_truncated_shard(shades, where):
  root, _ = shades
  bad = os.path.join(root, "shades-train-002.tar")
  keep = {
      "in an image": lambda n: n // 2 + 100,
      "in a header": lambda n: 512 * 4 + 100,  # inside the third member's header
      "at a member's end": lambda n: 512 * 4,  # after two whole members: no end-of-archive
  }[where]
  _cut(bad, keep)
  with pytest.raises(errors.DataError, match=f"{bad} is truncated"):
    _check(f"wds:{root}")


def test_a_sample_without_a_label(tmp_path):
  members = wds_shards.sample("ok", wds_shards.shade(1), 0) + [("lost.png", wds_shards.shade(2))]
  wds_shards.write_tar(tmp_path / "x-train-0.tar", members)
  with pytest.raises(errors.DataError, match=r"x-train-0.tar: sample 'lost' has no label"):
    _check(f"wds:{tmp_path}")


@pytest.mark.parametrize(
    "label, as_json",
    [("cat", None), ("-1", None), ("2.5", "label"), ('"3"', "label"), ("true", "label")],
)
def test_a_label_that_is_not_a_class_id(tmp_path, label, as_json):
  members = wds_shards.sample("odd", wds_shards.shade(1), label, as_json=as_json)
  wds_shards.write_tar(tmp_path / "x-train-0.tar", members)
  with pytest.raises(errors.DataError, match=r"sample 'odd' has a label that is not a class id"):
    _check(f"wds:{tmp_path}")


def test_a_sample_without_an_image(tmp_path):
  wds_shards.write_tar(tmp_path / "x-train-0.tar", [("k.cls", b"1"), ("k.txt", b"words")])
  with pytest.raises(errors.DataError, match=r"sample 'k' has no image \(it holds .cls, .txt\)"):
    _check(f"wds:{tmp_path}")


def test_shards_that_name_no_split(tmp_path):
  wds_shards.write_tar(tmp_path / "shard-000.tar", wds_shards.sample("a", wds_shards.shade(1), 0))
  with pytest.raises(errors.DataError, match=r"shard-000.tar names no split.*train, validation"):
    _check(f"wds:{tmp_path}")


def test_only_training_shards_have_no_eval_split(shades):
  root, _ = shades
  with pytest.raises(errors.ConfigError, match=r"eval_split is unset"):
    _check(f"wds:{root}/shades-train-*.tar")
  with pytest.raises(errors.DataError, match=r"'test' is not a split.*train \(21 samples\)"):
    _check(f"wds:{root}/shades-train-*.tar", eval_split="test")


def test_a_class_count_that_is_not_the_labels(shades):
  root, _ = shades
  for wrong in (2, 1000):
    with pytest.raises(errors.DataError, match=f"has 3 classes .*not --config.num_classes={wrong}"):
      _check(f"wds:{root}", num_classes=wrong)
  _check(f"wds:{root}", num_classes=3)


def test_images_that_do_not_decode_are_left_out_or_refused(shades, capsys):
  root, numbers = shades
  members = wds_shards.sample("good", wds_shards.shade(100), 1)
  members += wds_shards.sample("broken", b"\x89PNG\r\n\x1a\n garbage", 2)
  bad = wds_shards.write_tar(os.path.join(root, "shades-train-003.tar"), members)
  _check(f"wds:{root}")  # bad_images=skip, the default
  err = capsys.readouterr().err
  assert err.count(f"warning: skipping broken.png in {bad}: not a decodable image") == 1
  source = sources.open_source(f"wds:{root}", read_options=OPTIONS)
  assert int(source.read("train", 0, 1).cardinality()) == len(numbers["train"]) + 1
  with pytest.raises(errors.DataError, match=f"broken.png in {bad} is not a decodable image"):
    _check(f"wds:{root}", bad_images="error")


def test_a_brace_range_without_the_data_extra(shades, monkeypatch):
  root, _ = shades
  monkeypatch.setitem(sys.modules, "braceexpand", None)  # as if not installed
  with pytest.raises(errors.MissingExtraError, match=r'pip install -e "\.\[data\]"'):
    _check(f"wds:{root}/shades-train-{{000..002}}.tar")
  _check(f"wds:{root}")  # a folder or a glob needs no extra
