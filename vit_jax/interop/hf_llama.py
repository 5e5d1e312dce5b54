"""Hugging Face Llama, Qwen2 and Qwen3 (`*ForCausalLM`) -> our "gpt" with today's block options.

The three are one decoder with RMSNorm, SwiGLU, grouped-query attention and RoPE; they differ in
the biases (none; Qwen2's query/key/value ones) and Qwen3's QK-norm, which the config's
model_type decides (`_FAMILY`). Their config keys map to our fields in one table (`_CONFIG`,
`_ROPE`).

Theirs (`model.` prefix)                      ours
embed_tokens                                  wte/embedding
layers.{i}.input_layernorm                    decoder/h_{i}/LayerNorm_0 (an RMSNorm's scale)
layers.{i}.self_attn.{q,k,v}_proj (HK, D)     decoder/h_{i}/MultiHeadDotProductAttention_1/
                                              {query,key,value} (D, H, K); key/value H = kv heads
layers.{i}.self_attn.o_proj (D, HK)           .../MultiHeadDotProductAttention_1/out (H, K, D)
layers.{i}.self_attn.{q,k}_norm (Qwen3)       .../MultiHeadDotProductAttention_1/{query,key}_norm
layers.{i}.post_attention_layernorm           decoder/h_{i}/LayerNorm_2
layers.{i}.mlp.{gate,up,down}_proj            decoder/h_{i}/MlpBlock_3/{gate,Dense_0,Dense_1}
norm                                          decoder/encoder_norm
lm_head (untied; absent or equal when tied)   lm_head
"""

from vit_jax import errors
from vit_jax.interop import hf_rules as R

# model_type -> (its causal LM architecture, biases, qk_norm): what each family fixes.
_FAMILY = {
    "llama": ("LlamaForCausalLM", "none", False),
    "qwen2": ("Qwen2ForCausalLM", "qkv", False),
    "qwen3": ("Qwen3ForCausalLM", "none", True),
}
MODEL_TYPES = tuple(_FAMILY)
# Hub config key -> our Gpt field.
_CONFIG = {
    "vocab_size": "vocab_size",
    "hidden_size": "width",
    "num_hidden_layers": "depth",
    "num_attention_heads": "num_heads",
    "num_key_value_heads": "num_kv_heads",
    "intermediate_size": "mlp_dim",
    "max_position_embeddings": "max_len",
    "rms_norm_eps": "norm_eps",
    "tie_word_embeddings": "tie_embeddings",
}
# Hub rope_parameters (rope_scaling before transformers 5) key -> our Gpt field.
_ROPE = {
    "rope_theta": "rope_base",
    "rope_type": "rope_scaling",
    "factor": "rope_factor",
    "low_freq_factor": "rope_low_freq_factor",
    "high_freq_factor": "rope_high_freq_factor",
    "original_max_position_embeddings": "rope_original_max_len",
}
_ROPE_TYPES = {"default": "none", "linear": "linear", "llama3": "llama3"}


def config_from_hf(hf_config: dict) -> dict:
  """Our model config ("gpt" with the family's block options) from a hub config dict."""
  model_type = hf_config.get("model_type")
  if model_type not in _FAMILY:
    raise errors.ConversionError(
        f"Unsupported model_type={model_type!r}; supported: {sorted(_FAMILY)}."
    )
  arch, biases, qk_norm = _FAMILY[model_type]
  R.architecture(hf_config, {arch: "gpt"}, arch)
  for field in ("attention_bias", "mlp_bias", "use_sliding_window"):
    if hf_config.get(field):
      raise errors.ConversionError(f"Unsupported {arch} option {field}=True.")
  width, heads = hf_config["hidden_size"], hf_config["num_attention_heads"]
  if hf_config.get("head_dim") not in (None, width // heads):
    raise errors.ConversionError(
        f"head_dim={hf_config['head_dim']} differs from hidden_size / num_attention_heads = "
        f"{width // heads}; ours derives the head width from the model width."
    )
  config = dict(
      name="gpt",
      variant="pico",  # every shape field below overrides the preset's
      posemb="rope",
      normalization="rmsnorm",
      gated_mlp=True,
      activation=R.activation(hf_config, "hidden_act", "silu"),
      biases=biases,
      qk_norm=qk_norm,
      dropout_rate=0.0,
      attention_dropout_rate=hf_config.get("attention_dropout", 0.0),
      num_kv_heads=heads,  # as transformers reads a config without num_key_value_heads
  )
  missing = [key for key in _CONFIG if key not in hf_config and key != "num_key_value_heads"]
  if missing:
    raise errors.ConversionError(f"The {model_type} config lacks {', '.join(missing)}.")
  config.update(
      {ours: hf_config[theirs] for theirs, ours in _CONFIG.items() if theirs in hf_config}
  )
  rope = dict(hf_config.get("rope_parameters") or hf_config.get("rope_scaling") or {})
  rope.setdefault("rope_theta", hf_config.get("rope_theta", 10_000.0))
  rope["rope_type"] = rope.get("rope_type", rope.get("type", "default"))
  if rope["rope_type"] not in _ROPE_TYPES:
    raise errors.ConversionError(
        f"Unsupported rope_type={rope['rope_type']!r}; supported: {sorted(_ROPE_TYPES)}."
    )
  rope["rope_type"] = _ROPE_TYPES[rope["rope_type"]]
  config.update({ours: rope[theirs] for theirs, ours in _ROPE.items() if theirs in rope})
  return config


def rules(config: dict) -> list:
  """The tensor rules of a model config from `config_from_hf`."""
  heads, kv_heads = config["num_heads"], config["num_kv_heads"]
  qkv_bias = config["biases"] != "none"
  out = [R.rule("model.embed_tokens.weight", "wte/embedding")]
  for i in range(config["depth"]):
    t, o = f"model.layers.{i}.", f"decoder/h_{i}/"
    attn = o + "MultiHeadDotProductAttention_1"
    out.append(R.rule(t + "input_layernorm.weight", o + "LayerNorm_0/scale"))
    for proj, ours, n in (("q", "query", heads), ("k", "key", kv_heads), ("v", "value", kv_heads)):
      out.append(R.rule(f"{t}self_attn.{proj}_proj.weight", f"{attn}/{ours}/kernel", R.heads_in(n)))
      if qkv_bias:
        out.append(R.rule(f"{t}self_attn.{proj}_proj.bias", f"{attn}/{ours}/bias", R.heads_bias(n)))
    out.append(R.rule(t + "self_attn.o_proj.weight", attn + "/out/kernel", R.heads_out(heads)))
    if config["qk_norm"]:
      out.append(R.rule(t + "self_attn.q_norm.weight", attn + "/query_norm/scale"))
      out.append(R.rule(t + "self_attn.k_norm.weight", attn + "/key_norm/scale"))
    out.append(R.rule(t + "post_attention_layernorm.weight", o + "LayerNorm_2/scale"))
    for theirs, ours in (("gate_proj", "gate"), ("up_proj", "Dense_0"), ("down_proj", "Dense_1")):
      out.append(R.rule(f"{t}mlp.{theirs}.weight", f"{o}MlpBlock_3/{ours}/kernel", R.LINEAR))
  out.append(R.rule("model.norm.weight", "decoder/encoder_norm/scale"))
  if not config["tie_embeddings"]:
    out.append(R.rule("lm_head.weight", "lm_head"))
  return out


def import_(hf_config: dict, tensors: dict):
  """HF config + tensors -> (our model config, flat params, notes)."""
  config = config_from_hf(hf_config)
  tensors = dict(tensors)
  if config["tie_embeddings"]:
    tensors.pop("lm_head.weight", None)  # save_pretrained may write the tied copy
  flat = R.import_tensors(
      tensors, rules(config), source=f"Hugging Face {hf_config['model_type']} checkpoint"
  )
  return config, flat, []
