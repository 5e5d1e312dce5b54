"""Parameter counts equal the published ones (counted on abstract shapes: no memory used)."""

import jax
import jax.numpy as jnp
import pytest

from vit_jax.models import build_model
from vit_jax.training import flops


def abstract_params(model, *inputs):
  return jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), *inputs))["params"]


@pytest.mark.parametrize(
    "variant,expected",
    [
        ("B/16", 86_567_656),
        ("S/16", 22_050_664),
        ("L/16", 304_326_632),
    ],
)
def test_vit_published_counts(variant, expected):
  model = build_model({"name": "vit", "variant": variant, "num_classes": 1000})
  params = abstract_params(model, jnp.zeros((1, 224, 224, 3)))
  assert flops.count_params(params) == expected


def test_bert_base_with_pooler():
  model = build_model({"name": "bert", "variant": "base", "vocab_size": 30522})
  params = abstract_params(model, jnp.zeros((1, 8), jnp.int32))
  assert flops.count_params(params["bert"]) == 109_482_240


def test_gpt2_small_tied():
  model = build_model({"name": "gpt", "variant": "gpt2", "vocab_size": 50257, "max_len": 1024})
  params = abstract_params(model, jnp.zeros((1, 8), jnp.int32))
  assert flops.count_params(params) == 124_439_808
  assert "lm_head" not in params  # the head reuses wte


def test_mixer_b16():
  # Tolstikhin et al. 2021, Mixer-B/16 with a 1000-class head (as counted by timm).
  model = build_model({"name": "mixer", "variant": "B/16", "num_classes": 1000})
  params = abstract_params(model, jnp.zeros((1, 224, 224, 3)))
  assert flops.count_params(params) == 59_880_472


def test_param_table_sums_to_total():
  model = build_model({"name": "vit", "variant": "Ti/16", "num_classes": 10})
  params = abstract_params(model, jnp.zeros((1, 32, 32, 3)))
  rows = flops.param_table(params)  # two levels deep by default
  assert sum(n for _, n in rows) == flops.count_params(params)
  assert [name for name, _ in rows[:2]] == [
      "Transformer/encoder_norm",
      "Transformer/encoderblock_0",
  ]
  assert ("embedding", 16 * 16 * 3 * 192 + 192) in flops.param_table(params, depth=1)
  # q, k, v, out kernels and biases; two MLP layers; two LayerNorms.
  block = (4 * 192 * 192 + 4 * 192) + (2 * 192 * 768 + 768 + 192) + 2 * 2 * 192
  assert ("Transformer/encoderblock_0", block) in rows
