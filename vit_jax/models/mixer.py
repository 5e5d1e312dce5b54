"""Attention-free token mixing: MLP-Mixer (Tolstikhin et al. 2021) and FNet (Lee-Thorp et al. 2022).

Mixer's parameter names match the original MLP-Mixer checkpoints (`stem`, `MixerBlock_i`,
`token_mixing`, `channel_mixing`, `pre_head_layer_norm`, `head`).
"""

import dataclasses
import functools
import re
from typing import Optional

import flax.linen as nn
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import layers


@dataclasses.dataclass(frozen=True)
class MixerShape:
  hidden_dim: int
  num_blocks: int
  tokens_mlp_dim: int
  channels_mlp_dim: int


MIXER_PRESETS = {
    "S": MixerShape(512, 8, 256, 2048),
    "B": MixerShape(768, 12, 384, 3072),
    "L": MixerShape(1024, 24, 512, 4096),
}


def parse_mixer_variant(variant: str):
  """'B/16' -> (MixerShape of B, 16)."""
  match = re.fullmatch(r"([A-Za-z]+)/(\d+)", variant or "")
  if not match or match.group(1) not in MIXER_PRESETS:
    raise errors.ConfigError(
        f"Malformed or unknown Mixer variant {variant!r}: expected PRESET/PATCH such as "
        f"'B/16' with PRESET one of {list(MIXER_PRESETS)}."
    )
  return MIXER_PRESETS[match.group(1)], int(match.group(2))


class MixerBlock(nn.Module):
  """Token-mixing MLP across patches, then channel-mixing MLP across features (both pre-LN)."""

  tokens_mlp_dim: int
  channels_mlp_dim: int
  activation: str = "gelu_tanh"
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x_BxNxD):
    mlp = functools.partial(layers.MlpBlock, activation=self.activation, dtype=self.dtype)
    y_BxDxN = jnp.swapaxes(nn.LayerNorm(dtype=self.dtype, name="LayerNorm_0")(x_BxNxD), 1, 2)
    y_BxDxN = mlp(self.tokens_mlp_dim, name="token_mixing")(y_BxDxN)
    x_BxNxD = x_BxNxD + jnp.swapaxes(y_BxDxN, 1, 2)
    y_BxNxD = nn.LayerNorm(dtype=self.dtype, name="LayerNorm_1")(x_BxNxD)
    return x_BxNxD + mlp(self.channels_mlp_dim, name="channel_mixing")(y_BxNxD)


class MlpMixer(nn.Module):
  """MLP-Mixer classifier: patch stem, Mixer blocks, LayerNorm, global average pool, head."""

  num_classes: Optional[int] = 1000
  variant: str = "B/16"
  num_blocks: Optional[int] = None
  activation: str = "gelu_tanh"  # vision_transformer models_mixer.py:28, nn.gelu
  dtype: str = "float32"

  @nn.compact
  def __call__(self, images_BxHxWxC, train: bool = False):
    del train  # Mixer as published has no dropout
    shape, patch = parse_mixer_variant(self.variant)
    dtype = jnp.dtype(self.dtype)
    x_BxNxD, _ = layers.patch_embedding(
        images_BxHxWxC, (patch, patch), shape.hidden_dim, dtype, jnp.float32, "stem"
    )
    for i in range(self.num_blocks or shape.num_blocks):
      x_BxNxD = MixerBlock(
          shape.tokens_mlp_dim,
          shape.channels_mlp_dim,
          self.activation,
          dtype=dtype,
          name=f"MixerBlock_{i}",
      )(x_BxNxD)
    x_BxNxD = nn.LayerNorm(dtype=dtype, name="pre_head_layer_norm")(x_BxNxD)
    return layers.classifier_head(jnp.mean(x_BxNxD, axis=1), self.num_classes)


def fourier_mixing(x_BxNxD):
  """FNet's token mixing: the real part of a 2-D DFT over (tokens, features). No parameters."""
  return jnp.real(jnp.fft.fft2(x_BxNxD.astype(jnp.complex64), axes=(1, 2))).astype(x_BxNxD.dtype)


class FNetBlock(nn.Module):
  """Post-LN block with Fourier mixing in place of self-attention."""

  mlp_dim: int
  dropout_rate: float = 0.0
  activation: str = "gelu_tanh"
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x_BxNxD, deterministic: bool = True):
    x_BxNxD = nn.LayerNorm(epsilon=1e-12, dtype=self.dtype, name="mixing_norm")(
        x_BxNxD + fourier_mixing(x_BxNxD)
    )
    # FNet's feed-forward drops its output only, not after the activation.
    y_BxNxD = layers.MlpBlock(
        self.mlp_dim, activation=self.activation, dtype=self.dtype, name="mlp"
    )(x_BxNxD)
    y_BxNxD = nn.Dropout(self.dropout_rate)(y_BxNxD, deterministic=deterministic)
    return nn.LayerNorm(epsilon=1e-12, dtype=self.dtype, name="output_norm")(x_BxNxD + y_BxNxD)


class FNet(nn.Module):
  """FNet image classifier: ViT's patch stem and learned position embedding, Fourier blocks, GAP."""

  num_classes: Optional[int] = 1000
  patch_size: int = 16
  width: int = 768
  depth: int = 12
  mlp_dim: int = 3072
  dropout_rate: float = 0.0
  activation: str = "gelu_tanh"  # google-research f_net/layers.py FeedForwardLayer, nn.gelu
  dtype: str = "float32"

  @nn.compact
  def __call__(self, images_BxHxWxC, train: bool = False):
    dtype = jnp.dtype(self.dtype)
    x_BxNxD, _ = layers.patch_embedding(
        images_BxHxWxC, (self.patch_size,) * 2, self.width, dtype, jnp.float32, "embedding"
    )
    posemb_1xNxD = self.param(
        "pos_embedding", nn.initializers.normal(0.02), (1,) + x_BxNxD.shape[1:]
    )
    x_BxNxD = x_BxNxD + posemb_1xNxD.astype(dtype)
    for i in range(self.depth):
      x_BxNxD = FNetBlock(
          self.mlp_dim, self.dropout_rate, self.activation, dtype=dtype, name=f"fnetblock_{i}"
      )(x_BxNxD, deterministic=not train)
    return layers.classifier_head(jnp.mean(x_BxNxD, axis=1), self.num_classes)
