"""Every family builds, runs forward and backward, in fp32 and bf16 compute with fp32 params.

Position embeddings have their own tests (test_position.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import build_model

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
    "local_cnn": ({"name": "local_cnn", "depth": 2, "width": 16, "num_classes": 5}, (IMAGES,)),
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
  params = jax.jit(model.init)(jax.random.PRNGKey(0), *inputs)["params"]
  assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(params))
  # Heads start at zero; perturb so gradients reach every layer.
  params = jax.tree.map(lambda p: p + 0.01, params)
  loss, grads = jax.jit(
      jax.value_and_grad(lambda p: loss_fn(model, p, inputs, jax.random.PRNGKey(1)))
  )(params)
  assert np.isfinite(float(loss))
  assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))
  assert all(g.dtype == jnp.float32 for g in jax.tree.leaves(grads))
