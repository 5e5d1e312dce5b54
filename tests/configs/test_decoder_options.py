"""The GPT config takes today's decoders' block options (Llama's here), and the checks refuse a
bad one in one line naming its key."""

import jax
import jax.numpy as jnp
import pytest

from tests import helpers
from vit_jax import models
from vit_jax.config import checks

LLAMA = dict(
    posemb="rope",
    activation="silu",
    normalization="rmsnorm",
    gated_mlp=True,
    biases="none",
    num_kv_heads=1,
    mlp_dim=96,
    rope_base=500_000.0,
    rope_scaling="llama3",
    rope_factor=8.0,
    tie_embeddings=False,
)


def gpt_config():
  config = helpers.repo_file("configs/gpt.py").get_config("variant=pico")
  config.model.vocab_size = 50
  return config


def test_llama_options_are_config_keys_that_build_a_llama_block():
  config = gpt_config()
  config.model.update(LLAMA)
  assert checks.config_problems(config) == []
  model = models.build_model(config.model)
  params = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32))
  block = params["params"]["decoder"]["h_0"]
  assert set(block["MlpBlock_3"]) == {"gate", "Dense_0", "Dense_1"}
  assert block["MultiHeadDotProductAttention_1"]["key"]["kernel"].shape == (64, 1, 32)
  assert "bias" not in block["MultiHeadDotProductAttention_1"]["query"]
  assert set(block["LayerNorm_0"]) == {"scale"}  # an RMSNorm
  assert params["params"]["lm_head"].shape == (50, 64)


@pytest.mark.parametrize(
    "key, value",
    [
        ("normalization", "batchnorm"),
        ("biases", "q"),
        ("rope_scaling", "yarn"),
        ("num_kv_heads", 0),
        ("head_dim", 0),
    ],
)
def test_a_bad_decoder_option_is_refused_naming_its_key(key, value):
  config = gpt_config()
  config.model[key] = value
  problems = checks.config_problems(config)
  assert len(problems) == 1 and problems[0].startswith(f"--config.model.{key}={value!r}"), problems
