"""Every family builds, runs forward and backward, in fp32 and bf16 compute with fp32 params."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import build_model
from vit_jax.models import position

IMAGES = jnp.ones((2, 32, 32, 3))
TOKENS = jnp.arange(16, dtype=jnp.int32).reshape(2, 8) % 13

CASES = {
    "vit_token": ({"name": "vit", "variant": "Ti/8", "depth": 2, "num_classes": 5}, (IMAGES,)),
    "vit_gap_sincos": (
        {
            "name": "vit",
            "variant": "Ti/8",
            "depth": 2,
            "num_classes": 5,
            "classifier": "gap",
            "posemb": "sincos2d",
            "droppath_rate": 0.1,
        },
        (IMAGES,),
    ),
    "vit_map_prelogits": (
        {
            "name": "vit",
            "variant": "Ti/8",
            "depth": 2,
            "num_classes": 5,
            "classifier": "map",
            "representation_size": 32,
        },
        (IMAGES,),
    ),
    "mixer": ({"name": "mixer", "variant": "S/8", "num_blocks": 2, "num_classes": 5}, (IMAGES,)),
    "fnet": (
        {"name": "fnet", "patch_size": 8, "width": 32, "depth": 2, "mlp_dim": 64, "num_classes": 5},
        (IMAGES,),
    ),
    "resnet": (
        {"name": "resnet", "block_counts": (1, 1), "width": 32, "stem": "small", "num_classes": 5},
        (IMAGES,),
    ),
    "gpt_rope": (
        {"name": "gpt", "variant": "pico", "vocab_size": 13, "max_len": 8, "posemb": "rope"},
        (TOKENS,),
    ),
    "bert_classifier": (
        {
            "name": "bert_classifier",
            "variant": "tiny",
            "vocab_size": 13,
            "max_len": 8,
            "num_classes": 3,
        },
        (TOKENS,),
    ),
    "bert_mlm": (
        {"name": "bert_mlm", "variant": "tiny", "vocab_size": 13, "max_len": 8},
        (TOKENS,),
    ),
    "seq2seq": (
        {
            "name": "seq2seq",
            "vocab_size": 13,
            "width": 32,
            "num_layers": 1,
            "num_heads": 2,
            "mlp_dim": 64,
            "max_len": 8,
        },
        (TOKENS, TOKENS),
    ),
}


def loss_fn(model, params, inputs, rng):
  out = model.apply({"params": params}, *inputs, train=True, rngs={"dropout": rng})
  leaves = jax.tree.leaves(out)
  return sum(jnp.mean(jnp.square(x)) for x in leaves)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_forward_backward(name, dtype):
  cfg, inputs = CASES[name]
  if dtype == "bfloat16" and name in ("mixer", "fnet"):
    cfg = {**cfg, "dtype": dtype}
  elif dtype == "bfloat16":
    cfg = {**cfg, "dtype": dtype, "param_dtype": "float32"}
  model = build_model(cfg)
  params = model.init(jax.random.PRNGKey(0), *inputs)["params"]
  assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(params))
  # Heads start at zero; perturb so gradients reach every layer.
  params = jax.tree.map(lambda p: p + 0.01, params)
  loss, grads = jax.jit(
      jax.value_and_grad(lambda p: loss_fn(model, p, inputs, jax.random.PRNGKey(1)))
  )(params)
  assert np.isfinite(float(loss))
  assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))
  assert all(g.dtype == jnp.float32 for g in jax.tree.leaves(grads))


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
