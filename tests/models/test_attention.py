"""Attention: weights by hand, implementations agree, masks, padding, cross-attention."""

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import attention
from vit_jax.models import masks


def make(num_heads=4, **kw):
  return attention.MultiHeadAttention(num_heads=num_heads, **kw)


def test_weights_equal_softmax_by_hand_and_rows_sum_to_one():
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 16))
  layer = make(num_heads=2)  # heads != head width: the scale is 1/sqrt(head width)
  params = layer.init(jax.random.PRNGKey(1), x)
  _, weights = layer.apply(params, x, return_weights=True)
  p = params["params"]
  q = np.einsum("btd,dhk->bthk", x, p["query"]["kernel"]) + p["query"]["bias"]
  k = np.einsum("btd,dhk->bthk", x, p["key"]["kernel"]) + p["key"]["bias"]
  logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(q.shape[-1])
  expected = np.exp(logits - logits.max(-1, keepdims=True))
  expected /= expected.sum(-1, keepdims=True)
  np.testing.assert_allclose(weights, expected, atol=1e-5)
  np.testing.assert_allclose(np.asarray(weights).sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
def test_xla_and_einsum_implementations_agree(mask_kind):
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 6, 16))
  mask = {
      "none": None,
      "causal": masks.causal_mask(6, 2),
      "padding": masks.padding_mask(jnp.array([[1] * 6, [1] * 4 + [0] * 2])),
  }[mask_kind]
  params = make().init(jax.random.PRNGKey(1), x)
  out_xla = make(implementation="xla").apply(params, x, mask=mask)
  out_ref = make(implementation="einsum").apply(params, x, mask=mask)
  rows = slice(None) if mask_kind != "padding" else (0,)
  np.testing.assert_allclose(np.asarray(out_xla)[rows], np.asarray(out_ref)[rows], atol=1e-5)


def _qkv(dtype, shape=(2, 7, 3, 8)):
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  return [jax.random.normal(key, shape).astype(dtype) for key in keys]


@pytest.mark.parametrize("dtype, atol", [(jnp.float32, 2e-6), (jnp.bfloat16, 0.02)])
def test_xla_attention_and_its_gradients_are_jaxs(dtype, atol):
  """Same outputs and gradients as jax.nn.dot_product_attention's XLA path; under bf16 within
  a bf16 step of them (the softmax gradient is computed from the bf16 probabilities)."""
  mask = jax.random.bernoulli(jax.random.PRNGKey(3), 0.7, (2, 1, 7, 7)).at[..., 0].set(True)

  def loss(fn):
    return lambda *qkv: jnp.sum(fn(*qkv).astype(jnp.float32) ** 2)

  ours = loss(lambda q, k, v: attention.xla_attention(q, k, v, mask))
  jaxs = loss(
      lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=mask, implementation="xla")
  )
  qkv = _qkv(dtype)
  np.testing.assert_allclose(ours(*qkv), jaxs(*qkv), rtol=1e-5 if dtype == jnp.float32 else 1e-2)
  for mine, theirs in zip(jax.grad(ours, (0, 1, 2))(*qkv), jax.grad(jaxs, (0, 1, 2))(*qkv)):
    np.testing.assert_allclose(np.float32(mine), np.float32(theirs), atol=atol * 4, rtol=atol)


def test_xla_attention_keeps_half_the_backward_memory_of_jaxs():
  """Its backward keeps the probabilities alone, not fp32 logits beside them: four bf16 layers'
  temporaries, compiled here, are well under jax.nn.dot_product_attention's."""
  x = jax.ShapeDtypeStruct((8, 128, 4, 32), jnp.bfloat16)

  def temporaries(fn):
    def loss(q):
      for _ in range(4):
        q = fn(q, q, q) + q
      return q.astype(jnp.float32).sum()

    return jax.jit(jax.grad(loss)).lower(x).compile().memory_analysis().temp_size_in_bytes

  ours = temporaries(attention.xla_attention)
  jaxs = temporaries(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="xla"))
  assert ours < 0.6 * jaxs, (ours, jaxs)


def test_padding_leaves_other_outputs_unchanged():
  x = jax.random.normal(jax.random.PRNGKey(0), (1, 5, 16))
  padded = jnp.concatenate([x, jax.random.normal(jax.random.PRNGKey(2), (1, 3, 16)) * 9.0], axis=1)
  layer = make()
  params = layer.init(jax.random.PRNGKey(1), x)
  out = layer.apply(params, x)
  valid = jnp.array([[1] * 5 + [0] * 3])
  out_padded = layer.apply(params, padded, mask=masks.padding_mask(valid))
  np.testing.assert_allclose(out_padded[:, :5], out, atol=1e-5)


def test_cross_attention_shapes_and_key_mask():
  q = jax.random.normal(jax.random.PRNGKey(0), (2, 3, 16))
  kv = jax.random.normal(jax.random.PRNGKey(1), (2, 7, 8))
  layer = make(qkv_features=32)
  params = layer.init(jax.random.PRNGKey(2), q, kv)
  out, weights = layer.apply(params, q, kv, return_weights=True)
  assert out.shape == (2, 3, 16) and weights.shape == (2, 4, 3, 7)
  mask = masks.padding_mask(jnp.ones((2, 3)), jnp.array([[1] * 7, [1] * 2 + [0] * 5]))
  _, weights = layer.apply(params, q, kv, mask=mask, return_weights=True)
  assert float(jnp.abs(weights[1, :, :, 2:]).max()) == 0.0


def test_attention_dropout_needs_rng_and_changes_weights():
  x = jax.random.normal(jax.random.PRNGKey(0), (1, 4, 16))
  layer = make(dropout_rate=0.5)
  params = layer.init(jax.random.PRNGKey(1), x)
  with pytest.raises(flax.errors.InvalidRngError, match="dropout"):
    layer.apply(params, x, deterministic=False)
  eval_out = layer.apply(params, x)
  train_out = layer.apply(params, x, deterministic=False, rngs={"dropout": jax.random.PRNGKey(3)})
  assert not np.allclose(eval_out, train_out)


def masked_reference(p, x_BxTxD, mask_BxTxS):
  """Attention by hand in numpy: masked keys get zero weight; the output projection after."""
  project = lambda name: np.einsum("btd,dhk->bthk", x_BxTxD, p[name]["kernel"]) + p[name]["bias"]
  q, k, v = project("query"), project("key"), project("value")
  logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(q.shape[-1])
  logits = np.where(mask_BxTxS[:, None], logits, -np.inf)
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights /= weights.sum(-1, keepdims=True)
  out = np.einsum("bhts,bshk->bthk", weights, v)
  return np.einsum("bthk,hkd->btd", out, p["out"]["kernel"]) + p["out"]["bias"]


def asymmetric_mask(length, batch):
  """A random mask that is neither symmetric nor triangular, with the diagonal on (no empty row)."""
  mask = np.random.default_rng(0).random((batch, length, length)) < 0.4
  return mask | np.eye(length, dtype=bool)[None]


@pytest.mark.parametrize("implementation", ["xla", "einsum"])
@pytest.mark.parametrize("mask_kind", ["causal", "key_padding", "segments", "asymmetric"])
def test_each_implementation_matches_a_masked_reference(implementation, mask_kind):
  batch, length = 2, 6
  x = np.asarray(jax.random.normal(jax.random.PRNGKey(0), (batch, length, 16)))
  mask_BxTxS = {
      "causal": np.asarray(masks.causal_mask(length, batch))[:, 0],
      # Queries stay valid; only keys are padded, differently per row.
      "key_padding": np.asarray(
          masks.padding_mask(np.ones((batch, length)), np.array([[1] * 6, [1] * 3 + [0] * 3]))
      )[:, 0],
      "segments": np.asarray(
          masks.segment_mask(np.array([[1, 1, 2, 2, 2, 3], [1, 2, 2, 1, 3, 3]]))
      )[:, 0],
      "asymmetric": asymmetric_mask(length, batch),
  }[mask_kind]
  layer = make(implementation=implementation)
  params = layer.init(jax.random.PRNGKey(1), x)
  out = layer.apply(params, x, mask=jnp.asarray(mask_BxTxS)[:, None])
  expected = masked_reference(jax.device_get(params["params"]), x, mask_BxTxS)
  np.testing.assert_allclose(np.asarray(out), expected, atol=2e-5)


def test_mismatched_mask_shape_is_a_clear_error():
  x = jnp.zeros((2, 5, 16))
  layer = make()
  params = layer.init(jax.random.PRNGKey(1), x)
  with pytest.raises(ValueError, match=r"mask has shape \(2, 1, 4, 4\).*\(2, 4, 5, 5\)"):
    layer.apply(params, x, mask=masks.causal_mask(4, 2))


def test_heads_must_divide_width():
  with pytest.raises(ValueError, match="not divisible by num_heads=3"):
    make(num_heads=3).init(jax.random.PRNGKey(0), jnp.zeros((1, 2, 16)))


def test_segment_mask_blocks_other_segments_and_padding():
  seg = jnp.array([[1, 1, 2, 2, 0]])
  m = np.asarray(masks.segment_mask(seg))[0, 0]
  assert m[0, 1] and m[2, 3] and not m[1, 2] and not m[3, 0] and not m[:, 4].any()


def test_mask_spec_dense_equals_the_dense_mask_builders():
  seg_BxT = jnp.array([[1, 1, 2, 2, 0], [1, 2, 2, 3, 3]])
  valid_BxT = jnp.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
  pairs = [
      (masks.MaskSpec(causal=True), masks.causal_mask(5, 2)),
      (
          masks.MaskSpec(causal=True).with_segments(seg_BxT),
          masks.combine(masks.causal_mask(5, 2), masks.segment_mask(seg_BxT)),
      ),
      (
          masks.MaskSpec().with_padding(valid_BxT).with_segments(seg_BxT),
          masks.combine(masks.padding_mask(valid_BxT), masks.segment_mask(seg_BxT)),
      ),
      (
          masks.MaskSpec().with_padding(jnp.ones((2, 5)), valid_BxT),
          masks.padding_mask(jnp.ones((2, 5)), valid_BxT),
      ),
  ]
  for spec, dense in pairs:
    np.testing.assert_array_equal(spec.dense(2, 5, 5), dense)
  assert masks.MaskSpec().dense(2, 5, 5) is None
  # Queries and keys with their own segment ids (and lengths): each side's padding is its own.
  q_seg_BxT, k_seg_BxS = jnp.array([[1, 2, 0], [2, 2, 1]]), jnp.array(
      [[1, 1, 2, 0, 0], [1, 2, 0, 2, 0]]
  )
  np.testing.assert_array_equal(
      masks.MaskSpec().with_segments(q_seg_BxT, k_seg_BxS).dense(2, 3, 5),
      masks.segment_mask(q_seg_BxT, k_seg_BxS),
  )
  # Causal with fewer queries than keys: the last query sees every key.
  rect_TxS = np.asarray(masks.MaskSpec(causal=True).dense(1, 2, 4))[0, 0]
  np.testing.assert_array_equal(rect_TxS, [[1, 1, 1, 0], [1, 1, 1, 1]])


@pytest.mark.parametrize("implementation", ["xla", "einsum", "chunked"])
def test_a_mask_spec_gives_what_its_dense_mask_gives(implementation):
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 6, 16))
  spec = masks.MaskSpec(causal=True).with_segments(jnp.array([[1, 1, 2, 2, 2, 0], [1] * 6]))
  layer = make(implementation=implementation)
  params = layer.init(jax.random.PRNGKey(1), x)
  np.testing.assert_allclose(
      layer.apply(params, x, mask=spec), layer.apply(params, x, mask=spec.dense(2, 6, 6)), atol=1e-6
  )


def test_mask_spec_errors_name_the_problem():
  x = jnp.zeros((2, 5, 16))
  params = make().init(jax.random.PRNGKey(1), x)
  with pytest.raises(ValueError, match=r"kv_valid_BxS has shape \(2, 4\).*\(2, 5\)"):
    make().apply(params, x, mask=masks.MaskSpec(kv_valid_BxS=jnp.ones((2, 4), bool)))
  with pytest.raises(ValueError, match="already has segment ids"):
    masks.MaskSpec().with_segments(jnp.ones((2, 5))).with_segments(jnp.ones((2, 5)))
  decoder = make(decode=True)
  cache = decoder.init(jax.random.PRNGKey(1), x)["cache"]
  with pytest.raises(ValueError, match="KV cache builds the causal mask"):
    decoder.apply(
        {**params, "cache": cache}, x[:, :1], mask=masks.MaskSpec(causal=True), mutable=["cache"]
    )
