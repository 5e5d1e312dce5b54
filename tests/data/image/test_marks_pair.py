"""marks_pair: the marks are where and what the label says, the splits TFDS stores, and the bound
on rules that add one term per mark. Built offline into a tmp data_dir with the splits shrunk."""

import collections
import itertools

import numpy as np
import pytest
import tensorflow_datasets as tfds

from vit_jax.data.image import marks_pair
from vit_jax.data.image import pipeline

SMALL = {"train": 300, "test": 40, "test_d03": 20, "test_d21": 20}


@pytest.fixture(scope="module")
def marks_dir(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("tfds_marks"))
  with pytest.MonkeyPatch.context() as m:
    m.setattr(marks_pair, "SPLIT_SIZES", SMALL)
    # Through the pipeline, as training opens it: a missing marks_pair is built on the spot.
    pipeline.dataset_info(marks_pair.NAME, data_dir=data_dir)
  return data_dir


def _found_marks(image_SxSx3):
  """[(top row, left column, colour index)] of the coloured 3x3 blocks, read off the pixels:
  grey pixels have equal channels, a mark's pixels are far from grey. The first coloured pixel in
  raster order is a block's top-left corner (blocks are solid and never overlap, though they may
  touch); take the block away and repeat."""
  pixels = image_SxSx3.astype(np.float32) / 255
  coloured_SxS = pixels.max(-1) - pixels.min(-1) > 0.3
  marks = []
  while coloured_SxS.any():
    r, c = np.argwhere(coloured_SxS)[0]
    assert coloured_SxS[r : r + 3, c : c + 3].all(), "not a solid 3x3 block"
    coloured_SxS[r : r + 3, c : c + 3] = False
    block = pixels[r : r + 3, c : c + 3].reshape(-1, 3)
    colour = np.argmin(np.linalg.norm(marks_pair.COLOURS[:, None] - block[None], axis=-1).sum(1))
    marks.append((int(r), int(c), int(colour)))
  return marks


def test_documented_splits():
  assert marks_pair.SPLIT_SIZES["train"] == 60_000 and marks_pair.SPLIT_SIZES["test"] == 2_000
  for d in marks_pair.TEST_DISTANCES:
    assert marks_pair.SPLIT_SIZES[marks_pair.split_name(d)] == 2_000
    assert marks_pair.SPLIT_DISTANCES[marks_pair.split_name(d)] == d
  assert len(set(marks_pair.SPLIT_SEEDS.values())) == len(marks_pair.SPLIT_SEEDS)
  assert marks_pair.DISTANCES == tuple(range(3, 22))


@pytest.mark.parametrize("distance", [3, 4, 8, 9, 21])
def test_two_marks_at_the_distance_with_the_labels_colours(distance):
  images, layout = marks_pair.draw_many(5, range(40), distance)
  for i, image in enumerate(images):
    (r1, c1, colour1), (r2, c2, colour2) = sorted(_found_marks(image))
    assert max(abs(r1 - r2), abs(c1 - c2)) == distance
    assert (colour1 == colour2) == (marks_pair.label_of(i) == 1)
    assert sorted(map(tuple, layout["corners"][i])) == [(r1, c1), (r2, c2)]
  assert (layout["distance"] == distance).all()


def test_labels_balanced_and_one_mark_says_nothing():
  n = 8_000
  _, layout = marks_pair.draw_many(1, range(n))
  labels = np.arange(n) % 2
  colours = layout["colours"]
  assert ((colours[:, 0] == colours[:, 1]) == (labels == 1)).all()
  for label in (0, 1):
    for k in (0, 1):  # each mark's colour is uniform in both classes
      share = np.bincount(colours[labels == label, k], minlength=4) / (n / 2)
      np.testing.assert_allclose(share, 0.25, atol=0.03)
  # "different" pairs are uniform over the 12 ordered pairs of distinct colours
  pairs = collections.Counter(map(tuple, colours[labels == 0]))
  assert len(pairs) == 12 and max(pairs.values()) / min(pairs.values()) < 1.4


def test_train_distances_are_log_uniform():
  _, layout = marks_pair.draw_many(1, range(20_000))
  counts = np.bincount(layout["distance"], minlength=22)
  assert counts[:3].sum() == 0 and set(np.nonzero(counts)[0]) == set(marks_pair.DISTANCES)
  # P(d) proportional to 1/d: d x count is flat (within sampling error)
  weighted = counts[3:] * np.arange(3, 22)
  assert weighted.max() / weighted.min() < 1.25, weighted
  assert 0.5 < counts[3:9].sum() / 20_000 < 0.58  # the share within d <= 8 the docstring states


def test_builds_offline_and_stores_the_drawn_examples(marks_dir):
  builder = tfds.builder(marks_pair.NAME, data_dir=marks_dir)
  assert builder.is_prepared()
  assert {k: v.num_examples for k, v in builder.info.splits.items()} == SMALL
  assert tuple(builder.info.features["label"].names) == ("different", "same")
  for split, size in SMALL.items():
    seed, distance = marks_pair.SPLIT_SEEDS[split], marks_pair.SPLIT_DISTANCES[split]
    images, layout = marks_pair.draw_many(seed, range(size), distance)
    distances = layout["distance"]
    expected = collections.Counter(
        (image.tobytes(), i % 2, int(d)) for i, (image, d) in enumerate(zip(images, distances))
    )
    stored = tfds.as_numpy(builder.as_dataset(split=split))
    got = collections.Counter(
        (ex["image"].tobytes(), int(ex["label"]), int(ex["distance"])) for ex in stored
    )
    assert got == expected, split


def test_the_per_distance_splits_read_through_the_pipeline(marks_dir):
  batches = pipeline.eval_iterator(
      marks_pair.NAME,
      "test_d21",
      global_batch_size=8,
      image_size=24,
      data_dir=marks_dir,
      process_index=0,
      process_count=1,
  )
  batch = next(iter(batches))
  assert batch["image"].shape == (8, 24, 24, 3) and batch["labels"].shape == (8, 2)


def _accuracy(accepts_KxK) -> float:
  """Accuracy of "same iff (m1, m2) accepted" under the dataset's label distribution."""
  k = len(accepts_KxK)
  same = np.trace(accepts_KxK) / k
  different = (accepts_KxK.sum() - np.trace(accepts_KxK)) / (k * (k - 1))
  return 0.5 * same + 0.5 * (1 - different)


def _staircases(k):
  """Every accepted set of a rule a(m1) + b(m2) > t: with rows ordered by a and columns by b, row
  r accepts the top counts[r] columns, counts non-decreasing in a."""
  for rows in itertools.permutations(range(k)):
    for columns in itertools.permutations(range(k)):
      for counts in itertools.combinations_with_replacement(range(k + 1), k):
        accepts = np.zeros((k, k), bool)
        for rank, row in enumerate(rows):
          accepts[row, list(columns[k - counts[rank] :])] = True
        yield accepts


@pytest.mark.parametrize("k", [3, 4])
def test_no_sum_of_one_term_per_mark_beats_three_quarters(k):
  best = max(max(_accuracy(s), 1 - _accuracy(s)) for s in _staircases(k))  # either way round
  assert best == pytest.approx(marks_pair.ADDITIVE_BOUND)


def test_a_symmetric_sum_reaches_two_thirds_at_most():
  k = marks_pair.NUM_COLOURS
  best = 0.5
  for weights in itertools.product(range(5), repeat=k):  # a = b: every order of pair sums
    sums_KxK = np.add.outer(weights, weights)
    for t in np.unique(sums_KxK):
      accuracy = _accuracy(sums_KxK >= t)
      best = max(best, accuracy, 1 - accuracy)
  assert best == pytest.approx(marks_pair.SYMMETRIC_BOUND)
