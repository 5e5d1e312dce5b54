"""Position information against its formulas: the sin-cos tables cell by cell, RoPE against a
NumPy rotation, the embedding layer's prefix slots, decoding positions and grid resampling."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax import errors
from vit_jax.models import build_model
from vit_jax.models import position


def test_sincos_1d_formula():
  table = position.sincos_1d(50, 16)
  pos, i = 7, 3
  np.testing.assert_allclose(table[pos, 2 * i], np.sin(pos / 10000 ** (2 * i / 16)), rtol=1e-6)
  np.testing.assert_allclose(table[pos, 2 * i + 1], np.cos(pos / 10000 ** (2 * i / 16)), rtol=1e-6)


def test_sincos_2d_distinguishes_rows_and_columns():
  table = position.sincos_2d(4, 4, 32)
  assert table.shape == (16, 32)
  assert len({tuple(np.round(r, 5)) for r in table}) == 16
  np.testing.assert_allclose(table[1, :16], table[5, :16])  # same column -> same x half


def test_resample_grid_embedding_keeps_cls_and_interpolates():
  grid = np.arange(16, dtype=np.float32).reshape(4, 4)
  posemb = np.concatenate([np.full((1, 1), -1.0), grid.reshape(16, 1)])[None]  # (1, 17, 1)
  resized = position.resample_grid_embedding(posemb, (8, 8), prefix_tokens=1)
  assert resized.shape == (1, 65, 1) and resized[0, 0, 0] == -1.0
  new_grid = resized[0, 1:, 0].reshape(8, 8)
  assert np.all(np.diff(new_grid, axis=1) >= 0) and np.all(np.diff(new_grid, axis=0) >= 0)
  assert new_grid.min() >= 0.0 and new_grid.max() <= 15.0


def test_resampling_is_linear_with_the_corners_fixed_as_scipy_zoom_order_1():
  """The original ViT's resampling (scipy.ndimage.zoom(order=1), vision_transformer
  checkpoint.py:235-236): new cell (i, j) reads the old grid at (i, j) * (old - 1) / (new - 1), so
  a linear ramp stays exactly linear and the corners keep their values (half-pixel resizing,
  jax.image.resize's, would move them)."""
  old, new = 4, 7
  rows, cols = np.mgrid[:old, :old].astype(np.float32)
  ramp_HxWx2 = np.stack([rows * 4 + cols, 10 * rows - cols], -1)
  posemb = np.concatenate([np.zeros((1, 2), np.float32), ramp_HxWx2.reshape(-1, 2)])[None]
  resized = position.resample_grid_embedding(posemb, (new, new), prefix_tokens=1)
  y, x = np.mgrid[:new, :new] * (old - 1) / (new - 1)
  want_HxWx2 = np.stack([y * 4 + x, 10 * y - x], -1)
  np.testing.assert_allclose(resized[0, 1:].reshape(new, new, 2), want_HxWx2, atol=1e-5)


def test_vit_runs_at_new_resolution_after_resampling():
  small = build_model({"name": "vit", "variant": "Ti/8", "depth": 1, "num_classes": 3})
  params = small.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)))["params"]
  table = params["Transformer"]["posembed_input"]["pos_embedding"]
  params["Transformer"]["posembed_input"]["pos_embedding"] = position.resample_grid_embedding(
      table, (6, 6), prefix_tokens=1
  )
  logits = small.apply({"params": params}, jnp.ones((2, 48, 48, 3)))
  assert logits.shape == (2, 3)


def test_sincos_2d_cells_follow_the_formula():
  """Patch (row r, col c), frequency q of Q: [sin c w_q, cos c w_q, sin r w_q, cos r w_q]."""
  height, width, dim = 3, 5, 16
  quarter = dim // 4
  table = position.sincos_2d(height, width, dim)
  for r, c, q in [(2, 3, 1), (1, 4, 0), (2, 1, 3), (0, 2, 2)]:
    omega = 1.0 / 10_000 ** (q / (quarter - 1))
    row = table[r * width + c]
    expected = [np.sin(c * omega), np.cos(c * omega), np.sin(r * omega), np.cos(r * omega)]
    np.testing.assert_allclose(
        row[q::quarter], expected, rtol=1e-5, atol=1e-6, err_msg=f"patch ({r}, {c}), frequency {q}"
    )


def rope_by_hand(x_TxK, positions_T, base=10_000.0):
  """Rotates pair (x[f], x[f + K/2]) by angle position * base^(-f / (K/2)), one cell at a time."""
  length, width = x_TxK.shape
  half = width // 2
  out = np.empty_like(x_TxK, dtype=np.float64)
  for t in range(length):
    for f in range(half):
      angle = positions_T[t] * base ** (-f / half)
      a, b = x_TxK[t, f], x_TxK[t, f + half]
      out[t, f] = a * np.cos(angle) - b * np.sin(angle)
      out[t, f + half] = b * np.cos(angle) + a * np.sin(angle)
  return out


def test_rope_rotates_each_pair_by_position_times_frequency():
  x_BxTxHxK = np.random.default_rng(0).normal(size=(2, 5, 3, 8)).astype(np.float32)
  positions_BxT = np.array([[0, 1, 2, 3, 4], [7, 3, 0, 11, 2]])
  rotated = np.asarray(position.apply_rope(jnp.asarray(x_BxTxHxK), jnp.asarray(positions_BxT)))
  for b in range(2):
    for h in range(3):
      np.testing.assert_allclose(
          rotated[b, :, h], rope_by_hand(x_BxTxHxK[b, :, h], positions_BxT[b]), atol=1e-5
      )


def test_rope_scores_depend_only_on_the_offset():
  rng = np.random.default_rng(1)
  q_1x1x1xK, k_1x1x1xK = (jnp.asarray(rng.normal(size=(1, 1, 1, 16)), jnp.float32) for _ in "qk")

  def score(m, n):
    rq = position.apply_rope(q_1x1x1xK, jnp.array([[m]]))
    rk = position.apply_rope(k_1x1x1xK, jnp.array([[n]]))
    return float(jnp.sum(rq * rk))

  np.testing.assert_allclose(score(5, 2), score(13, 10), rtol=1e-5)
  np.testing.assert_allclose(score(0, 0), float(jnp.sum(q_1x1x1xK * k_1x1x1xK)), rtol=1e-6)
  assert abs(score(5, 2) - score(2, 5)) > 1e-3  # the sign of the offset matters


def test_rope_refuses_an_odd_head_width():
  with pytest.raises(ValueError, match="even head width"):
    position.apply_rope(jnp.zeros((1, 2, 1, 5)), jnp.zeros((1, 2), jnp.int32))


@pytest.mark.parametrize("kind", ["sincos1d", "sincos2d"])
def test_fixed_tables_skip_the_prefix_slots(kind):
  grid, prefix, dim = (2, 3), 1, 8
  length = prefix + grid[0] * grid[1]
  layer = position.AddPositionEmbedding(kind=kind, grid=grid, prefix_tokens=prefix)
  x_1xLxD = jnp.ones((1, length, dim))
  out = np.asarray(layer.apply({}, x_1xLxD))
  table = position.sincos_2d(*grid, dim) if kind == "sincos2d" else position.sincos_1d(6, dim)
  np.testing.assert_allclose(out[0, :prefix], 1.0)
  np.testing.assert_allclose(out[0, prefix:], 1.0 + table, rtol=1e-6)


def test_learned_table_has_a_slot_for_every_token_and_is_added():
  layer = position.AddPositionEmbedding(kind="learn", prefix_tokens=1)
  x_2xLxD = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 4))
  params = layer.init(jax.random.PRNGKey(1), x_2xLxD)
  table = params["params"]["pos_embedding"]
  assert table.shape == (1, 5, 4)
  np.testing.assert_allclose(layer.apply(params, x_2xLxD), x_2xLxD + table, rtol=1e-6)
  assert np.asarray(table).std() > 0  # initialized randomly, not zeros


def test_no_position_embedding_is_the_identity_and_unknown_kinds_are_named():
  x_1xLxD = jnp.arange(12.0).reshape(1, 3, 4)
  identity = position.AddPositionEmbedding(kind="none")
  np.testing.assert_array_equal(identity.apply({}, x_1xLxD), x_1xLxD)
  with pytest.raises(errors.ConfigError, match="Unknown position embedding 'rot'"):
    position.AddPositionEmbedding(kind="rot").apply({}, x_1xLxD)


def test_fixed_table_must_fit_the_sequence():
  layer = position.AddPositionEmbedding(kind="sincos2d", grid=(2, 2), prefix_tokens=0)
  with pytest.raises(ValueError, match="4 slots but the sequence has 5 tokens"):
    layer.apply({}, jnp.zeros((1, 5, 8)))


def test_arange_and_next_positions_count_from_the_cache():
  np.testing.assert_array_equal(position.arange_positions(2, 3, 4), [[4, 5, 6], [4, 5, 6]])

  class Counter(nn.Module):

    @nn.compact
    def __call__(self, length):
      counter = self.variable("cache", "index", lambda: jnp.array(0, jnp.int32))
      return position.next_positions(counter, 1, length)

  counter = Counter()
  cache = {"index": jnp.array(0, jnp.int32)}  # a fresh cache (init itself advances the counter)
  first, state = counter.apply({"cache": cache}, 3, mutable=["cache"])
  second, state = counter.apply(state, 2, mutable=["cache"])
  np.testing.assert_array_equal(first, [[0, 1, 2]])
  np.testing.assert_array_equal(second, [[3, 4]])
  assert int(state["cache"]["index"]) == 5


def test_resampling_to_the_same_grid_changes_nothing_and_odd_grids_are_refused():
  table = np.random.default_rng(0).normal(size=(1, 17, 3)).astype(np.float32)
  np.testing.assert_array_equal(position.resample_grid_embedding(table, (4, 4), 1), table)
  with pytest.raises(ValueError, match="not a square grid"):
    position.resample_grid_embedding(table[:, :16], (4, 4), 1)


def test_bad_widths_are_config_errors():
  with pytest.raises(errors.ConfigError, match="even width"):
    position.sincos_1d(4, 5)
  with pytest.raises(errors.ConfigError, match="divisible by 4"):
    position.sincos_2d(2, 2, 6)


def test_vit_cls_token_gets_no_fixed_embedding():
  """With a cls token and 2-D sin-cos, the table covers the patches; the cls slot adds nothing."""
  model = build_model(
      {"name": "vit", "variant": "Ti/8", "depth": 1, "num_classes": 3, "posemb": "sincos2d"}
  )
  params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 16, 16, 3)))["params"]
  assert "posembed_input" not in params["Transformer"]  # nothing learned
  logits = model.apply({"params": params}, jnp.ones((2, 16, 16, 3)))
  assert logits.shape == (2, 3)


@pytest.mark.parametrize(
    "scaling",
    [
        position.RopeScaling("linear", factor=4.0),
        # Llama 3.1's published values: every band (kept, blended, divided) at head width 128.
        position.RopeScaling("llama3", 8.0, 1.0, 4.0, 8192),
    ],
)
def test_rope_scaling_gives_transformers_frequencies(scaling):
  from tests import peers  # pylint: disable=g-import-not-at-top

  transformers = peers.require("transformers")
  from transformers import modeling_rope_utils  # pylint: disable=g-import-not-at-top

  rope = dict(rope_type=scaling.kind, factor=scaling.factor, rope_theta=500_000.0)
  if scaling.kind == "llama3":
    rope.update(
        low_freq_factor=scaling.low_freq_factor,
        high_freq_factor=scaling.high_freq_factor,
        original_max_position_embeddings=scaling.original_max_len,
    )
  config = transformers.LlamaConfig(hidden_size=1024, num_attention_heads=8, rope_parameters=rope)
  theirs, attention_scale = modeling_rope_utils.ROPE_INIT_FUNCTIONS[scaling.kind](config)
  assert attention_scale == 1.0
  ours = position.rope_frequencies(128, 500_000.0, scaling)
  plain = position.rope_frequencies(128, 500_000.0)
  assert 0 < np.sum(ours == plain) < 64 or scaling.kind == "linear"  # some kept, some scaled
  np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-6)
