"""The GPT config takes today's decoders' block options (Llama's here), and the checks refuse a
bad one in one line naming its key; its presets of published decoders have their hub models'
parameter counts."""

import jax
import jax.numpy as jnp
import pytest

from tests import helpers
from tests import peers
from vit_jax import models
from vit_jax.config import checks
from vit_jax.models import gpt

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


# Each published model's config.json on the Hugging Face hub (the repository in the comment), the
# keys that shape its parameters, written out here so that the count below does not come from the
# preset it checks; and the count, the one its model card rounds (SmolLM2-135M's "135M",
# Qwen2.5-0.5B's "0.49B", Llama-3.2-1B's "1.23B", Llama-3.1-8B's "8.03B").
_LLAMA3_ROPE = dict(
    rope_type="llama3", low_freq_factor=1.0, high_freq_factor=4.0,
    original_max_position_embeddings=8192,
)  # fmt: skip
PUBLISHED = {
    "smollm2-135m": (  # HuggingFaceTB/SmolLM2-135M
        "Llama", 134_515_008,
        dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, intermediate_size=1536,
             num_key_value_heads=3, vocab_size=49_152, rms_norm_eps=1e-5, rope_theta=100_000.0,
             tie_word_embeddings=True),
    ),
    "smollm2-360m": (  # HuggingFaceTB/SmolLM2-360M
        "Llama", 361_821_120,
        dict(hidden_size=960, num_hidden_layers=32, num_attention_heads=15, intermediate_size=2560,
             num_key_value_heads=5, vocab_size=49_152, rms_norm_eps=1e-5, rope_theta=100_000.0,
             tie_word_embeddings=True),
    ),
    "qwen2.5-0.5b": (  # Qwen/Qwen2.5-0.5B
        "Qwen2", 494_032_768,
        dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, intermediate_size=4864,
             num_key_value_heads=2, vocab_size=151_936, rms_norm_eps=1e-6,
             rope_theta=1_000_000.0, tie_word_embeddings=True),
    ),
    "llama3.2-1b": (  # meta-llama/Llama-3.2-1B
        "Llama", 1_235_814_400,
        dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, intermediate_size=8192,
             num_key_value_heads=8, vocab_size=128_256, rms_norm_eps=1e-5, rope_theta=500_000.0,
             tie_word_embeddings=True, rope_scaling=dict(factor=32.0, **_LLAMA3_ROPE)),
    ),
    "llama3.1-8b": (  # meta-llama/Llama-3.1-8B
        "Llama", 8_030_261_248,
        dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
             intermediate_size=14336, num_key_value_heads=8, vocab_size=128_256,
             rms_norm_eps=1e-5, rope_theta=500_000.0, tie_word_embeddings=False,
             rope_scaling=dict(factor=8.0, **_LLAMA3_ROPE)),
    ),
}  # fmt: skip


def test_presets_are_the_published_models():
  """Each preset is its published config.json key for key (gpt.DECODERS against PUBLISHED)."""
  assert set(gpt.DECODERS) == set(PUBLISHED)
  for name, (family, _, hub) in PUBLISHED.items():
    preset, options = gpt.DECODERS[name], gpt.decoder_options(name)
    ours = dict(
        hidden_size=preset["width"],
        num_hidden_layers=preset["depth"],
        num_attention_heads=preset["num_heads"],
        intermediate_size=preset["mlp_dim"],
        num_key_value_heads=preset["num_kv_heads"],
        vocab_size=preset["vocab_size"],
        rms_norm_eps=options["norm_eps"],
        rope_theta=options["rope_base"],
        tie_word_embeddings=options["tie_embeddings"],
    )
    if options.get("rope_scaling", "none") != "none":
      ours["rope_scaling"] = dict(
          rope_type=options["rope_scaling"],
          factor=options["rope_factor"],
          low_freq_factor=options["rope_low_freq_factor"],
          high_freq_factor=options["rope_high_freq_factor"],
          original_max_position_embeddings=options["rope_original_max_len"],
      )
    assert ours == hub, name
    # Qwen2's block: biases on the query, key and value projections only; Llama's: none.
    assert options["biases"] == {"Qwen2": "qkv", "Llama": "none"}[family], name
    assert (options["normalization"], options["gated_mlp"], options["activation"]) == (
        "rmsnorm",
        True,
        "silu",
    )


@pytest.mark.parametrize("name", list(gpt.DECODERS))
def test_preset_has_its_hub_models_parameter_count(name):
  """`configs/gpt.py:variant=NAME` builds a model of as many parameters as transformers' model of
  the published config.json (built on torch's meta device: shapes only, nothing allocated)."""
  torch, transformers = peers.require("torch"), peers.require("transformers")
  family, published, hub = PUBLISHED[name]
  with torch.device("meta"):
    theirs = getattr(transformers, f"{family}ForCausalLM")(
        getattr(transformers, f"{family}Config")(**hub)
    )
  theirs = sum(p.numel() for p in theirs.parameters())
  config = helpers.repo_file("configs/gpt.py").get_config(f"variant={name}")
  # The vocabulary is the tokenizer's; one scanned block traces faster than the unrolled stack.
  model = models.build_model(config.model, vocab_size=hub["vocab_size"], scan_layers=True)
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32))
  ours = sum(x.size for x in jax.tree.leaves(shapes))
  assert ours == theirs == published
