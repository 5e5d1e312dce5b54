"""LocalCNN: its receptive field is 2 x depth + 1 px, and with two objects farther apart than that
its pooled features are exactly a sum of one term per object."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax import errors
from vit_jax.models import build_model
from vit_jax.models import local_cnn
from vit_jax.training import flops


def _init(model, size=24):
  return model.init(jax.random.PRNGKey(0), jnp.zeros((1, size, size, 3)))["params"]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_one_position_sees_exactly_its_receptive_field(depth):
  model = local_cnn.LocalCNN(num_classes=None, depth=depth, width=16)
  params = _init(model)
  image_1xSxSx3 = jax.random.normal(jax.random.PRNGKey(1), (1, 24, 24, 3))

  def at_position(image):  # the last conv's output at (12, 12), before the pool
    _, state = model.apply({"params": params}, image, capture_intermediates=True)
    feature_1xSxSxD = state["intermediates"][f"conv{depth}"]["__call__"][0]
    return jnp.sum(feature_1xSxSxD[0, 12, 12])

  gradient_SxS = np.abs(np.asarray(jax.grad(at_position)(image_1xSxSx3)[0])).sum(-1)
  rows, columns = np.nonzero(gradient_SxS)
  field = local_cnn.receptive_field(depth)
  assert field == 2 * depth + 1
  assert rows.min() == columns.min() == 12 - depth and rows.max() == columns.max() == 12 + depth
  assert len(rows) == field * field  # every pixel of the window counts, none outside it


def _with_marks(marks, size=24):
  """A grey image (batch 1) with 3x3 blocks of colour at (row, column, rgb)."""
  image = np.full((1, size, size, 3), 0.1, np.float32)
  for r, c, rgb in marks:
    image[0, r : r + 3, c : c + 3] = rgb
  return jnp.asarray(image)


@pytest.mark.parametrize("gap, additive", [(7, True), (15, True), (6, False), (3, False)])
def test_pooled_features_add_up_per_mark_beyond_the_field(gap, additive):
  """Depth 3 (field 7): marks whose nearest pixels are `gap` px apart share no window when gap > 6,
  and then features(both) = features(first) + features(second) - features(neither), exactly."""
  model = local_cnn.LocalCNN(num_classes=None, depth=3, width=16)
  params = _init(model)
  features = lambda marks: model.apply({"params": params}, _with_marks(marks))[0]
  first, second = (6, 2, (0.9, 0.1, 0.1)), (6, 2 + 2 + gap, (0.9, 0.1, 0.1))
  together = features([first, second])
  apart = features([first]) + features([second]) - features([])
  difference = float(jnp.max(jnp.abs(together - apart)))
  # Apart, only float rounding is left (about 1e-8); sharing a window, the ReLUs mix the marks
  # (2e-5 at gap 6, where a window's corner column holds a column of each, 1e-3 at gap 1).
  if additive:
    assert difference < 1e-6
  else:
    assert difference > 1e-5


def test_flops_are_its_convolutions_and_head():
  model = {"name": "local_cnn", "depth": 3, "width": 32, "num_classes": 2}
  counted = flops.train_flops_per_example(model, (jnp.zeros((1, 24, 24, 3)),)) / 3
  pixels = 24 * 24
  expected = 2 * pixels * 9 * (3 * 32 + 32 * 32 + 32 * 32) + 2 * 32 * 2
  assert counted == expected  # 22.2 M: the figure experiments/sweeps/locality_cpu.py quotes


def test_built_by_name_and_refuses_bad_shapes():
  model = build_model({"name": "local_cnn", "depth": 2, "width": 8, "num_classes": 3})
  params = _init(model)
  assert params["head"]["kernel"].shape == (8, 3)
  assert model.apply({"params": params}, jnp.ones((2, 24, 24, 3))).shape == (2, 3)
  with pytest.raises(errors.ConfigError, match="stride"):
    build_model({"name": "local_cnn", "stride": 2})
  with pytest.raises(errors.ConfigError, match="depth=0"):
    _init(local_cnn.LocalCNN(depth=0))
