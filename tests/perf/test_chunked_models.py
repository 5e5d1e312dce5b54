"""Chunked attention through the models: equal to einsum, and no (T, S) array anywhere.

The models pass masks by their parts (masks.MaskSpec), so with attention_impl="chunked" the
compiled forward + backward holds nothing quadratic in length, not even a boolean mask.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np

from vit_jax.models import build_model

LENGTH = 600  # above the kernel's 512-key chunk: two chunks, the second one padded
GPT = {"name": "gpt", "variant": "pico", "vocab_size": 29, "max_len": LENGTH}
BERT = {"name": "bert_mlm", "variant": "tiny", "vocab_size": 29, "max_len": LENGTH, "depth": 2}


def packed_gpt_inputs(length=LENGTH):
  """Two rows: three packed documents then padding (segment 0), and one full document."""
  tokens_BxT = jax.random.randint(jax.random.PRNGKey(0), (2, length), 0, 29)
  cut1, cut2, end = length // 5, length // 2, length - 7
  index_T = jnp.arange(length)
  segments_T = jnp.where(index_T < cut1, 1, jnp.where(index_T < cut2, 2, 3)) * (index_T < end)
  segments_BxT = jnp.stack([segments_T, jnp.ones(length, jnp.int32)])
  starts_T = jnp.where(index_T < cut1, 0, jnp.where(index_T < cut2, cut1, cut2))
  positions_BxT = jnp.stack([index_T - starts_T, index_T])
  return tokens_BxT, positions_BxT, segments_BxT


def padded_bert_inputs(length=LENGTH):
  tokens_BxL = jax.random.randint(jax.random.PRNGKey(1), (2, length), 0, 29)
  input_mask_BxL = (jnp.arange(length)[None, :] < jnp.array([[length - 90], [length]])).astype(
      jnp.int32
  )
  return tokens_BxL, None, input_mask_BxL


def first_output(out):
  """GPT's logits, or BERT's masked-LM logits (at every position: no masked positions given)."""
  return jax.tree.leaves(out)[0]


def outputs_and_grads(config, params, inputs, impl):
  model = build_model({**config, "attention_impl": impl})

  def loss(params):
    logits_BxLxV = first_output(model.apply({"params": params}, *inputs))
    return jnp.mean(jnp.sin(logits_BxLxV)), logits_BxLxV

  (_, out), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
  return out, grads


def random_params(config, tokens_BxT):
  """Parameters of the model's shapes drawn with numpy (compiling its init takes longer than the
  test); LayerNorm scales near 1, the rest scaled by their fan-in."""
  shapes = jax.eval_shape(build_model(config).init, jax.random.PRNGKey(0), tokens_BxT)["params"]
  rng = np.random.default_rng(0)

  def draw(path, leaf):
    base = 1.0 if jax.tree_util.keystr(path).endswith("['scale']") else 0.0
    scale = leaf.shape[0] ** -0.5 if leaf.ndim > 1 else 0.1
    return jnp.asarray(base + scale * rng.standard_normal(leaf.shape), leaf.dtype)

  return jax.tree_util.tree_map_with_path(draw, shapes)


def assert_chunked_equals_einsum(config, inputs):
  params = random_params(config, inputs[0])
  want_out, want_grads = outputs_and_grads(config, params, inputs, "einsum")
  got_out, got_grads = outputs_and_grads(config, params, inputs, "chunked")
  np.testing.assert_allclose(np.asarray(got_out), np.asarray(want_out), rtol=0, atol=1e-5)
  flat_want = jax.tree_util.tree_leaves_with_path(want_grads)
  for (path, got), (_, want) in zip(jax.tree_util.tree_leaves_with_path(got_grads), flat_want):
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(want), rtol=0, atol=1e-5, err_msg=jax.tree_util.keystr(path)
    )
  assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(want_grads)) > 1e-3  # not all ~0


def test_packed_gpt_forward_and_grad_equal_einsum():
  assert_chunked_equals_einsum(GPT, packed_gpt_inputs())


def test_padded_bert_forward_and_grad_equal_einsum():
  assert_chunked_equals_einsum(BERT, padded_bert_inputs())


def square_arrays_in_lowered_grad(config, inputs, impl, length):
  """Shapes in the lowered fwd+bwd that end in (length, length): the T x S arrays."""
  model = build_model({**config, "attention_impl": impl, "max_len": length})
  params = jax.eval_shape(model.init, jax.random.PRNGKey(0), *inputs)["params"]
  loss = lambda params: jnp.sum(first_output(model.apply({"params": params}, *inputs)))
  text = jax.jit(jax.grad(loss)).lower(params).as_text()
  return sorted(set(re.findall(rf"tensor<[0-9x]*{length}x{length}x\w+>", text)))


def test_no_length_squared_array_in_the_compiled_chunked_models():
  length = 2048
  cases = {"gpt": (GPT, packed_gpt_inputs(length)), "bert": (BERT, padded_bert_inputs(length))}
  for name, (config, inputs) in cases.items():
    assert square_arrays_in_lowered_grad(config, inputs, "chunked", length) == [], name
    # The same search finds the (B, H, T, S) logits and the dense mask of the einsum path.
    found = square_arrays_in_lowered_grad(config, inputs, "einsum", length)
    assert any(t.endswith("xf32>") for t in found) and any(t.endswith("xi1>") for t in found), (
        name,
        found,
    )
