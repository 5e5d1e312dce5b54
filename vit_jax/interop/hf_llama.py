"""Hugging Face Llama, Mistral, Qwen2 and Qwen3 (`*ForCausalLM`) <-> our "gpt" with today's
block options.

The four are one decoder with RMSNorm, SwiGLU, grouped-query attention and RoPE; they differ in
the biases (none; Qwen2's query/key/value ones) and Qwen3's QK-norm, which the config's
model_type decides (`_FAMILY`). Their config keys map to our fields in one table (`_CONFIG`,
`_ROPE`). What ours does not compute is refused, naming the key: a sliding window that is active
within the model's length, RoPE scalings other than linear and llama3, partial rotary
embeddings, and biases on the attention output or the MLP.

Exported, our model is Llama's with no biases and no QK-norm, Qwen2's with query/key/value
biases, Qwen3's with QK-norm: a Mistral import comes back as a LlamaForCausalLM, the same
network once its sliding window is off (Mistral's modeling code is Llama's plus that window).

Theirs (`model.` prefix)                      ours
embed_tokens (V, D)                           wte/embedding
layers.{i}.input_layernorm                    decoder/h_{i}/LayerNorm_0 (an RMSNorm's scale)
layers.{i}.self_attn.{q,k,v}_proj (HK, D)     decoder/h_{i}/MultiHeadDotProductAttention_1/
                                              {query,key,value} (D, H, K); key/value H = kv heads
layers.{i}.self_attn.o_proj (D, HK)           .../MultiHeadDotProductAttention_1/out (H, K, D)
layers.{i}.self_attn.{q,k}_norm (K,) (Qwen3)  .../MultiHeadDotProductAttention_1/{query,key}_norm
layers.{i}.post_attention_layernorm           decoder/h_{i}/LayerNorm_2
layers.{i}.mlp.{gate,up,down}_proj            decoder/h_{i}/MlpBlock_3/{gate,Dense_0,Dense_1}
norm                                          decoder/encoder_norm
lm_head (untied; ignored when tied)           lm_head
"""

import ml_dtypes
import numpy as np

from vit_jax import errors
from vit_jax.interop import hf_rules as R
from vit_jax.interop import models
from vit_jax.interop import safetensors_files

# model_type -> (its causal LM architecture, biases, qk_norm): what each family fixes.
_FAMILY = {
    "llama": ("LlamaForCausalLM", "none", False),
    "mistral": ("MistralForCausalLM", "none", False),
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
# Which rope fields each of our scalings writes back.
_ROPE_FIELDS = {
    "none": ("rope_theta",),
    "linear": ("rope_theta", "factor"),
    "llama3": tuple(_ROPE),
}
_DENSE_FAMILIES = "Llama, Mistral, Qwen2 or Qwen3"


def _refuse_sliding_window(hf_config: dict, arch: str) -> None:
  """A sliding window that changes what a position attends to within the model's length."""
  window, length = hf_config.get("sliding_window"), hf_config.get("max_position_embeddings")
  sliding_layers = "sliding_attention" in (hf_config.get("layer_types") or ())
  active = hf_config.get("use_sliding_window") or sliding_layers
  if hf_config.get("model_type") == "mistral":  # Mistral's window is on whenever it is set
    active = active or (window is not None and (length is None or window < length))
  if not active:
    return
  raise errors.ConversionError(
      f"{arch} with sliding-window attention (sliding_window={window}, "
      f"use_sliding_window={hf_config.get('use_sliding_window')}, max_position_embeddings="
      f"{length}): each position attends only to the last {window} tokens, which our attention "
      "does not do. Within the window it is full causal attention: to use the model on "
      f"sequences of at most {window} tokens, set max_position_embeddings to {window} in "
      "config.json (and use_sliding_window to false, where it has that key), and convert again."
  )


def _rope(hf_config: dict, arch: str) -> dict:
  """Our rope fields from the hub's rope_parameters (or rope_scaling and rope_theta)."""
  rope = dict(hf_config.get("rope_parameters") or hf_config.get("rope_scaling") or {})
  rope.setdefault("rope_theta", hf_config.get("rope_theta", 10_000.0))
  rope_type = rope.get("rope_type", rope.get("type", "default"))
  if rope_type not in _ROPE_TYPES:
    raise errors.ConversionError(
        f"{arch} with rope_type={rope_type!r}: our RoPE scales its frequencies as "
        f"{sorted(_ROPE_TYPES)} only, and another scaling changes every logit (YaRN, dynamic "
        "NTK and LongRoPE are not implemented here). Convert a checkpoint whose RoPE is one of "
        "those."
    )
  partial = rope.get("partial_rotary_factor", hf_config.get("partial_rotary_factor", 1.0))
  if partial != 1.0:
    raise errors.ConversionError(
        f"{arch} with partial_rotary_factor={partial}: ours rotates every dimension of a head. "
        "Convert a checkpoint that rotates the whole head."
    )
  rope["rope_type"] = _ROPE_TYPES[rope_type]
  return {ours: rope[theirs] for theirs, ours in _ROPE.items() if theirs in rope}


def config_from_hf(hf_config: dict) -> dict:
  """Our model config ("gpt" with the family's block options) from a hub config dict."""
  model_type = hf_config.get("model_type")
  if model_type not in _FAMILY:
    raise errors.ConversionError(
        f"Unsupported model_type={model_type!r}; supported: {sorted(_FAMILY)}."
    )
  arch, biases, qk_norm = _FAMILY[model_type]
  R.architecture(hf_config, {arch: "gpt"}, arch)
  for field, where in (("attention_bias", "the attention's"), ("mlp_bias", "the MLP's")):
    if hf_config.get(field):
      raise errors.ConversionError(
          f"{arch} with {field}=true: biases on all of {where} projections, which our "
          f"{_DENSE_FAMILIES} block does not have. Convert a checkpoint without them."
      )
  _refuse_sliding_window(hf_config, arch)
  missing = [key for key in _CONFIG if key not in hf_config and key != "num_key_value_heads"]
  if missing:
    raise errors.ConversionError(
        f"The {model_type} config lacks {', '.join(missing)}; is config.json complete?"
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
      num_kv_heads=hf_config["num_attention_heads"],  # as transformers reads a config without it
  )
  config.update(
      {ours: hf_config[theirs] for theirs, ours in _CONFIG.items() if theirs in hf_config}
  )
  width, heads = hf_config["hidden_size"], hf_config["num_attention_heads"]
  if hf_config.get("head_dim") not in (None, width // heads):  # Qwen3's heads are wider
    config["head_dim"] = hf_config["head_dim"]
  config.update(_rope(hf_config, arch))
  return config


def _shapes(config: dict) -> dict:
  """Our config's sizes: vocabulary, width, heads, kv heads, head width, MLP width."""
  width, heads = config["width"], config["num_heads"]
  return dict(
      V=config["vocab_size"],
      D=width,
      H=heads,
      G=config.get("num_kv_heads") or heads,
      K=config.get("head_dim") or width // heads,
      F=config["mlp_dim"],
  )


def rules(config: dict) -> list:
  """The tensor rules of a model config from `config_from_hf`, with their tensors' shapes."""
  s = _shapes(config)
  qkv_bias = config["biases"] != "none"
  out = [R.rule("model.embed_tokens.weight", "wte/embedding", shape=(s["V"], s["D"]))]
  for i in range(config["depth"]):
    t, o = f"model.layers.{i}.", f"decoder/h_{i}/"
    attn = o + "MultiHeadDotProductAttention_1"
    out.append(R.rule(t + "input_layernorm.weight", o + "LayerNorm_0/scale", shape=(s["D"],)))
    for proj, ours, n in (("q", "query", s["H"]), ("k", "key", s["G"]), ("v", "value", s["G"])):
      out.append(
          R.rule(
              f"{t}self_attn.{proj}_proj.weight",
              f"{attn}/{ours}/kernel",
              R.heads_in(n),
              shape=(n * s["K"], s["D"]),
          )
      )
      if qkv_bias:
        out.append(
            R.rule(
                f"{t}self_attn.{proj}_proj.bias",
                f"{attn}/{ours}/bias",
                R.heads_bias(n),
                shape=(n * s["K"],),
            )
        )
    out.append(
        R.rule(
            t + "self_attn.o_proj.weight",
            attn + "/out/kernel",
            R.heads_out(s["H"]),
            shape=(s["D"], s["H"] * s["K"]),
        )
    )
    if config["qk_norm"]:
      for proj, ours in (("q", "query"), ("k", "key")):
        out.append(
            R.rule(f"{t}self_attn.{proj}_norm.weight", f"{attn}/{ours}_norm/scale", shape=(s["K"],))
        )
    out.append(
        R.rule(t + "post_attention_layernorm.weight", o + "LayerNorm_2/scale", shape=(s["D"],))
    )
    for theirs, ours, shape in (
        ("gate_proj", "gate", (s["F"], s["D"])),
        ("up_proj", "Dense_0", (s["F"], s["D"])),
        ("down_proj", "Dense_1", (s["D"], s["F"])),
    ):
      out.append(
          R.rule(f"{t}mlp.{theirs}.weight", f"{o}MlpBlock_3/{ours}/kernel", R.LINEAR, shape=shape)
      )
  out.append(R.rule("model.norm.weight", "decoder/encoder_norm/scale", shape=(s["D"],)))
  if not config["tie_embeddings"]:
    out.append(R.rule("lm_head.weight", "lm_head", shape=(s["V"], s["D"])))
  return out


def _param_dtype(tensors) -> str:
  """bfloat16 when every float tensor is (kept as it is: the workdir holds what the hub did),
  else float32 (float16 weights are widened exactly; the trainer takes no float16 params)."""
  floats = safetensors_files.dtypes(tensors) & safetensors_files.FLOATS
  return "bfloat16" if floats == {np.dtype(ml_dtypes.bfloat16)} else "float32"


def import_(hf_config: dict, tensors):
  """HF config + tensors -> (our model config, flat params, notes). `tensors`: a dict, or a
  `safetensors_files.Tensors`, each read, converted and let go in turn."""
  config = config_from_hf(hf_config)
  config["param_dtype"] = _param_dtype(tensors)
  notes = []
  if hf_config["model_type"] == "mistral":
    notes.append("Mistral without a sliding window is Llama's network: it exports as Llama")
  flat = R.import_tensors(
      tensors,
      rules(config),
      # save_pretrained may write the tied copy; transformers ties it to the embedding anyway.
      ignore=(r"lm_head\.weight",) if config["tie_embeddings"] else (),
      source=f"Hugging Face {hf_config['model_type']} checkpoint",
      dtype=np.dtype(ml_dtypes.bfloat16 if config["param_dtype"] == "bfloat16" else np.float32),
  )
  return config, flat, notes


def exports(config: dict) -> bool:
  """Whether our config is one of these families' (else GPT-2's format is the one to try)."""
  return config.get("name") == "gpt" and config.get("posemb") == "rope"


def export(config: dict, flat: dict):
  """Our GPT config + flat params -> (HF Llama, Qwen2 or Qwen3 config, tensors)."""
  model = models.build(config)
  shape = model.shape()
  required = dict(normalization="rmsnorm", gated_mlp=True)
  other = {k: getattr(model, k) for k, v in required.items() if getattr(model, k) != v}
  if model.biases == "all":
    other["biases"] = "all"
  if model.biases == "qkv" and model.qk_norm:
    other.update(biases="qkv", qk_norm=True)
  if model.activation not in R.TO_HF_ACTIVATION:
    other["activation"] = model.activation
  if other:
    raise errors.ConversionError(
        f"The {_DENSE_FAMILIES} formats hold an RMSNorm, gated-MLP block with no biases, "
        f"query/key/value biases (Qwen2) or QK-norm (Qwen3); this model sets {other}."
    )
  model_type = "qwen2" if model.biases == "qkv" else "qwen3" if model.qk_norm else "llama"
  ours = dict(
      vocab_size=model.vocab_size,
      width=shape.width,
      depth=shape.depth,
      num_heads=shape.num_heads,
      num_kv_heads=model.num_kv_heads or shape.num_heads,
      mlp_dim=shape.mlp_dim or model.mlp_ratio * shape.width,
      max_len=model.max_len,
      norm_eps=model.norm_eps,
      tie_embeddings=model.tie_embeddings,
  )
  rope_fields = {ours: getattr(model, ours) for ours in _ROPE.values()}
  rope_fields["rope_scaling"] = {v: k for k, v in _ROPE_TYPES.items()}[model.rope_scaling]
  rope = {theirs: rope_fields[ours] for theirs, ours in _ROPE.items()}
  rope = {k: rope[k] for k in _ROPE_FIELDS[model.rope_scaling]}
  rope["rope_type"] = rope_fields["rope_scaling"]
  hf_config = dict(
      model_type=model_type,
      architectures=[_FAMILY[model_type][0]],
      **{theirs: ours[mine] for theirs, mine in _CONFIG.items()},
      head_dim=model.head_dim or shape.width // shape.num_heads,
      hidden_act=R.TO_HF_ACTIVATION[model.activation],
      attention_dropout=model.attention_dropout_rate,
      # transformers 5 reads rope_parameters; 4.x rope_theta and rope_scaling (None: no scaling).
      rope_parameters=rope,
      rope_theta=rope["rope_theta"],
      rope_scaling=None if model.rope_scaling == "none" else rope,
      initializer_range=model.init_std,
      use_cache=True,
      dtype=R.dtype_name(flat),
  )
  if model_type == "qwen2":
    hf_config.update(use_sliding_window=False, sliding_window=None, max_window_layers=shape.depth)
  else:
    hf_config.update(attention_bias=False)
    if model_type == "llama":
      hf_config.update(mlp_bias=False)
    else:
      hf_config.update(use_sliding_window=False, sliding_window=None)
  fields = dict(ours, biases=model.biases, qk_norm=model.qk_norm, head_dim=model.head_dim)
  target = f"Hugging Face {model_type} checkpoint"
  return hf_config, R.export_tensors(flat, rules(fields), target=target)
