"""Hugging Face ViT (`ViTForImageClassification`, `ViTModel`) <-> our "vit" with a cls token.

Both add the position table (1, 1 + N, D) to [cls, patches], so it maps as is.

Theirs (`vit.` prefix in ViTForImageClassification)  ours
embeddings.cls_token, embeddings.position_embeddings  cls, Transformer/posembed_input/pos_embedding
embeddings.patch_embeddings.projection (D, C, p, p)   embedding (p, p, C, D) (HWIO)
encoder.layer.{i}.layernorm_before, layernorm_after   Transformer/encoderblock_{i}/LayerNorm_0, _2
encoder.layer.{i}.attention.attention.{query,key,value}, attention.output.dense
                                                      .../MultiHeadDotProductAttention_1/{query,
                                                      key,value} (D, H, K), out (H, K, D)
encoder.layer.{i}.intermediate.dense, output.dense    .../MlpBlock_3/Dense_0, Dense_1
layernorm                                             Transformer/encoder_norm
pooler.dense (ViTModel, then tanh)                    pre_logits (then tanh)
classifier                                            head
"""

import numpy as np

from vit_jax import errors
from vit_jax.interop import hf_rules as R
from vit_jax.interop import models
from vit_jax.interop import vit_npz

ARCHITECTURES = {"ViTForImageClassification": "vit", "ViTModel": "vit"}
_EPS = 1e-6  # our ViT's LayerNorm epsilon (the original ViT's)


def _rules(depth: int, heads: int, prefix: str, qkv_bias: bool = True) -> list:
  rules = [
      R.rule(f"{prefix}embeddings.cls_token", "cls"),
      R.rule(f"{prefix}embeddings.position_embeddings", vit_npz.POSEMB),
      R.rule(f"{prefix}embeddings.patch_embeddings.projection.weight", "embedding/kernel", R.CONV),
      R.rule(f"{prefix}embeddings.patch_embeddings.projection.bias", "embedding/bias"),
  ]
  for i in range(depth):
    t, o = f"{prefix}encoder.layer.{i}.", f"Transformer/encoderblock_{i}/"
    rules += R.layer_norm(t + "layernorm_before", o + "LayerNorm_0")
    attn = R.attention(
        {p: f"{t}attention.attention.{p}" for p in ("query", "key", "value")}
        | {"out": f"{t}attention.output.dense"},
        o + "MultiHeadDotProductAttention_1",
        heads,
    )
    rules += [
        r
        for r in attn
        if qkv_bias
        or not r.theirs.endswith(
            tuple(f"attention.attention.{p}.bias" for p in ("query", "key", "value"))
        )
    ]
    rules += R.layer_norm(t + "layernorm_after", o + "LayerNorm_2")
    rules += R.dense(t + "intermediate.dense", o + "MlpBlock_3/Dense_0")
    rules += R.dense(t + "output.dense", o + "MlpBlock_3/Dense_1")
  rules += R.layer_norm(f"{prefix}layernorm", "Transformer/encoder_norm")
  if prefix:  # ViTForImageClassification: a head on the cls token, no pooler
    return rules + R.dense("classifier", "head")
  return rules + R.dense("pooler.dense", "pre_logits", optional=True)  # ViTModel


def _pair(value) -> tuple:
  return tuple(value) if isinstance(value, (list, tuple)) else (value, value)


def import_(hf_config: dict, tensors: dict):
  """HF config + tensors -> (our model config, flat params, notes)."""
  arch = R.architecture(
      hf_config,
      ARCHITECTURES,
      "ViTForImageClassification" if "classifier.weight" in tensors else "ViTModel",
  )
  notes = []
  if hf_config.get("pooler_act", "tanh") != "tanh":
    raise errors.ConversionError(
        f"Unsupported pooler_act={hf_config['pooler_act']!r}: our " "pre-logits layer uses tanh."
    )
  eps = hf_config.get("layer_norm_eps", 1e-12)
  if eps != _EPS:
    notes.append(
        f"layer_norm_eps={eps:g} in the config; our ViT uses {_EPS:g} (outputs differ "
        "only where a feature's variance is near that size)"
    )
  width, depth = hf_config["hidden_size"], hf_config["num_hidden_layers"]
  heads, qkv_bias = hf_config["num_attention_heads"], hf_config.get("qkv_bias", True)
  prefix = "vit." if "vit.embeddings.cls_token" in tensors else ""
  if bool(prefix) != (arch == "ViTForImageClassification"):
    raise errors.ConversionError(
        f"The config names {arch} but the weights are those of "
        f"{'a ViTForImageClassification' if prefix else 'a ViTModel'}."
    )
  flat = R.import_tensors(
      tensors, _rules(depth, heads, prefix, qkv_bias), source="Hugging Face ViT checkpoint"
  )
  if not qkv_bias:  # no bias is a zero bias
    for i in range(depth):
      for p in ("query", "key", "value"):
        flat[f"Transformer/encoderblock_{i}/MultiHeadDotProductAttention_1/{p}/bias"] = np.zeros(
            (heads, width // heads), np.float32
        )
    notes.append("qkv_bias=False: query/key/value biases set to zero")
  config = dict(
      name="vit",
      **models.vit_variant(
          width,
          depth,
          hf_config["intermediate_size"],
          heads,
          _pair(hf_config.get("patch_size", 16)),
      ),
      classifier="token",
      posemb="learn",
      num_classes=R.num_labels(hf_config) if prefix else 0,
      dropout_rate=hf_config.get("hidden_dropout_prob", 0.0),
      attention_dropout_rate=hf_config.get("attention_probs_dropout_prob", 0.0),
      activation=R.activation(hf_config, "hidden_act", "gelu"),
  )
  if "pre_logits/kernel" in flat:
    config["representation_size"] = int(flat["pre_logits/kernel"].shape[1])
  return config, flat, notes


def export(config: dict, flat: dict):
  """Our ViT config + flat params -> (HF config, tensors)."""
  model = models.build(config)
  if model.classifier != "token" or model.posemb != "learn":
    raise errors.ConversionError(
        f"Hugging Face ViT pools the cls token and learns its position table; this model has "
        f"classifier={model.classifier!r}, posemb={model.posemb!r}. Export it as .npz instead."
    )
  if model.num_classes and model.representation_size:
    raise errors.ConversionError(
        "Hugging Face ViTForImageClassification has no pre-logits layer; "
        "this model has representation_size="
        f"{model.representation_size}. Export it as .npz instead."
    )
  shape, (ph, pw) = model.shape()
  rows, cols = models.grid_of(flat[vit_npz.POSEMB].shape[1], has_cls=True)
  classify = bool(model.num_classes)
  hf_config = dict(
      model_type="vit",
      architectures=["ViTForImageClassification" if classify else "ViTModel"],
      hidden_size=shape.width,
      num_hidden_layers=shape.depth,
      num_attention_heads=shape.num_heads,
      intermediate_size=shape.mlp_dim,
      hidden_act=R.TO_HF_ACTIVATION[model.activation],
      layer_norm_eps=_EPS,
      hidden_dropout_prob=model.dropout_rate,
      attention_probs_dropout_prob=model.attention_dropout_rate,
      image_size=rows * ph if rows * ph == cols * pw else [rows * ph, cols * pw],
      patch_size=ph if ph == pw else [ph, pw],
      num_channels=int(flat["embedding/kernel"].shape[2]),
      qkv_bias=True,
      pooler_act="tanh",
      pooler_output_size=model.representation_size or shape.width,
      initializer_range=0.02,
      dtype=R.dtype_name(flat),
  )
  if classify:
    hf_config.update(R.labels(model.num_classes))
  rules = _rules(shape.depth, shape.num_heads, "vit." if classify else "")
  return hf_config, R.export_tensors(flat, rules, target="Hugging Face ViT checkpoint")
