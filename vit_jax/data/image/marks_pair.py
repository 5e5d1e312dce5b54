"""marks_pair: do two marks a given distance apart have the same colour? A TFDS dataset drawn
here from fixed seeds, for the locality experiment (experiments/locality.py).

Each 24x24 image is grey (0.5, with grey pixel noise of standard deviation 0.04) and holds two
3x3 solid marks, each one of K = 4 saturated COLOURS, whose top-left corners (and so centres) are
a Chebyshev distance d apart: max(|dy|, |dx|) = d px, the metric of a square receptive field. The
label is 1 ("same") when the marks have the same colour, else 0 ("different"); it is `index % 2`,
so every split is balanced. A "same" example draws its colour uniformly, a "different" one an
ordered pair of distinct colours uniformly, so either mark alone is uniform over the colours and
says nothing about the label. The offset's long axis, its sign and its other coordinate are
uniform, and the pair is placed uniformly among the positions where both marks fit.

  train     60,000 examples, d in 3..21 with P(d) proportional to 1/d (each scale of distance
            gets an equal share: 54% have d <= 8)
  test       2,000 examples, d drawn as for train
  test_dDD   2,000 examples at d = DD exactly, one split per DD in TEST_DISTANCES (test_d03, ...)

Classification evaluators on the test_dDD splits give accuracy against distance with no special
evaluator. An example is a pure function of (split seed, index), through the counter-based hash
of shape_drawing.hashed_uniforms, vectorised over examples, so examples can be drawn alone.

What a local model cannot do here: a model whose score is a sum of one term per mark (plus terms
of the background, which is independent of the label) decides by a rule `a(m1) + b(m2) > t`, and
no such rule is right on more than ADDITIVE_BOUND = 3/4 of the examples. Ordering the colours by
a, a colour x accepts the second marks y whose b(y) exceeds t - a(x), a set that grows with a(x);
so a rule accepting the "same" pairs (x, x) and (y, y) with a(x) <= a(y) also accepts (y, x), and
one accepting j of the K "same" pairs accepts at least j (j - 1) / 2 of the K (K - 1) "different"
ones. Its accuracy, 1/2 + (j / K - j (j - 1) / (2 K (K - 1))) / 2, peaks at j = K: 3/4, reached by
"same iff the second colour's rank is at most the first's", which needs to tell the marks apart.
A rule that cannot (a = b) peaks at SYMMETRIC_BOUND = 2/3 for K = 4 ("same iff both marks are in
a chosen half of the colours": 1/2 of "same" pairs, 1/6 of "different" ones).

Registering the builder (importing this module) makes `tfds.builder('marks_pair')` resolve;
vit_jax/data/tfds_builders.py imports it only when a run names the dataset and prepares it on
first use (about 20 s of one core for the 82,000 images; about 60 MB).
"""

import itertools

import numpy as np
import tensorflow_datasets as tfds

from vit_jax.data.image import drawn
from vit_jax.data.image import shape_drawing

NAME = "marks_pair"
IMAGE_SIZE = 24
MARK_SIZE = 3  # a mark is a solid square of this side
# The marks' colours (RGB in 0..1), saturated and far apart; everything else is grey.
COLOURS = np.array(
    [[0.9, 0.1, 0.1], [0.1, 0.75, 0.1], [0.15, 0.3, 1.0], [0.95, 0.85, 0.1]], np.float32
)
COLOUR_NAMES = ("red", "green", "blue", "yellow")
NUM_COLOURS = len(COLOURS)
CLASS_NAMES = ("different", "same")
ADDITIVE_BOUND = 3 / 4  # the best accuracy of any rule a(m1) + b(m2) > t (above; tested)
SYMMETRIC_BOUND = 2 / 3  # the same for rules with a = b, for K = 4 colours
DISTANCES = tuple(range(MARK_SIZE, IMAGE_SIZE - MARK_SIZE + 1))  # 3 (marks touch) .. 21
TEST_DISTANCES = (3, 4, 6, 8, 9, 10, 12, 15, 18, 21)
# Examples per split; tests shrink them (monkeypatch) to prepare a small copy quickly.
SPLIT_SIZES = {
    "train": 60_000,
    "test": 2_000,
    **{f"test_d{d:02d}": 2_000 for d in TEST_DISTANCES},
}
# None: d drawn from DISTANCES; an int: that distance only.
SPLIT_DISTANCES = {"train": None, "test": None, **{f"test_d{d:02d}": d for d in TEST_DISTANCES}}
SPLIT_SEEDS = {"train": 11, "test": 12, **{f"test_d{d:02d}": 100 + d for d in TEST_DISTANCES}}
_BACKGROUND = 0.5
_NOISE_STD = 0.04
_NUM_UNIFORMS = 8  # per example, before the noise; changing it changes the data


def split_name(distance: int) -> str:
  return f"test_d{distance:02d}"


def label_of(index: int) -> int:
  return index % 2


def draw(seed: int, index: int, distance: int | None = None) -> np.ndarray:
  """The example `index` of the split seeded `seed`: uint8 (24, 24, 3) of label_of(index)."""
  return draw_many(seed, [index], distance)[0][0]


def draw_many(seed: int, indices, distance: int | None = None):
  """(images uint8 (N, 24, 24, 3), layout): example i is draw(seed, indices[i], distance).

  `distance` None draws each example's distance as the train split does. `layout` holds int
  arrays: `colours` (N, 2), `corners` (N, 2, 2) (each mark's top row and left column) and
  `distance` (N,).
  """
  indices_N = np.asarray(indices, np.int64).reshape(-1)
  n, s = len(indices_N), IMAGE_SIZE
  u_NxK = shape_drawing.hashed_uniforms(seed, indices_N, _NUM_UNIFORMS + s * s)
  u = iter(u_NxK[:, :_NUM_UNIFORMS].T)  # each parameter takes the next fixed column
  noise_NxSxS = (u_NxK[:, _NUM_UNIFORMS:].reshape(n, s, s) - 0.5) * np.sqrt(12.0)  # unit variance

  # The colours: the same one (odd index), or an ordered pair of distinct ones (even).
  same_N = indices_N % 2 == 1
  first_N = _pick(next(u), NUM_COLOURS)
  second_N = (first_N + 1 + _pick(next(u), NUM_COLOURS - 1)) % NUM_COLOURS
  colours_Nx2 = np.stack([first_N, np.where(same_N, first_N, second_N)], axis=1)

  # The offset (dy, dx), max(|dy|, |dx|) = d; then the pair, uniformly among the places it fits.
  if distance is None:  # P(d) proportional to 1/d
    cumulative = np.cumsum(1 / np.asarray(DISTANCES))
    d_N = np.asarray(DISTANCES)[np.searchsorted(cumulative / cumulative[-1], next(u), "right")]
  else:
    if distance not in DISTANCES:
      raise ValueError(f"distance {distance} is not in {DISTANCES[0]}..{DISTANCES[-1]}")
    next(u)  # every split takes the same columns, whatever its distances
    d_N = np.full(n, distance)
  long_axis_is_rows_N = next(u) < 0.5
  long_N = np.where(next(u) < 0.5, -d_N, d_N)
  short_N = -d_N + _pick(next(u), 2 * d_N + 1)
  offset_Nx2 = np.where(
      long_axis_is_rows_N[:, None], np.stack([long_N, short_N], 1), np.stack([short_N, long_N], 1)
  )
  lowest_Nx2 = np.maximum(0, -offset_Nx2)  # the first mark's lowest top row and left column
  room_Nx2 = s - MARK_SIZE + 1 - np.abs(offset_Nx2)
  first_Nx2 = lowest_Nx2 + _pick(np.stack([next(u), next(u)], 1), room_Nx2)
  corners_Nx2x2 = np.stack([first_Nx2, first_Nx2 + offset_Nx2], axis=1)

  image_NxSxSx3 = np.full((n, s, s, 3), _BACKGROUND, np.float32)
  rows_N = np.arange(n)
  for k, i, j in itertools.product(range(2), range(MARK_SIZE), range(MARK_SIZE)):
    pixels = (rows_N, corners_Nx2x2[:, k, 0] + i, corners_Nx2x2[:, k, 1] + j)
    image_NxSxSx3[pixels] = COLOURS[colours_Nx2[:, k]]
  image_NxSxSx3 += _NOISE_STD * noise_NxSxS[..., None]  # grey: colour comes from the marks only
  images = np.round(np.clip(image_NxSxSx3, 0.0, 1.0) * 255).astype(np.uint8)
  return images, {"colours": colours_Nx2, "corners": corners_Nx2x2, "distance": d_N}


def _pick(u, count):
  """Uniforms in [0, 1) -> integers in [0, count) (count broadcasts)."""
  return np.minimum(np.floor(u * count), np.asarray(count) - 1).astype(np.int64)


class MarksPair(drawn.DrawnImages):
  """Two 3x3 coloured marks a given distance apart: the same colour or not. 24x24 RGB."""

  RELEASE_NOTES = {"1.0.0": "4 colours; train 60,000 and test 2,000 (d 3..21), 2,000 per test_dDD."}
  DESCRIPTION = (
      "Two 3x3 marks of 4 colours whose corners are a given Chebyshev distance apart on "
      "a noisy grey background; label: the marks have the same colour. Splits test_dDD "
      "hold one distance DD each."
  )

  def _features(self) -> dict:
    distance = tfds.features.Scalar(np.int32)
    return {**drawn.image_and_label(IMAGE_SIZE, CLASS_NAMES), "distance": distance}

  def _split_sizes(self) -> dict[str, int]:
    return SPLIT_SIZES

  def _draw(self, split: str, indices: range) -> list[dict]:
    images, layout = draw_many(SPLIT_SEEDS[split], indices, SPLIT_DISTANCES[split])
    return [
        {"image": images[i], "label": label_of(index), "distance": int(layout["distance"][i])}
        for i, index in enumerate(indices)
    ]
