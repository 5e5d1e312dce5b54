"""One block configuration for every family: each option reaches every block; scan and remat
change how blocks run, never what they compute."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import build_model
from vit_jax.models import transformer

IMAGES = jnp.ones((2, 16, 16, 3))
TOKENS = jnp.arange(16, dtype=jnp.int32).reshape(2, 8) % 13
FAMILIES = {
    "vit": (
        {
            "name": "vit",
            "variant": "Ti/8",
            "width": 32,
            "depth": 2,
            "num_heads": 2,
            "mlp_dim": 64,
            "num_classes": 3,
            "classifier": "map",
        },
        (IMAGES,),
    ),
    "gpt": ({"name": "gpt", "variant": "pico", "vocab_size": 13, "max_len": 8}, (TOKENS,)),
    "bert": (
        {"name": "bert_classifier", "variant": "tiny", "vocab_size": 13, "max_len": 8},
        (TOKENS,),
    ),
    "seq2seq": (
        {
            "name": "seq2seq",
            "vocab_size": 13,
            "width": 32,
            "num_layers": 2,
            "num_heads": 2,
            "mlp_dim": 64,
            "max_len": 8,
        },
        (TOKENS, TOKENS),
    ),
}
# Two valid values of every block option: whatever a family's default, one of them differs.
VALUES = {
    "dropout_rate": (0.25, 0.0),
    "attention_dropout_rate": (0.25, 0.0),
    "droppath_rate": (0.25, 0.0),
    "activation": ("relu", "gelu"),
    "mlp_hidden_dropout": (False, True),
    "kernel_init": ("truncated_normal", "normal"),
    "init_std": (0.05, 0.02),
    "scale_residual_init": (True, False),
    "norm_eps": (1e-3, 1e-6),
    "normalization": ("rmsnorm", "layernorm"),
    "gated_mlp": (True, False),
    "biases": ("qkv", "all"),
    "num_kv_heads": (1, None),
    "head_dim": (8, None),
    "qk_norm": (True, False),
    "rope_base": (500_000.0, 10_000.0),
    "rope_scaling": ("llama3", "none"),
    "rope_factor": (8.0, 1.0),
    "rope_low_freq_factor": (2.0, 1.0),
    "rope_high_freq_factor": (8.0, 4.0),
    "rope_original_max_len": (4096, 8192),
    "attention_impl": ("einsum", "xla"),
    "remat": ("full", "none"),
    "scan_layers": (True, False),
    "dtype": ("bfloat16", "float32"),
    "param_dtype": ("bfloat16", "float32"),
}


def block_configs(model, inputs):
  """The BlockConfig of every module that holds one, as seen while initializing `model`."""
  seen = []

  def record(next_fn, args, kwargs, context):
    if isinstance(getattr(context.module, "cfg", None), transformer.BlockConfig):
      seen.append((type(context.module).__name__, context.module.cfg))
    return next_fn(*args, **kwargs)

  with nn.intercept_methods(record):
    jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), *inputs))
  return seen


def test_every_option_has_test_values():
  assert set(VALUES) == {f.name for f in dataclasses.fields(transformer.BlockOptions)}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_option_reaches_every_block(family):
  config, inputs = FAMILIES[family]
  defaults = build_model(config)
  defaults = getattr(defaults, "bert", defaults)  # a BERT task model's options are its encoder's
  options = {
      name: next(v for v in values if v != getattr(defaults, name))
      for name, values in VALUES.items()
  }
  seen = block_configs(build_model({**config, **options}), inputs)
  kinds = {kind for kind, _ in seen}
  assert {"Encoder", "EncoderBlock"} <= kinds or {"Encoder", "ScannedBlocks"} <= kinds, kinds
  if family == "seq2seq":
    assert "Decoder" in kinds
  for kind, cfg in seen:
    assert {name: getattr(cfg, name) for name in options} == options, kind


def stack_layers(tree, num_layers):
  """Unrolled params {`block_i`: p_i} -> scanned {`block`: {"layers": {"block": stacked}}}."""
  out = {}
  for key, value in tree.items():
    if key.endswith("_0") and key[:-2] + "_1" in tree:
      layers = [tree[f"{key[:-2]}_{i}"] for i in range(num_layers)]
      out[key[:-2]] = {"layers": {"block": jax.tree.map(lambda *x: jnp.stack(x), *layers)}}
    elif not (key[-2] == "_" and key[-1].isdigit() and key[:-2] + "_0" in tree):
      out[key] = stack_layers(value, num_layers) if isinstance(value, dict) else value
  return out


def test_scanned_layers_compute_the_unrolled_stack():
  # seq2seq scans both of its stacks: encoder and decoder blocks.
  config, inputs = FAMILIES["seq2seq"]
  unrolled = build_model(config)
  params = unrolled.init(jax.random.PRNGKey(0), *inputs)["params"]
  scanned = build_model({**config, "scan_layers": True})
  expected = jax.eval_shape(lambda: scanned.init(jax.random.PRNGKey(0), *inputs))["params"]
  stacked = stack_layers(params, 2)
  assert jax.tree.structure(stacked) == jax.tree.structure(expected)
  np.testing.assert_allclose(
      scanned.apply({"params": stacked}, *inputs),
      unrolled.apply({"params": params}, *inputs),
      atol=1e-5,
  )


def test_remat_keeps_loss_and_gradients():
  # Encoder and decoder blocks (different call signatures), with dropout masks to replay.
  config, inputs = FAMILIES["seq2seq"]
  config = {**config, "dropout_rate": 0.1}

  def loss_and_grads(model_config):
    model = build_model(model_config)
    params = model.init(jax.random.PRNGKey(0), *inputs)["params"]

    def loss_fn(p):
      out = model.apply({"params": p}, *inputs, train=True, rngs={"dropout": jax.random.PRNGKey(1)})
      return jnp.mean(jnp.square(out))

    return jax.jit(jax.value_and_grad(loss_fn))(params)

  loss, grads = loss_and_grads(config)
  remat_loss, remat_grads = loss_and_grads({**config, "remat": "full"})
  np.testing.assert_allclose(remat_loss, loss, rtol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), remat_grads, grads)


def test_scanned_stack_refuses_to_return_attention():
  config, inputs = FAMILIES["vit"]
  model = build_model({**config, "scan_layers": True})
  with pytest.raises(ValueError, match="scan_layers=False"):
    model.init(jax.random.PRNGKey(0), *inputs, return_attention=True)


def test_scanned_layers_ramp_stochastic_depth_as_the_unrolled_stack():
  # Two layers at droppath_rate 1: the first block's rate is 0 (always kept), the last's 1
  # (always dropped), so a train-mode output does not depend on the dropout rng.
  config, inputs = FAMILIES["seq2seq"]
  config = {**config, "droppath_rate": 1.0, "dropout_rate": 0.0, "attention_dropout_rate": 0.0}
  unrolled = build_model(config)
  params = unrolled.init(jax.random.PRNGKey(0), *inputs)["params"]
  scanned = build_model({**config, "scan_layers": True})
  train = lambda model, p, seed: model.apply(
      {"params": p}, *inputs, train=True, rngs={"dropout": jax.random.PRNGKey(seed)}
  )
  expected = unrolled.apply({"params": params}, *inputs)  # no block dropped
  assert not np.allclose(train(unrolled, params, 1), expected, atol=1e-3)  # the last one was
  for seed in (1, 2):
    np.testing.assert_allclose(
        train(scanned, stack_layers(params, 2), seed), train(unrolled, params, 1), atol=1e-5
    )


def test_remat_inside_a_scan_adds_no_optimization_barrier():
  config, inputs = FAMILIES["vit"]
  model = build_model({**config, "scan_layers": True, "remat": "full"})
  params = model.init(jax.random.PRNGKey(0), *inputs)["params"]
  loss = lambda p: jnp.sum(model.apply({"params": p}, *inputs))
  assert "optimization_barrier" not in jax.jit(jax.grad(loss)).lower(params).as_text()
  unrolled = build_model({**config, "remat": "full"})  # the guard the check would miss
  params = unrolled.init(jax.random.PRNGKey(0), *inputs)["params"]
  loss = lambda p: jnp.sum(unrolled.apply({"params": p}, *inputs))
  assert "optimization_barrier" in jax.jit(jax.grad(loss)).lower(params).as_text()
