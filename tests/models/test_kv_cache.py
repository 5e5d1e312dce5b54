"""Decoding token by token with the KV cache reproduces the full forward pass."""

import jax
import jax.numpy as jnp
import pytest

from vit_jax.models import build_model
from vit_jax.models import sampling


def decode_all(model_cfg, params, tokens, prompt_len):
  model = build_model(model_cfg, decode=True)
  cache = model.init(jax.random.PRNGKey(0), jnp.zeros_like(tokens))["cache"]
  logits = []
  chunks = [(0, prompt_len)] + [(t, t + 1) for t in range(prompt_len, tokens.shape[1])]
  for start, end in chunks:
    out, state = model.apply(
        {"params": params, "cache": cache}, tokens[:, start:end], mutable=["cache"]
    )
    cache = state["cache"]
    logits.append(out)
  return jnp.concatenate(logits, axis=1)


@pytest.mark.parametrize("posemb", ["learn", "rope"])
@pytest.mark.parametrize("prompt_len", [1, 6])
def test_gpt_cache_matches_full_forward(posemb, prompt_len):
  cfg = {"name": "gpt", "variant": "pico", "vocab_size": 37, "max_len": 32, "posemb": posemb}
  model = build_model(cfg)
  tokens = jax.random.randint(jax.random.PRNGKey(3), (2, 14), 0, 37)
  params = model.init(jax.random.PRNGKey(1), tokens)["params"]
  full = model.apply({"params": params}, tokens)
  incremental = decode_all(cfg, params, tokens, prompt_len)
  assert float(jnp.abs(incremental - full).max()) <= 1e-5


def test_seq2seq_cache_matches_teacher_forcing():
  cfg = {
      "name": "seq2seq",
      "vocab_size": 40,
      "width": 32,
      "num_layers": 2,
      "num_heads": 4,
      "mlp_dim": 64,
      "max_len": 16,
      "dropout_rate": 0.0,
  }
  model = build_model(cfg)
  inputs = jax.random.randint(jax.random.PRNGKey(1), (2, 7), 0, 40)
  targets = jax.random.randint(jax.random.PRNGKey(2), (2, 9), 0, 40)
  input_mask = jnp.array([[1] * 7, [1] * 5 + [0] * 2])
  params = jax.jit(model.init)(jax.random.PRNGKey(0), inputs, targets)["params"]
  full = model.apply({"params": params}, inputs, targets, input_mask)
  encoded = model.apply({"params": params}, inputs, input_mask, method=model.encode)
  decoder = build_model(cfg, decode=True)
  cache = decoder.init(
      jax.random.PRNGKey(0), jnp.zeros_like(targets), encoded, method=decoder.decode_logits
  )["cache"]
  step = sampling.seq2seq_decode_step(decoder, params, encoded, input_mask)
  steps = []
  for t in range(targets.shape[1]):
    out, state = step(cache, targets[:, t : t + 1])
    cache = state["cache"]
    steps.append(out)
  assert float(jnp.abs(jnp.concatenate(steps, axis=1) - full).max()) <= 1e-5


def test_rope_cache_without_positions_counts_from_the_cache_index():
  """A decoding layer given no positions numbers queries from its cache index (0, 1, 2, ...),
  so prefill + one-token steps equal one causal pass with RoPE at positions 0..T-1."""
  # pylint: disable-next=g-import-not-at-top
  from vit_jax.models import attention
  from vit_jax.models import masks

  x_BxTxD = jax.random.normal(jax.random.PRNGKey(0), (2, 7, 16))
  layer = attention.MultiHeadAttention(num_heads=2, rope=True)
  params = layer.init(jax.random.PRNGKey(1), x_BxTxD)["params"]
  full_BxTxD = layer.apply({"params": params}, x_BxTxD, mask=masks.causal_mask(7, 2))
  decoder = attention.MultiHeadAttention(num_heads=2, rope=True, decode=True)
  cache = decoder.init(jax.random.PRNGKey(1), jnp.zeros_like(x_BxTxD))["cache"]
  outs = []
  for start, end in [(0, 3)] + [(t, t + 1) for t in range(3, 7)]:
    out, state = decoder.apply(
        {"params": params, "cache": cache}, x_BxTxD[:, start:end], mutable=["cache"]
    )
    cache = state["cache"]
    outs.append(out)
  assert float(jnp.abs(jnp.concatenate(outs, axis=1) - full_BxTxD).max()) <= 1e-5
