"""Hugging Face GPT-2 (`GPT2LMHeadModel`, `GPT2Model`) <-> our "gpt" (learned positions).

GPT-2 stores its projections as Conv1D, whose weight is already input-major (in, out) like a
Flax kernel, and fuses query/key/value into one `c_attn` (D, 3D), split here into our
query/key/value kernels (D, H, K). Its LM head is tied to `wte`, as ours is.

Theirs (`transformer.` prefix in GPT2LMHeadModel)   ours
wte, wpe                                         wte/embedding, wpe/embedding
h.{i}.ln_1, h.{i}.ln_2                           decoder/h_{i}/LayerNorm_0, LayerNorm_2 (pre-LN)
h.{i}.attn.c_attn (D, 3D) = [q | k | v]          decoder/h_{i}/MultiHeadDotProductAttention_1/
                                                 {query,key,value} (D, H, K)
h.{i}.attn.c_proj (D, D)                         .../MultiHeadDotProductAttention_1/out (H, K, D)
h.{i}.mlp.c_fc, h.{i}.mlp.c_proj                 decoder/h_{i}/MlpBlock_3/Dense_0, Dense_1
ln_f                                             decoder/encoder_norm
"""

import numpy as np

from vit_jax import errors
from vit_jax.interop import hf_rules as R
from vit_jax.interop import models
from vit_jax.models import gpt

ARCHITECTURES = {"GPT2LMHeadModel": "gpt", "GPT2Model": "gpt"}
_IGNORE = (r"(transformer\.)?h\.\d+\.attn\.(masked_)?bias",)  # causal-mask buffers of old files
_GPT2_VOCAB, _GPT2_EOS = 50257, 50256  # GPT-2's tokenizer and its <|endoftext|>


def _fused_qkv(ours: str, heads: int, kind: str) -> R.Rule:
  """c_attn.weight (D, 3D) or c_attn.bias (3D,) <-> our three query/key/value params."""

  def to_ours(fused):
    parts = np.split(fused, 3, axis=-1)
    if kind == "kernel":
      return tuple(p.reshape(p.shape[0], heads, -1) for p in parts)  # (D, H, K) each
    return tuple(p.reshape(heads, -1) for p in parts)  # (H, K) each

  def to_theirs(*qkv):
    lead = qkv[0].shape[:1] if kind == "kernel" else ()
    return np.concatenate([p.reshape(lead + (-1,)) for p in qkv], axis=-1)

  return R.Rule(
      f"attn.c_attn.{'weight' if kind == 'kernel' else 'bias'}",
      tuple(f"{ours}/{p}/{kind}" for p in ("query", "key", "value")),
      to_ours,
      to_theirs,
  )


def _rules(depth: int, heads: int, prefix: str) -> list:
  rules = [
      R.rule(f"{prefix}wte.weight", "wte/embedding"),
      R.rule(f"{prefix}wpe.weight", "wpe/embedding"),
  ]
  for i in range(depth):
    t, o = f"{prefix}h.{i}.", f"decoder/h_{i}/"
    attn = o + "MultiHeadDotProductAttention_1"
    rules += R.layer_norm(t + "ln_1", o + "LayerNorm_0")
    for kind in ("kernel", "bias"):
      fused = _fused_qkv(attn, heads, kind)
      rules.append(R.Rule(t + fused.theirs, fused.ours, fused.to_ours, fused.to_theirs))
    rules.append(
        R.rule(t + "attn.c_proj.weight", attn + "/out/kernel", R.heads_out(heads, input_major=True))
    )
    rules.append(R.rule(t + "attn.c_proj.bias", attn + "/out/bias"))
    rules += R.layer_norm(t + "ln_2", o + "LayerNorm_2")
    rules += R.dense(t + "mlp.c_fc", o + "MlpBlock_3/Dense_0", input_major=True)
    rules += R.dense(t + "mlp.c_proj", o + "MlpBlock_3/Dense_1", input_major=True)
  return rules + R.layer_norm(f"{prefix}ln_f", "decoder/encoder_norm")


def import_(hf_config: dict, tensors: dict):
  """HF config + tensors -> (our model config, flat params, notes)."""
  R.architecture(hf_config, ARCHITECTURES, "GPT2LMHeadModel")
  for field, want in (
      ("scale_attn_weights", True),
      ("scale_attn_by_inverse_layer_idx", False),
      ("add_cross_attention", False),
  ):
    if hf_config.get(field, want) != want:
      raise errors.ConversionError(
          f"Unsupported GPT-2 option {field}={hf_config[field]!r}: ours "
          f"computes attention as {field}={want}."
      )
  width = hf_config["n_embd"]
  inner = hf_config.get("n_inner") or 4 * width
  if inner % width:
    raise errors.ConversionError(
        f"n_inner={inner} is not a multiple of n_embd={width}; our Gpt " "has an integer mlp_ratio."
    )
  prefix = "transformer." if "transformer.wte.weight" in tensors else ""
  if "lm_head.weight" in tensors and not np.array_equal(
      tensors["lm_head.weight"], tensors.get(f"{prefix}wte.weight")
  ):
    raise errors.ConversionError(
        "lm_head.weight differs from wte: an untied LM head is not "
        "supported (our Gpt ties it to the token embedding)."
    )
  notes = []
  if hf_config.get("embd_pdrop", 0.1) != hf_config.get("resid_pdrop", 0.1):
    notes.append(
        "embd_pdrop differs from resid_pdrop: our Gpt uses dropout_rate=resid_pdrop " "for both"
    )
  config = dict(
      name="gpt",
      vocab_size=hf_config["vocab_size"],
      variant="gpt2",
      width=width,
      depth=hf_config["n_layer"],
      num_heads=hf_config["n_head"],
      mlp_ratio=inner // width,
      max_len=hf_config.get("n_positions", 1024),
      posemb="learn",
      dropout_rate=hf_config.get("resid_pdrop", 0.1),
      attention_dropout_rate=hf_config.get("attn_pdrop", 0.1),
      activation=R.activation(hf_config, "activation_function", "gelu_new"),
      norm_eps=hf_config.get("layer_norm_epsilon", 1e-5),
  )
  rules = _rules(config["depth"], config["num_heads"], prefix)
  ignore = _IGNORE + (r"lm_head\.weight",)  # equal to wte (checked above)
  flat = R.import_tensors(tensors, rules, ignore, source="Hugging Face GPT-2 checkpoint")
  return config, flat, notes


def export(config: dict, flat: dict):
  """Our GPT config + flat params -> (HF GPT2LMHeadModel config, tensors)."""
  model = models.build(config)
  if model.posemb != "learn":
    raise errors.ConversionError(
        f"GPT-2 has learned position embeddings; this model uses " f"posemb={model.posemb!r}."
    )
  # What GPT-2's format cannot hold: a Llama-family block (hf_llama reads those; no writer yet).
  other = {
      name: getattr(model, name)
      for name in ("normalization", "gated_mlp", "biases", "num_kv_heads", "head_dim", "qk_norm")
      if getattr(model, name) != getattr(gpt.Gpt, name)
  }
  if other or not model.tie_embeddings or model.mlp_dim is not None:
    raise errors.ConversionError(
        f"GPT-2's format holds GPT-2's block, tied and with mlp_ratio; this model sets {other}, "
        f"tie_embeddings={model.tie_embeddings}, mlp_dim={model.mlp_dim}."
    )
  shape = model.shape()
  eos = _GPT2_EOS if model.vocab_size == _GPT2_VOCAB else None
  hf_config = dict(
      model_type="gpt2",
      architectures=["GPT2LMHeadModel"],
      vocab_size=model.vocab_size,
      n_embd=shape.width,
      n_layer=shape.depth,
      n_head=shape.num_heads,
      n_inner=model.mlp_ratio * shape.width,
      n_positions=model.max_len,
      activation_function=R.TO_HF_ACTIVATION[model.activation],
      layer_norm_epsilon=model.norm_eps,
      resid_pdrop=model.dropout_rate,
      embd_pdrop=model.dropout_rate,
      attn_pdrop=model.attention_dropout_rate,
      scale_attn_weights=True,
      scale_attn_by_inverse_layer_idx=False,
      reorder_and_upcast_attn=False,
      initializer_range=0.02,
      tie_word_embeddings=True,
      bos_token_id=eos,
      eos_token_id=eos,
      dtype=R.dtype_name(flat),
  )
  rules = _rules(shape.depth, shape.num_heads, "transformer.")
  return hf_config, R.export_tensors(flat, rules, target="Hugging Face GPT-2 checkpoint")
