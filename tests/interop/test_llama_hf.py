"""Llama, Qwen2 and Qwen3 from Hugging Face: our gpt with their block options gives the same
next-token log-probabilities, and the same greedy continuation through the KV cache."""

import jax
import numpy as np
import pytest

from tests import peers
from tests.interop import helpers
from vit_jax import errors
from vit_jax import interop
from vit_jax.interop import flat_params
from vit_jax.interop import hf_llama
from vit_jax.models import build_model
from vit_jax.models import sampling

torch = peers.require("torch")
transformers = peers.require("transformers")

VOCAB = 97
TOKENS = np.array(
    [[5, 17, 33, 2, 45, 60, 8, 9, 30, 1, 0, 7], [11, 12, 13, 50, 40, 41, 42, 3, 4, 96, 21, 22]],
    np.int32,
)
SHAPE = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=96,
    max_position_embeddings=64,
    rms_norm_eps=1e-5,
    initializer_range=0.2,  # large: a tiny model's greedy tokens then differ from step to step
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
# Llama: llama3 RoPE scaling, untied; at head width 16, base 10,000 and an original length of
# 32, its frequencies fall in all three bands (kept, blended, divided). Qwen2: query/key/value
# biases, tied. Qwen3: QK-norm, linear scaling.
FAMILIES = {
    "llama": lambda: transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            **SHAPE,
            tie_word_embeddings=False,
            rope_theta=10_000.0,
            rope_scaling=dict(
                rope_type="llama3",
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=32,
            ),
        )
    ),
    "qwen2": lambda: transformers.Qwen2ForCausalLM(
        transformers.Qwen2Config(**SHAPE, tie_word_embeddings=True, rope_theta=1_000_000.0)
    ),
    "qwen3": lambda: transformers.Qwen3ForCausalLM(
        transformers.Qwen3Config(
            **SHAPE,
            head_dim=16,
            tie_word_embeddings=False,
            rope_scaling=dict(rope_type="linear", factor=2.0),
        )
    ),
}


def converted(family):
  torch.manual_seed(0)
  hf = helpers.perturb_torch(FAMILIES[family]())
  tensors = {k: v.numpy() for k, v in hf.state_dict().items()}
  config, flat, _ = hf_llama.import_(hf.config.to_dict(), tensors)
  return hf, config, flat_params.unflatten(flat)


def log_probs(logits):
  return np.asarray(jax.nn.log_softmax(np.asarray(logits, np.float64), axis=-1))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_log_probs_and_greedy_decoding_match(family):
  hf, config, params = converted(family)
  expected = {"llama": ("none", False), "qwen2": ("qkv", False), "qwen3": ("none", True)}[family]
  assert (config["biases"], config["qk_norm"]) == expected
  assert config["num_kv_heads"] == 2 and config["tie_embeddings"] == (family == "qwen2")
  with torch.no_grad():
    theirs = hf(input_ids=torch.tensor(TOKENS, dtype=torch.long)).logits.numpy()
  ours = build_model(config).apply({"params": params}, TOKENS)
  diff = helpers.max_diff(log_probs(ours), log_probs(theirs))
  assert diff <= 1e-4, diff

  prompt = TOKENS[:, :5]
  with torch.no_grad():
    ref = hf.generate(
        torch.tensor(prompt, dtype=torch.long),
        do_sample=False,
        max_new_tokens=10,
        pad_token_id=0,
        attention_mask=torch.ones(prompt.shape, dtype=torch.long),
    ).numpy()[:, 5:]
  new = sampling.generate(config, params, prompt.tolist(), max_new_tokens=10)
  assert len(set(ref[0].tolist())) > 2  # not a repeated token, which any bug might also give
  np.testing.assert_array_equal(np.array(new), ref)


def test_smollm2_135m_has_transformers_parameter_count():
  """SmolLM2-135M's published config (built here, offline), through the config table."""
  hub = dict(
      model_type="llama",
      architectures=["LlamaForCausalLM"],
      vocab_size=49152,
      hidden_size=576,
      num_hidden_layers=30,
      num_attention_heads=9,
      num_key_value_heads=3,
      intermediate_size=1536,
      max_position_embeddings=8192,
      rms_norm_eps=1e-5,
      rope_theta=100_000.0,
      tie_word_embeddings=True,
      hidden_act="silu",
  )
  with torch.device("meta"):  # shapes only
    theirs = transformers.LlamaForCausalLM(transformers.LlamaConfig(**hub))
  count = sum(p.numel() for p in theirs.parameters())
  model = build_model(hf_llama.config_from_hf(hub), scan_layers=True)  # one block to trace
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), np.zeros((1, 8), np.int32))
  assert sum(x.size for x in jax.tree.leaves(shapes)) == count == 134_515_008


def test_a_saved_llama_directory_loads_as_our_checkpoint(tmp_path):
  hf, config, params = converted("llama")
  hf.save_pretrained(tmp_path / "hf")
  ckpt = interop.load(str(tmp_path / "hf"))
  assert ckpt.model == config
  np.testing.assert_array_equal(ckpt.tree()["lm_head"], params["lm_head"])
  with pytest.raises(errors.ConversionError, match="GPT-2 has learned position embeddings"):
    interop.save(ckpt, str(tmp_path / "out"), to="hf")


def test_gpt2s_format_refuses_a_llama_block(tmp_path):
  config = dict(name="gpt", variant="pico", vocab_size=VOCAB, max_len=16, normalization="rmsnorm")
  ckpt, _ = helpers.init_ours(config, TOKENS)
  with pytest.raises(errors.ConversionError, match="GPT-2's format holds GPT-2's block"):
    interop.save(ckpt, str(tmp_path / "out"), to="hf")
