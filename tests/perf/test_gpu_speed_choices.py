"""The GPU speed choices, checked on the CPU: each computes what the plain form computes, and the
program is the one chosen.

- cuDNN's attention at an odd length (ViT's 197 tokens): inputs padded to an even length, the
  padded keys hidden by the kernel's key lengths; run here through JAX's own XLA implementation
  of the same call (jax.nn.dot_product_attention with key lengths), which cuDNN's must match.
- The LM head's vocabulary padded to a multiple of 128: the same logits and gradients.
- The token embedding looked up in the parameters' dtype: its gradient is an fp32 scatter-add.
- The step as a whole (padded head, one-pass loss, fp32 lookup) against the plain formulation
  (optax's loss, the head unpadded): the same loss and gradients to bf16 precision.
- cuDNN's call with a packing mask is traced with JAX asking for no gradient of the mask's bias.
- The fresh state is drawn with JAX's Threefry kernel on the platforms listed (the GPU's), the
  same bits on a CPU either way.
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests import helpers
from vit_jax import startup
from vit_jax import tasks
from vit_jax.models import attention
from vit_jax.models import build_model
from vit_jax.models import gpt
from vit_jax.models import masks
from vit_jax.tasks import token_cross_entropy
from vit_jax.training import setup as setup_lib

GPT = {"name": "gpt", "variant": "pico", "width": 32, "depth": 2, "num_heads": 2, "max_len": 64}


@pytest.fixture
def cudnn_on_cpu(monkeypatch):
  """attention runs as on a GPU; cuDNN's call goes to JAX's XLA implementation of the same call.
  Returns [query length, key lengths] of every such call."""
  calls = []
  plain = jax.nn.dot_product_attention

  def as_xla(*args, implementation=None, **kwargs):
    assert implementation == "cudnn"
    call = [args[0].shape[1], None]
    calls.append(call)
    # The key lengths' values, once the (jitted) step runs.
    jax.debug.callback(
        lambda lengths: call.__setitem__(1, lengths), kwargs["key_value_seq_lengths"]
    )
    return plain(*args, implementation="xla", **kwargs)

  monkeypatch.setattr(attention, "target_platform", lambda: "gpu")
  monkeypatch.setattr(jax.nn, "dot_product_attention", as_xla)
  return calls


def assert_close_in_bf16(got, want, where: str = ""):
  """Equal to bf16's precision: each element within 2% of the largest."""
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  worst = float(np.max(np.abs(got - want)))
  assert worst <= 0.02 * float(np.max(np.abs(want))), (where, worst, float(np.max(np.abs(want))))


def _with_random_biases(params, seed: int = 1):
  """`params` with every bias drawn from N(0, 1) (init's are zero)."""
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map_with_path(
      lambda path, x: (
          jnp.asarray(rng.standard_normal(x.shape), x.dtype)
          if jax.tree_util.keystr(path).endswith("['bias']")
          else x
      ),
      params,
  )


@pytest.mark.parametrize("causal", [False, True])
def test_odd_lengths_padded_for_cudnn_attend_as_unpadded(cudnn_on_cpu, causal):
  batch, length, width, offset = 2, 197, 64, 3.0
  rng = np.random.default_rng(0)
  x_BxTxD = jnp.asarray(offset + rng.standard_normal((batch, length, width)), jnp.bfloat16)
  mask = masks.MaskSpec(causal=causal)

  def module(implementation):
    return attention.MultiHeadAttention(
        num_heads=2, implementation=implementation, dtype=jnp.bfloat16
    )

  params = _with_random_biases(module("xla").init(jax.random.PRNGKey(0), x_BxTxD, mask=mask))
  # The zero row the padding adds makes a key of the key bias alone, where every real key also
  # holds kernel @ x, about kernel @ offset: queries pointed away from that direction would give
  # the padded key (value: the value bias alone) nearly all their attention if it were visible
  # (without causality; with it, the padded key, the last, is after every real query anyway).
  real_key_HxK = jnp.einsum("d,dhk->hk", jnp.full(width, offset), params["params"]["key"]["kernel"])
  away_HxK = -4 * real_key_HxK / jnp.linalg.norm(real_key_HxK, axis=-1, keepdims=True)
  params["params"]["query"]["bias"] = away_HxK * np.sqrt(width // 2)

  def loss(params, x, implementation):
    out = module(implementation).apply(params, x, mask=mask)
    return jnp.sum(out.astype(jnp.float32) ** 2), out

  def step(implementation):  # jitted: a new function per implementation, traced once each
    grad_fn = jax.value_and_grad(
        functools.partial(loss, implementation=implementation), (0, 1), True
    )
    return jax.jit(grad_fn)(params, x_BxTxD)

  (value, out), grads = step("auto")
  (ref_value, ref_out), ref_grads = step("xla")
  (padded_length, key_lengths), *_ = cudnn_on_cpu
  assert padded_length == 198 and out.shape == (batch, length, width)
  np.testing.assert_array_equal(key_lengths, [length] * batch)
  assert_close_in_bf16(out, ref_out)
  np.testing.assert_allclose(value, ref_value, rtol=0.02)
  # Every gradient to bf16 precision, against the largest (the key bias's is rounding noise:
  # softmax does not change when the same amount is added to a row's logits).
  scale = max(float(np.linalg.norm(np.asarray(g, np.float32))) for g in jax.tree.leaves(ref_grads))
  for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads)):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert np.linalg.norm(got - want) <= 0.02 * scale


# (queries, keys): equal (even, and odd: cuDNN pads), more keys (by one, by two) and more queries.
LENGTHS = [(4, 4), (3, 3), (3, 4), (3, 5), (4, 3)]


@pytest.mark.parametrize("padding", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_auto_attends_as_xla_for_any_lengths_and_mask(cudnn_on_cpu, causal, padding):
  """On a GPU, `auto` takes cuDNN where it computes the attention exactly (padding odd lengths
  where that is exact) and XLA elsewhere: the same outputs for every combination."""
  rng = np.random.default_rng(0)
  width, batch = 16, 2
  for q_len, kv_len in LENGTHS:
    x_q = jnp.asarray(3 + rng.standard_normal((batch, q_len, width)), jnp.bfloat16)
    x_kv = jnp.asarray(3 + rng.standard_normal((batch, kv_len, width)), jnp.bfloat16)
    mask = masks.MaskSpec(causal=causal)
    if padding:  # the second example's last key is padding
      key_valid = jnp.stack([jnp.ones(kv_len, bool), jnp.arange(kv_len) < kv_len - 1])
      mask = mask.with_padding(jnp.ones((batch, q_len), bool), key_valid)
    inputs = (x_q,) if q_len == kv_len else (x_q, x_kv)
    module = lambda impl: attention.MultiHeadAttention(2, implementation=impl, dtype=jnp.bfloat16)
    params = _with_random_biases(module("xla").init(jax.random.PRNGKey(0), *inputs, mask=mask))
    out = {
        impl: np.asarray(jax.jit(module(impl).apply)(params, *inputs, mask=mask), np.float32)
        for impl in ("auto", "xla")
    }
    assert_close_in_bf16(out["auto"], out["xla"], f"T={q_len} S={kv_len}")


def _gpt_loss(config, dtype="float32"):
  model = build_model({**config, "dtype": dtype})
  rng = np.random.default_rng(1)
  tokens = jnp.asarray(rng.integers(0, config["vocab_size"], (2, 17)), jnp.int32)
  targets = jnp.asarray(rng.integers(0, config["vocab_size"], (2, 17)), jnp.int32)
  params = model.init(jax.random.PRNGKey(0), tokens)["params"]

  def loss(params):
    logits = model.apply({"params": params}, tokens)
    return token_cross_entropy.weighted_cross_entropy(logits, targets, jnp.ones(targets.shape))[0]

  return loss, params


def test_padded_lm_head_gives_the_same_logits_and_gradients(monkeypatch):
  config = {**GPT, "vocab_size": 100}
  loss, params = _gpt_loss(config)
  value, grads = jax.jit(jax.value_and_grad(loss))(params)
  monkeypatch.setitem(gpt.VOCAB_PAD_MULTIPLE, "cpu", 128)
  padded_value, padded_grads = jax.jit(jax.value_and_grad(loss))(params)
  hlo = jax.jit(jax.grad(loss)).lower(params).as_text()
  assert "2x17x128" in hlo  # the head's product runs over the padded vocabulary
  np.testing.assert_allclose(padded_value, value, rtol=1e-6)
  for got, want in zip(jax.tree.leaves(padded_grads), jax.tree.leaves(grads)):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
  assert jax.tree.map(jnp.shape, padded_grads) == jax.tree.map(jnp.shape, params)


def test_the_token_embedding_gradient_is_an_fp32_scatter_add():
  config = {**GPT, "vocab_size": 101}
  loss, params = _gpt_loss(config, dtype="bfloat16")
  hlo = jax.jit(jax.grad(loss)).lower(params).as_text()
  scatters = re.findall(
      r'"stablehlo.scatter"[^\n]*\n(?:[^\n]*\n){0,12}?[^\n]*-> tensor<([^>]*)>', hlo
  )
  table = [s for s in scatters if s.startswith("101x32x")]
  assert table and all(s.endswith("f32") for s in table), scatters


def test_the_step_matches_the_plain_formulation_to_bf16_precision(monkeypatch):
  """Padded head and one-pass loss against optax's loss on the unpadded head, in bf16."""
  config = {**GPT, "vocab_size": 300}
  loss, params = _gpt_loss(config, dtype="bfloat16")
  monkeypatch.setitem(gpt.VOCAB_PAD_MULTIPLE, "cpu", 128)
  value, grads = jax.jit(jax.value_and_grad(loss))(params)
  monkeypatch.delitem(gpt.VOCAB_PAD_MULTIPLE, "cpu")

  def plain(logits, targets, weights):
    nll = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)
    return jnp.sum(nll * weights), jnp.sum((jnp.argmax(logits, -1) == targets) * weights)

  monkeypatch.setattr(token_cross_entropy, "weighted_cross_entropy", plain)
  ref_value, ref_grads = jax.jit(jax.value_and_grad(loss))(params)
  np.testing.assert_allclose(value, ref_value, rtol=1e-3)
  for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads)):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert np.linalg.norm(got - want) <= 1e-2 * np.linalg.norm(want) + 1e-6


@pytest.mark.parametrize(
    "backend, version, noted",
    [
        ("gpu", "0.10.2", True),
        ("gpu", "0.11.0", True),
        ("gpu", "0.11.1", False),
        ("cpu", "0.10.2", False),
    ],
)
def test_a_gpu_run_on_a_jaxlib_with_the_slow_scatter_says_so(monkeypatch, backend, version, noted):
  import jaxlib  # pylint: disable=g-import-not-at-top

  monkeypatch.setattr(jax, "default_backend", lambda: backend)
  monkeypatch.setattr(jaxlib, "__version__", version)
  note = startup.slow_gpu_scatter_note()
  assert (note is not None) == noted
  if noted:
    assert note.startswith(f"note: jaxlib {version} ") and "pip install -e '.[cuda]'" in note


def test_cudnn_is_asked_for_no_gradient_of_the_packing_mask(monkeypatch):
  """JAX 0.8.0 to 0.11.0 ask cuDNN for every bias's gradient (`should_export_dbias`), a boolean
  mask's too: while our call is traced it says no, and it is JAX's own again afterwards."""
  from jax._src.cudnn import fused_attention_stablehlo as jax_cudnn  # pylint: disable=g-import-not-at-top

  asked = []
  plain = jax.nn.dot_product_attention

  def as_xla(query, key, value, *, mask=None, implementation=None, **kwargs):
    assert implementation == "cudnn" and mask is not None and mask.dtype == jnp.bool_
    asked.append(jax_cudnn.should_export_dbias(mask.shape, query.shape, 0))
    return plain(query, key, value, mask=mask, implementation="xla", **kwargs)

  monkeypatch.setattr(attention, "target_platform", lambda: "gpu")
  monkeypatch.setattr(jax.nn, "dot_product_attention", as_xla)
  x_BxTxD = jnp.asarray(np.random.default_rng(0).standard_normal((2, 8, 16)), jnp.bfloat16)
  segments_BxT = jnp.asarray([[1, 1, 1, 2, 2, 2, 2, 0]] * 2)
  mask = masks.MaskSpec(causal=True).with_segments(segments_BxT)
  module = attention.MultiHeadAttention(2, dtype=jnp.bfloat16)
  params = module.init(jax.random.PRNGKey(0), x_BxTxD, mask=mask)
  loss = lambda p: jnp.sum(module.apply(p, x_BxTxD, mask=mask).astype(jnp.float32) ** 2)
  jax.grad(loss)(params)
  assert asked and not any(asked)
  assert jax_cudnn.should_export_dbias((2, 1, 8, 8), (2, 8, 2, 8), 0)


def test_the_fresh_state_is_drawn_with_the_threefry_kernel_where_listed(monkeypatch):
  """`Setup.fresh_state` traces the initialisation with JAX's Threefry kernel lowering on where
  the mesh's platform is in INIT_THREEFRY_KERNEL_PLATFORMS (the GPU's) and off elsewhere, then
  restores JAX's setting; a CPU's program ignores it, so the state is the same bits either way."""
  assert startup.INIT_THREEFRY_KERNEL_PLATFORMS == ("gpu",)
  config = helpers.vit_config("runlocal", num_classes=10, batch_size=8)
  config.model.update(width=32, depth=1, num_heads=2, mlp_dim=64)
  plain, traced_with = setup_lib.Setup.init_state, []

  def recording(self, rng):
    traced_with.append(jax.config.jax_threefry_gpu_kernel_lowering)
    return plain(self, rng)

  monkeypatch.setattr(setup_lib.Setup, "init_state", recording)
  states = []
  for platforms in (startup.INIT_THREEFRY_KERNEL_PLATFORMS, ("cpu",)):
    monkeypatch.setattr(startup, "INIT_THREEFRY_KERNEL_PLATFORMS", platforms)
    setup = setup_lib.prepare(config, tasks.build_task_without_data(config))
    traced_with.clear()  # prepare's own trace (eval_shape) is not the initialisation's
    states.append(jax.tree.leaves(setup.fresh_state()))
    assert traced_with == [platforms == ("cpu",)]
    assert not jax.config.jax_threefry_gpu_kernel_lowering
  for got, want in zip(*states):
    np.testing.assert_array_equal(got, want)
