"""Chunked attention equals the einsum reference (values and gradients) under every mask kind."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import attention
from vit_jax.models import build_model
from vit_jax.models import chunked_attention
from vit_jax.models import masks

B, T, H, K = 2, 37, 3, 8  # T not a multiple of the chunk: the last chunk is padded


def qkv(seed=0, length=T):
  keys = jax.random.split(jax.random.PRNGKey(seed), 3)
  return [jax.random.normal(k, (B, length, H, K)) for k in keys]


def segments():
  return jnp.array([[1] * 20 + [2] * 17, [1] * 5 + [2] * 30 + [0] * 2])


def dense_mask(kind):
  if kind == "none":
    return None
  if kind == "causal":
    return masks.causal_mask(T, B)
  if kind == "segments":
    seg = segments()
    return seg[:, None, :, None] == seg[:, None, None, :]
  padding = jnp.arange(T)[None, :] < jnp.array([[30], [T]])  # row 0 pads its last keys
  return jnp.broadcast_to(padding[:, None, None, :], (B, 1, T, T))


def assert_close(a, b):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-5)


def assert_values_and_gradients_equal(chunked, mask, seed=0):
  """chunked(q, k, v) against einsum attention under the dense `mask`."""
  reference = lambda q, k, v: attention.einsum_attention(q, k, v, mask)[0]
  q, k, v = qkv(seed)
  assert_close(chunked(q, k, v), reference(q, k, v))
  loss = lambda fn: lambda *x: jnp.sum(fn(*x) * jnp.cos(jnp.arange(K)))
  for got, want in zip(
      jax.grad(loss(chunked), (0, 1, 2))(q, k, v), jax.grad(loss(reference), (0, 1, 2))(q, k, v)
  ):
    assert_close(got, want)


@pytest.mark.parametrize("kind", ["none", "causal", "segments", "padding"])
def test_values_and_gradients_equal_einsum_with_dense_masks(kind):
  mask = dense_mask(kind)
  chunked = lambda q, k, v: chunked_attention.chunked_attention(q, k, v, mask, chunk_size=8)
  assert_values_and_gradients_equal(chunked, mask)


def test_structural_masks_equal_dense_ones():
  q, k, v = qkv(1)
  seg = segments()
  got = chunked_attention.chunked_attention(
      q, k, v, causal=True, q_segment_ids_BxT=seg, kv_segment_ids_BxS=seg, chunk_size=16
  )
  mask = masks.combine(dense_mask("causal"), dense_mask("segments"))
  assert_close(got, attention.einsum_attention(q, k, v, mask)[0])


def test_fully_masked_rows_match_the_reference_in_values_and_gradients():
  # Every query sees keys < 10 only, and queries >= 30 see no key at all.
  mask = jnp.zeros((B, 1, T, T), bool).at[:, :, :30, :10].set(True)
  chunked = lambda q, k, v: chunked_attention.chunked_attention(q, k, v, mask, chunk_size=8)
  assert_values_and_gradients_equal(chunked, mask, seed=2)


@pytest.mark.parametrize("parts", ["causal_packed", "padding", "query_and_key_padding"])
def test_mask_spec_parts_equal_their_dense_mask(parts):
  """The parts MultiHeadAttention hands the kernel for a MaskSpec, against spec.dense()."""
  valid_BxT = jnp.arange(T)[None, :] < jnp.array([[30], [T]])
  spec = {
      "causal_packed": masks.MaskSpec(causal=True).with_segments(segments()),
      "padding": masks.MaskSpec().with_padding(valid_BxT),
      "query_and_key_padding": masks.MaskSpec().with_padding(valid_BxT, valid_BxT[::-1]),
  }[parts]
  chunked = lambda q, k, v: chunked_attention.chunked_attention(
      q,
      k,
      v,
      causal=spec.causal,
      q_segment_ids_BxT=spec.q_segment_ids_BxT,
      kv_segment_ids_BxS=spec.kv_segment_ids_BxS,
      q_valid_BxT=spec.q_valid_BxT,
      kv_valid_BxS=spec.kv_valid_BxS,
      chunk_size=8,
  )
  assert_values_and_gradients_equal(chunked, spec.dense(B, T, T), seed=3)


def test_gpt_selects_it_from_the_config():
  cfg = {"name": "gpt", "variant": "pico", "vocab_size": 29, "max_len": 32}
  tokens = jnp.arange(24).reshape(2, 12) % 29
  params = build_model(cfg).init(jax.random.PRNGKey(0), tokens)["params"]
  outputs = [
      build_model({**cfg, "attention_impl": impl}).apply({"params": params}, tokens)
      for impl in ("einsum", "chunked")
  ]
  assert_close(outputs[1], outputs[0])
