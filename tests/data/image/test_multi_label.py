"""Multi-label TFDS datasets (a `labels` Sequence(ClassLabel) feature, as ImageNet-21k's): the
train and eval pipelines' targets are multi-hot over every class of the example (eval's for
big_vision's prec@1)."""

import numpy as np
import tensorflow_datasets as tfds

from tests import helpers
from vit_jax.data.image import pipeline
from vit_jax.data.image import sources
from vit_jax.training import train

NUM_CLASSES = 5
NUM_EXAMPLES = 24


def classes_of(i: int) -> list:
  """Example i's classes: its `label` first, then up to two more (some examples have one)."""
  return sorted({i % NUM_CLASSES, (i * 3 + 1) % NUM_CLASSES, (i * 7) % NUM_CLASSES})[: 1 + i % 3]


class MultiLabelTestImages(tfds.core.GeneratorBasedBuilder):
  """Constant 8x8 images whose grey level encodes the example's index."""

  VERSION = tfds.core.Version("1.0.0")
  url_infos = None  # nothing to download

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(shape=(8, 8, 3)),
                "label": tfds.features.ClassLabel(num_classes=NUM_CLASSES),
                "labels": tfds.features.Sequence(tfds.features.ClassLabel(num_classes=NUM_CLASSES)),
            }
        ),
    )

  def _split_generators(self, dl_manager):
    del dl_manager
    return {"train": self._generate_examples(), "test": self._generate_examples()}

  def _generate_examples(self):
    for i in range(NUM_EXAMPLES):
      classes = classes_of(i)
      image = np.full((8, 8, 3), i * 10, np.uint8)
      yield i, {"image": image, "label": classes[0], "labels": classes}


def prepared(tmp_path) -> str:
  builder = MultiLabelTestImages(data_dir=str(tmp_path))
  builder.download_and_prepare()
  return builder.name


def index_of(image_SxSx3) -> int:
  """The example index encoded in a constant image normalized to [-1, 1]."""
  return int(round((float(np.mean(image_SxSx3)) + 1.0) * 127.5 / 10))


def test_source_reads_the_class_lists(tmp_path):
  source = sources.open_source(prepared(tmp_path), data_dir=str(tmp_path))
  assert source.multi_label
  digits = sources.open_source("sklearn_digits")
  assert not digits.multi_label


def test_train_targets_are_multi_hot_and_smoothed(tmp_path):
  name = prepared(tmp_path)
  settings = dict(global_batch_size=8, image_size=8, seed=0, data_dir=str(tmp_path))
  plain = pipeline.Augment(inception_crop=False, flip=False)
  batches = pipeline.train_iterator(name, "train", augment=plain, **settings)
  seen = set()
  for _ in range(NUM_EXAMPLES // 8):
    batch = next(batches)
    for image, labels_C, label in zip(batch["image"], batch["labels"], batch["label"]):
      i = index_of(image)
      want_C = np.zeros(NUM_CLASSES, np.float32)
      want_C[classes_of(i)] = 1.0
      np.testing.assert_array_equal(labels_C, want_C)
      assert label == classes_of(i)[0]
      seen.add(i)
  assert seen == set(range(NUM_EXAMPLES))  # one epoch, every example once
  assert any(len(classes_of(i)) > 1 for i in seen)

  smoothing = 0.1
  smoothed = pipeline.Augment(inception_crop=False, flip=False, label_smoothing=smoothing)
  batch = next(pipeline.train_iterator(name, "train", augment=smoothed, **settings))
  for image, labels_C in zip(batch["image"], batch["labels"]):
    want_C = np.zeros(NUM_CLASSES, np.float32)
    want_C[classes_of(index_of(image))] = 1.0
    np.testing.assert_allclose(labels_C, want_C * (1 - smoothing) + smoothing / NUM_CLASSES)


def test_eval_labels_are_multi_hot_and_padding_has_none(tmp_path):
  """Eval keeps every class of an example (what prec@1 scores against), unsmoothed; the padding
  rows that fill the last batch have no label."""
  name = prepared(tmp_path)
  batches = pipeline.eval_iterator(
      name, "test", global_batch_size=10, image_size=8, data_dir=str(tmp_path)
  )
  seen = []
  for batch in batches:
    for image, labels_C, label, mask in zip(
        batch["image"], batch["labels"], batch["label"], batch["mask"]
    ):
      if not mask:
        assert not labels_C.any()
        continue
      i = index_of(image)
      want_C = np.zeros(NUM_CLASSES, np.float32)
      want_C[classes_of(i)] = 1.0
      np.testing.assert_array_equal(labels_C, want_C)
      assert label == classes_of(i)[0]
      seen.append(i)
  assert sorted(seen) == list(range(NUM_EXAMPLES))
  assert any(len(classes_of(i)) > 1 for i in seen)


def test_a_run_on_multi_label_data_logs_prec1(tmp_path):
  """A sigmoid-loss run (the i21k recipe's loss) trains on the multi-hot targets and its eval logs
  prec@1, which counts a top-1 class among any of the labels: never below the accuracy, which
  counts only the first."""
  name = prepared(tmp_path)
  config = helpers.repo_file("configs/vit.py").get_config(f"dataset={name},variant=Ti/4,runlocal")
  config.update(image_size=8, data_dir=str(tmp_path), loss="sigmoid_xent", progress="lines")
  config.augment.update(inception_crop=False, flip=False)
  config.prefetch_batches = 0
  result = train.train_and_evaluate(config, str(tmp_path / "w"))
  assert 0.0 <= result["eval/accuracy"] <= result["eval/prec@1"] <= 1.0
  assert result["eval/examples"] == 16  # runlocal: 2 batches of 8


def test_real_labels_alone_are_the_eval_targets():
  """ImageNet-ReaL (TFDS imagenet2012_real): the targets are its `real_label` list alone (the
  raters may have rejected the `original_label`), and an image with no ReaL label has none."""
  with tfds.testing.mock_data(num_examples=12):
    source = sources.open_source("imagenet2012_real")
    assert source.multi_label and source.labels_alone and source.num_classes == 1000
    raw = list(tfds.as_numpy(tfds.builder("imagenet2012_real").as_dataset(split="validation")))
    batches = pipeline.eval_iterator(
        "imagenet2012_real", "validation", global_batch_size=12, image_size=8
    )
    batch = next(iter(batches))
  assert any(len(ex["real_label"]) == 0 for ex in raw) or any(
      ex["original_label"] not in ex["real_label"] for ex in raw
  )  # the mock has a case where the original label would change the targets
  for ex, labels_C, label in zip(raw, batch["labels"], batch["label"]):
    want_C = np.zeros(1000, np.float32)
    want_C[list(ex["real_label"])] = 1.0
    np.testing.assert_array_equal(labels_C, want_C)
    assert label == ex["original_label"]
