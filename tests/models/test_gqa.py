"""Grouped-query attention: equal to multi-head attention with each key-value head repeated for
its group, the same outputs and gradients through every kernel a CPU can run, and a KV cache
that holds only the key-value heads; all of it also with heads of their own width (`head_dim`
apart from width / heads, as Qwen3's)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import attention
from vit_jax.models import gpt
from vit_jax.models import masks

HEADS = 4
X = jax.random.normal(jax.random.PRNGKey(0), (2, 12, 32))


def layer(impl="einsum", kv_heads=2, **kw):
  return attention.MultiHeadAttention(
      num_heads=HEADS, num_kv_heads=kv_heads, implementation=impl, **kw
  )


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_attention_is_multi_head_with_key_value_heads_repeated(kv_heads):
  params = layer(kv_heads=kv_heads, rope=True).init(jax.random.PRNGKey(1), X)["params"]
  assert params["key"]["kernel"].shape == (32, kv_heads, 8)
  assert params["query"]["kernel"].shape == (32, HEADS, 8)
  repeat = lambda p, axis: jnp.repeat(p, HEADS // kv_heads, axis=axis)  # query head h: h // G
  full = dict(params)
  for name in ("key", "value"):
    full[name] = dict(
        kernel=repeat(params[name]["kernel"], 1), bias=repeat(params[name]["bias"], 0)
    )
  spec = masks.MaskSpec(causal=True)
  grouped = layer(kv_heads=kv_heads, rope=True).apply({"params": params}, X, mask=spec)
  multi = layer(kv_heads=None, rope=True).apply({"params": full}, X, mask=spec)
  np.testing.assert_allclose(grouped, multi, atol=1e-6)


@pytest.mark.parametrize("impl", ["xla", "chunked", "splash"])
def test_every_cpu_kernel_gives_the_reference_outputs_and_gradients(impl):
  # Heads 12 wide, not 32 / 4 = 8 (test_attention.py has the kernels at width / heads).
  layer = functools.partial(globals()["layer"], head_dim=12)
  params = layer().init(jax.random.PRNGKey(1), X)
  assert params["params"]["query"]["kernel"].shape == (32, HEADS, 12)
  assert params["params"]["out"]["kernel"].shape == (HEADS, 12, 32)
  segments = jnp.array([[1] * 7 + [2] * 5, [1] * 12])
  spec = masks.MaskSpec(causal=True).with_segments(segments)
  cotangent = jax.random.normal(jax.random.PRNGKey(2), X.shape)

  def loss(impl):
    return lambda p, x: jnp.sum(layer(impl).apply(p, x, mask=spec) * cotangent)

  out, ref = (layer(i).apply(params, X, mask=spec) for i in (impl, "einsum"))
  np.testing.assert_allclose(out, ref, atol=1e-5)
  grads = jax.grad(loss(impl), argnums=(0, 1))(params, X)
  grads_ref = jax.grad(loss("einsum"), argnums=(0, 1))(params, X)
  for (path, g), g_ref in zip(
      jax.tree_util.tree_leaves_with_path(grads), jax.tree_util.tree_leaves(grads_ref)
  ):
    np.testing.assert_allclose(g, g_ref, atol=1e-5, err_msg=jax.tree_util.keystr(path))


def test_the_kv_cache_holds_the_key_value_heads_and_decodes_as_the_full_forward():
  # Heads 48 wide, not pico's 64 / 2 = 32 (test_kv_cache.py has the cache at width / heads),
  # with QK-norm over that width.
  model = lambda decode: gpt.Gpt(
      vocab_size=31,
      variant="pico",
      posemb="rope",
      num_kv_heads=1,
      head_dim=48,
      qk_norm=True,
      decode=decode,
  )
  tokens = jax.random.randint(jax.random.PRNGKey(0), (2, 9), 0, 31)
  params = model(False).init(jax.random.PRNGKey(1), tokens)["params"]
  full = model(False).apply({"params": params}, tokens)
  cache = model(True).init(jax.random.PRNGKey(0), jnp.zeros((2, 9), jnp.int32))["cache"]
  key = cache["decoder"]["h_0"]["MultiHeadDotProductAttention_1"]["cached_key"]
  assert key.shape == (2, 1, 9, 48)  # (B, kv heads, max_len, K): 2 heads share 1
  step = jax.jit(
      lambda cache, tokens: model(True).apply(
          {"params": params, "cache": cache}, tokens, mutable=["cache"]
      )
  )
  logits, state = step(cache, tokens[:, :4])
  steps = [logits]
  for t in range(4, 9):
    logits, state = step(state["cache"], tokens[:, t : t + 1])
    steps.append(logits)
  np.testing.assert_allclose(jnp.concatenate(steps, axis=1), full, atol=1e-5)
