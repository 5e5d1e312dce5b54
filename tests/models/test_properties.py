"""Structural properties: permutation equivariance, causality, packing, patch embedding, padding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import build_model
from vit_jax.models import masks
from vit_jax.models import transformer

CFG = transformer.BlockConfig(num_heads=4, mlp_dim=64)


def test_encoder_without_position_embedding_is_permutation_equivariant():
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 9, 32))
  encoder = transformer.Encoder(CFG, num_layers=2, posemb="none")
  params = encoder.init(jax.random.PRNGKey(1), x)
  perm = np.random.default_rng(0).permutation(9)
  out = encoder.apply(params, x)
  out_perm = encoder.apply(params, x[:, perm])
  np.testing.assert_allclose(out_perm, out[:, perm], atol=1e-5)


def test_position_embedding_breaks_equivariance():
  x = jax.random.normal(jax.random.PRNGKey(0), (1, 9, 32))
  encoder = transformer.Encoder(CFG, num_layers=1, posemb="sincos1d")
  params = encoder.init(jax.random.PRNGKey(1), x)
  perm = np.roll(np.arange(9), 1)
  assert not np.allclose(
      encoder.apply(params, x[:, perm]), encoder.apply(params, x)[:, perm], atol=1e-3
  )


@pytest.mark.parametrize("pre_ln", [True, False])
def test_causal_gradient_is_exactly_zero_for_future_inputs(pre_ln):
  cfg = transformer.BlockConfig(num_heads=4, mlp_dim=64, pre_ln=pre_ln)
  length = 7
  encoder = transformer.Encoder(cfg, num_layers=2)
  x = jax.random.normal(jax.random.PRNGKey(0), (1, length, 32))
  params = encoder.init(jax.random.PRNGKey(1), x)
  mask = masks.causal_mask(length)
  # jac[t, d, s, e] = d out[t, d] / d x[s, e]
  jac = jax.jacobian(lambda inp: encoder.apply(params, inp, mask)[0])(x)[:, :, 0]
  influence_TxS = np.abs(np.asarray(jac)).sum(axis=(1, 3))
  future = np.triu(np.ones((length, length), bool), k=1)
  assert (influence_TxS[future] == 0.0).all()
  assert (influence_TxS[~future] > 0.0).all()


def test_gpt_is_causal_in_its_token_embeddings():
  model = build_model({"name": "gpt", "variant": "pico", "vocab_size": 31, "max_len": 16})
  tokens = jax.random.randint(jax.random.PRNGKey(0), (1, 8), 0, 31)
  params = model.init(jax.random.PRNGKey(1), tokens)
  logits = model.apply(params, tokens)
  for t in range(8):  # changing token t must not change logits before t
    changed = tokens.at[0, t].set((tokens[0, t] + 1) % 31)
    new = model.apply(params, changed)
    np.testing.assert_array_equal(new[:, :t], logits[:, :t])
    assert not np.allclose(new[:, t:], logits[:, t:])


def test_packed_segments_leak_nothing():
  model = build_model({"name": "gpt", "variant": "pico", "vocab_size": 31, "max_len": 16})
  tokens = jax.random.randint(jax.random.PRNGKey(0), (1, 12), 0, 31)
  segments = jnp.array([[1] * 5 + [2] * 4 + [3] * 3])
  positions = jnp.array([list(range(5)) + list(range(4)) + list(range(3))])
  params = model.init(jax.random.PRNGKey(1), tokens)
  logits = model.apply(params, tokens, positions, segments)
  changed = tokens.at[0, 6].set((tokens[0, 6] + 3) % 31)  # inside segment 2
  new = model.apply(params, changed, positions, segments)
  np.testing.assert_array_equal(new[:, :5], logits[:, :5])
  np.testing.assert_array_equal(new[:, 9:], logits[:, 9:])
  # Each packed document equals the same document run alone.
  alone = model.apply(params, tokens[:, 5:9])
  np.testing.assert_allclose(logits[:, 5:9], alone, atol=1e-5)


def test_patch_embedding_equals_explicit_patch_matmul():
  model = build_model(
      {
          "name": "vit",
          "variant": "Ti/4",
          "num_classes": 0,
          "depth": 1,
          "classifier": "unpooled",
          "posemb": "none",
      }
  )
  images = jax.random.normal(jax.random.PRNGKey(0), (2, 12, 8, 3))
  params = model.init(jax.random.PRNGKey(1), images)
  embed = params["params"]["embedding"]
  _, state = model.apply(
      params,
      images,
      capture_intermediates=lambda mdl, _: mdl.name == "embedding",
      mutable=["intermediates"],
  )
  conv_out = state["intermediates"]["embedding"]["__call__"][0].reshape(2, -1, 192)
  k = 4
  patches = np.asarray(images).reshape(2, 3, k, 2, k, 3).transpose(0, 1, 3, 2, 4, 5)
  patches_BxNxP = patches.reshape(2, 6, k * k * 3)
  kernel_PxD = np.asarray(embed["kernel"]).reshape(k * k * 3, 192)  # HWIO flattens as (h, w, c)
  expected = patches_BxNxP @ kernel_PxD + np.asarray(embed["bias"])
  np.testing.assert_allclose(conv_out, expected, atol=1e-4)


def test_bert_padding_leaves_real_tokens_unchanged():
  model = build_model({"name": "bert", "variant": "tiny", "vocab_size": 50, "max_len": 16})
  tokens = jax.random.randint(jax.random.PRNGKey(0), (1, 6), 0, 50)
  params = model.init(jax.random.PRNGKey(1), tokens)
  out = model.apply(params, tokens, input_mask_BxL=jnp.ones((1, 6)))
  padded = jnp.concatenate([tokens, jnp.array([[7, 3, 9]])], axis=1)
  out_pad = model.apply(params, padded, input_mask_BxL=jnp.array([[1] * 6 + [0] * 3]))
  np.testing.assert_allclose(out_pad["mlm_logits"][:, :6], out["mlm_logits"], atol=1e-4)
  np.testing.assert_allclose(out_pad["nsp_logits"], out["nsp_logits"], atol=1e-4)
