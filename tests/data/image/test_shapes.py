"""synthetic_shapes: reproducible examples, the splits TFDS stores, and a task that is learnable
from shape but not from pixels. Built offline into a tmp data_dir with the splits shrunk."""

import collections

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestCentroid
import tensorflow_datasets as tfds

from vit_jax.data import tfds_builders
from vit_jax.data.image import pipeline
from vit_jax.data.image import shape_drawing
from vit_jax.data.image import shapes

SMALL = {"train": 600, "test": 200}  # the real generator, fewer examples


@pytest.fixture(scope="module")
def shapes_dir(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("tfds_shapes"))
  with pytest.MonkeyPatch.context() as m:
    m.setattr(shapes, "SPLIT_SIZES", SMALL)
    # Through the pipeline, as training opens it: a missing synthetic_shapes is built on the spot.
    pipeline.dataset_info(shapes.NAME, data_dir=data_dir)
  return data_dir


def _stored(data_dir, split):
  ds = tfds.builder(shapes.NAME, data_dir=data_dir).as_dataset(split=split)
  return [(ex["image"], int(ex["label"])) for ex in tfds.as_numpy(ds)]


def test_documented_split_sizes():
  assert shapes.SPLIT_SIZES == {"train": 50_000, "test": 10_000}
  assert shapes.SPLIT_SEEDS["train"] != shapes.SPLIT_SEEDS["test"]


def test_builds_offline_with_splits_and_class_names(shapes_dir):
  builder = tfds.builder(shapes.NAME, data_dir=shapes_dir)
  assert builder.is_prepared()
  assert {k: v.num_examples for k, v in builder.info.splits.items()} == SMALL
  label = builder.info.features["label"]
  assert label.num_classes == 10 and tuple(label.names) == shape_drawing.CLASS_NAMES
  assert builder.info.features["image"].shape == (32, 32, 3)
  row = tfds_builders.IMAGE_DATASETS[shapes.NAME]
  assert (row.train_split, row.eval_split) == ("train", "test")
  assert row.built_here == "shapes"  # the module that registers it


def test_stored_examples_are_exactly_the_generated_ones(shapes_dir):
  for split, size in SMALL.items():
    seed = shapes.SPLIT_SEEDS[split]
    images = shape_drawing.draw_many(seed, range(size))
    expected = collections.Counter((image.tobytes(), i % 10) for i, image in enumerate(images))
    stored = _stored(shapes_dir, split)
    assert all(image.shape == (32, 32, 3) and image.dtype == np.uint8 for image, _ in stored)
    assert collections.Counter((image.tobytes(), label) for image, label in stored) == expected


def test_examples_are_pure_functions_of_seed_and_index():
  batch = shape_drawing.draw_many(1, range(40))
  np.testing.assert_array_equal(shape_drawing.draw_many(1, range(40)), batch)
  np.testing.assert_array_equal(shape_drawing.draw_many(1, range(39, -1, -1))[::-1], batch)
  np.testing.assert_array_equal(shape_drawing.draw_many(1, [7, 3]), batch[[7, 3]])
  np.testing.assert_array_equal(shape_drawing.draw(1, 17), batch[17])
  other_seed = shape_drawing.draw_many(2, range(40))
  assert not any((a == b).all() for a, b in zip(batch, other_seed))


def test_labels_balanced_and_images_vary_within_a_class(shapes_dir):
  train = _stored(shapes_dir, "train")
  labels = np.array([label for _, label in train])
  np.testing.assert_array_equal(np.bincount(labels, minlength=10), [60] * 10)
  images = np.stack([image for image, _ in train]).astype(np.float32)
  for c in range(10):
    members = images[labels == c]
    assert len({m.tobytes() for m in members}) == len(members)
    # Pose, colour and background differ: the per-pixel spread across a class is large.
    assert members.std(axis=0).mean() > 40, c


def test_train_slice_reads_a_fraction(shapes_dir):
  source = pipeline.sources.open_source(shapes.NAME, data_dir=shapes_dir)
  count = lambda split: sum(1 for _ in source.read(split, 0, 1))
  assert count("train[:10%]") == 60 and count("train[10%:30%]") == 120
  batch = next(
      pipeline.train_iterator(
          shapes.NAME,
          "train[:10%]",
          global_batch_size=8,
          image_size=32,
          seed=0,
          data_dir=shapes_dir,
          process_index=0,
          process_count=1,
      )
  )
  assert batch["image"].shape == (8, 32, 32, 3) and batch["labels"].shape == (8, 10)


def _shape_features(images_NxSxSx3):
  """Per image: where the pixels differ from the border's median colour (the object, mostly),
  described by its radial profile, elongation and compactness; plus the spectrum's radial
  profile (textures). All invariant to position, rotation and colour."""
  x = images_NxSxSx3.astype(np.float32) / 255
  border = np.concatenate([x[:, 0], x[:, -1], x[:, :, 0], x[:, :, -1]], axis=1)
  background = np.median(border, axis=1)[:, None, None]
  mask = (np.linalg.norm(x - background, axis=-1) > 0.2).astype(np.float32)
  yy, xx = np.mgrid[:32, :32].astype(np.float32)
  area = mask.sum((1, 2)) + 1e-6
  dy = yy - ((mask * yy).sum((1, 2)) / area)[:, None, None]
  dx = xx - ((mask * xx).sum((1, 2)) / area)[:, None, None]
  r = np.hypot(dy, dx) / np.sqrt(area / np.pi)[:, None, None]
  radial = _histograms(r, mask, 8, 2.0) / area[:, None]
  myy, mxx, mxy = ((mask * a).sum((1, 2)) / area for a in (dy * dy, dx * dx, dx * dy))
  spread = np.sqrt(np.maximum((myy - mxx) ** 2 / 4 + mxy**2, 0))
  elongation = ((myy + mxx) / 2 - spread) / ((myy + mxx) / 2 + spread + 1e-6)
  interior = mask[:, 1:-1, 1:-1] * mask[:, :-2, 1:-1] * mask[:, 2:, 1:-1]
  interior = interior * mask[:, 1:-1, :-2] * mask[:, 1:-1, 2:]
  compactness = (area - interior.sum((1, 2))) ** 2 / area
  gray = x.mean(-1) - x.mean((1, 2, 3))[:, None, None]
  frequency = np.hypot(*np.meshgrid(np.fft.fftfreq(32), np.fft.fftfreq(32)))
  spectrum = _histograms(np.broadcast_to(frequency, gray.shape), np.abs(np.fft.fft2(gray)), 8, 0.71)
  spectrum /= spectrum.sum(1, keepdims=True)
  return np.column_stack([radial, elongation, compactness, spectrum])


def _histograms(values_NxSxS, weights_NxSxS, bins, high):
  n = len(values_NxSxS)
  bin_NxP = np.clip((values_NxSxS.reshape(n, -1) / high * bins).astype(int), 0, bins - 1)
  flat = (np.arange(n)[:, None] * bins + bin_NxP).ravel()
  return np.bincount(flat, weights_NxSxS.ravel(), minlength=n * bins).reshape(n, bins)


def test_learnable_from_shape_not_from_pixels():
  train, test = shape_drawing.draw_many(1, range(2000)), shape_drawing.draw_many(2, range(1000))
  y_train, y_test = np.arange(2000) % 10, np.arange(1000) % 10
  # No class has a pixel template: a nearest-centroid on raw pixels is at chance (10%).
  flat = lambda a: a.reshape(len(a), -1).astype(np.float32)
  raw = NearestCentroid().fit(flat(train), y_train).score(flat(test), y_test)
  assert raw < 0.2, raw
  # Hand-made invariant shape features get well above chance (about 59%), far from perfect.
  f_train, f_test = _shape_features(train), _shape_features(test)
  mean, std = f_train.mean(0), f_train.std(0) + 1e-6
  model = LogisticRegression(max_iter=1000).fit((f_train - mean) / std, y_train)
  accuracy = model.score((f_test - mean) / std, y_test)
  assert 0.4 < accuracy < 0.9, accuracy
