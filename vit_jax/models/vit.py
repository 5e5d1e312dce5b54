"""Vision Transformer (Dosovitskiy et al. 2021), parameter tree compatible with the original code.

image -> patch embedding (conv, kernel = stride = patch) -> [cls token] -> position embedding ->
pre-LN encoder -> pooling (cls token, global average or MAP attention pooling) -> [pre-logits]
-> head.
"""

import re
from typing import Optional

import flax.linen as nn
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import layers
from vit_jax.models import transformer

# Published shapes (ViT paper; "M", "g" and "G" from Zhai et al. 2022, "Scaling ViTs").
PRESETS = {
    "Ti": transformer.Shape(192, 12, 3, 768),
    "S": transformer.Shape(384, 12, 6, 1536),
    "M": transformer.Shape(512, 12, 8, 2048),
    "B": transformer.Shape(768, 12, 12, 3072),
    "L": transformer.Shape(1024, 24, 16, 4096),
    "H": transformer.Shape(1280, 32, 16, 5120),
    "g": transformer.Shape(1408, 40, 16, 6144),
    "G": transformer.Shape(1664, 48, 16, 8192),
}
CLASSIFIERS = ("token", "gap", "map", "unpooled")


def parse_variant(variant: str):
  """'B/16' -> (Shape of B, (16, 16)). Patch sizes may be rectangular: 'S/16x8'."""
  match = re.fullmatch(r"([A-Za-z]+)/(\d+)(?:x(\d+))?", variant or "")
  if not match:
    raise errors.ConfigError(
        f"Malformed ViT variant {variant!r}: expected PRESET/PATCH such as 'B/16' or "
        f"'S/32', with PRESET one of {list(PRESETS)}."
    )
  name, ph, pw = match.group(1), int(match.group(2)), int(match.group(3) or match.group(2))
  if name not in PRESETS:
    raise errors.ConfigError(
        f"Unknown ViT preset {name!r} in variant {variant!r}; " f"choose one of {list(PRESETS)}."
    )
  if ph <= 0 or pw <= 0:
    raise errors.ConfigError(f"Patch size must be positive in variant {variant!r}.")
  return PRESETS[name], (ph, pw)


class MAPHead(nn.Module):
  """Multihead attention pooling: a learned probe attends over all tokens (big_vision naming)."""

  cfg: transformer.BlockConfig

  @nn.compact
  def __call__(self, x_BxNxD):
    batch, _, width = x_BxNxD.shape
    probe_1x1xD = self.param(
        "probe", nn.initializers.xavier_uniform(), (1, 1, width), jnp.dtype(self.cfg.param_dtype)
    )
    probe_Bx1xD = jnp.tile(probe_1x1xD, (batch, 1, 1)).astype(x_BxNxD.dtype)
    x_Bx1xD = self.cfg.attention("MultiHeadDotProductAttention_0", rope=False)(probe_Bx1xD, x_BxNxD)
    y_Bx1xD = self.cfg.norm("LayerNorm_0")(x_Bx1xD)
    x_Bx1xD = x_Bx1xD + self.cfg.mlp("MlpBlock_0")(y_Bx1xD)
    return x_Bx1xD[:, 0]


class ViT(transformer.BlockOptions, nn.Module, kw_only=True):
  """Vision Transformer classifier (block options: see transformer.BlockOptions).

  Attributes:
    num_classes: head outputs; 0 or None for no head (returns the pooled features).
    variant: "PRESET/PATCH", e.g. "B/16"; width/depth/mlp_dim/num_heads override the preset.
    classifier: "token" (cls token), "gap" (mean of patch tokens), "map" (attention pooling),
      "unpooled" (all tokens, e.g. for dense prediction).
    posemb: "learn" or "sincos2d" or "none".
    representation_size: width of an extra tanh "pre_logits" layer (original ViT); None or 0: none.
    posemb_init_std: std of a learned position table; None: 1/sqrt(width) (big_vision
      models/vit.py line 49; the original ViT's models_vit.py used 0.02).
  """

  num_classes: Optional[int] = 1000
  variant: str = "B/16"
  width: Optional[int] = None
  depth: Optional[int] = None
  mlp_dim: Optional[int] = None
  num_heads: Optional[int] = None
  classifier: str = "token"
  posemb: str = "learn"
  representation_size: Optional[int] = None
  head_bias_init: float = 0.0
  posemb_init_std: Optional[float] = None

  def shape(self) -> tuple[transformer.Shape, tuple[int, int]]:
    preset, patch = parse_variant(self.variant)
    return preset.overridden_by(self), patch

  @nn.compact
  def __call__(self, images_BxHxWxC, train: bool = False, return_attention: bool = False):
    if self.classifier not in CLASSIFIERS:
      raise errors.ConfigError(
          f"Unknown ViT classifier {self.classifier!r}; choose one of {CLASSIFIERS}."
      )
    shape, patch = self.shape()
    cfg = transformer.BlockConfig.from_model_config(
        self, num_heads=shape.num_heads, mlp_dim=shape.mlp_dim, depth=shape.depth
    )
    dtype, param_dtype = jnp.dtype(self.dtype), jnp.dtype(self.param_dtype)
    x_BxNxD, (rows, cols) = layers.patch_embedding(
        images_BxHxWxC, patch, shape.width, dtype, param_dtype, "embedding"
    )
    batch = x_BxNxD.shape[0]

    prefix = 0
    if self.classifier == "token":
      cls_1x1xD = self.param("cls", nn.initializers.zeros, (1, 1, shape.width), param_dtype)
      x_BxNxD = jnp.concatenate([jnp.tile(cls_1x1xD, (batch, 1, 1)).astype(dtype), x_BxNxD], axis=1)
      prefix = 1

    x_BxNxD = transformer.Encoder(
        cfg,
        num_layers=shape.depth,
        posemb=self.posemb,
        posemb_init_std=self.posemb_init_std or shape.width**-0.5,
        posemb_grid=(rows, cols),
        prefix_tokens=prefix,
        name="Transformer",
    )(x_BxNxD, deterministic=not train, return_attention=return_attention)

    if self.classifier == "token":
      x_BxD = x_BxNxD[:, 0]
    elif self.classifier == "gap":
      x_BxD = jnp.mean(x_BxNxD, axis=1)
    elif self.classifier == "map":
      x_BxD = MAPHead(cfg, name="MAPHead_0")(x_BxNxD)
    else:
      x_BxD = x_BxNxD

    if self.representation_size:
      x_BxD = jnp.tanh(
          nn.Dense(
              self.representation_size, dtype=dtype, param_dtype=param_dtype, name="pre_logits"
          )(x_BxD)
      )
    return layers.classifier_head(x_BxD, self.num_classes, param_dtype, self.head_bias_init)
