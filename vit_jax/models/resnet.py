"""BiT ResNet (Kolesnikov et al. 2020, "Big Transfer"): ResNet-v2 with GroupNorm and weight
standardization, so that no layer depends on the batch (no batch statistics to keep or sync).

image -> root (7x7/2 standardized conv + 3x3/2 max pool; or one 3x3/1 conv for 32-px images)
-> 4 stages of pre-activation bottleneck units (GroupNorm, ReLU, conv; the first unit of stages
2-4 strides by 2 in its 3x3 conv) -> GroupNorm -> ReLU -> global average pool -> zero-initialized
linear head.

Parameter names follow big_vision's BiT (`root_block/conv_root`, `block1/unit01/conv1`, `gn1`,
`conv_proj`, `head`); padding follows the released BiT models (symmetric, zeros before the pool),
as timm's `resnetv2_*_bit` does.
"""

import re
from typing import Optional, Sequence

import flax.linen as nn
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import layers

# Bottleneck units per stage, by depth (BiT paper; 26 as in timm's resnetv2_26).
BLOCK_COUNTS = {
    26: (2, 2, 2, 2),
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
}
STEMS = ("imagenet", "small")
BOTTLENECK_EXPANSION = 4  # a unit's output is 4x its bottleneck width


def parse_variant(variant: str) -> tuple[tuple[int, ...], int]:
  """'50x3' -> (block counts of ResNet-50, width factor 3)."""
  match = re.fullmatch(r"(\d+)x(\d+)", variant or "")
  if not match or int(match.group(1)) not in BLOCK_COUNTS or int(match.group(2)) < 1:
    raise errors.ConfigError(
        f"Malformed or unknown ResNet variant {variant!r}: expected DEPTHxWIDTH such as '50x1' "
        f"or '101x3', with DEPTH one of {list(BLOCK_COUNTS)} (or set block_counts)."
    )
  return BLOCK_COUNTS[int(match.group(1))], int(match.group(2))


def standardize(kernel_HxWxIxO, eps: float):
  """Zero mean and unit variance per output channel, over the kernel's other axes."""
  mean_O = jnp.mean(kernel_HxWxIxO, axis=(0, 1, 2), keepdims=True)
  var_O = jnp.var(kernel_HxWxIxO, axis=(0, 1, 2), keepdims=True)
  return (kernel_HxWxIxO - mean_O) / jnp.sqrt(var_O + eps)


class StdConv(nn.Conv):
  """A convolution whose effective kernel is weight-standardized (Qiao et al. 2019).

  The stored kernel stays free; the conv sees it standardized. A subclass of nn.Conv, so
  vit_jax/training/flops.py counts it as any conv. (w - mean) / sqrt(var + eps), the released BiT
  checkpoints' form, with eps 1e-8 as in timm's BiT port (BiT: 1e-10), so converted checkpoints
  give timm's outputs. big_vision's bit.py (lines 28-39) divides by std + 1e-5 instead: for a
  kernel of std s the two differ by about 1e-5 / s relative (below 0.1% for s > 0.01).
  """

  eps: float = 1e-8

  def param(self, name, *args, **kwargs):
    value = super().param(name, *args, **kwargs)
    return standardize(value, self.eps) if name == "kernel" else value


def std_conv(features: int, kernel: int, stride: int, dtype, param_dtype, name: str):
  """A bias-free StdConv with symmetric padding kernel // 2 (BiT's fixed padding; TF "SAME"
  would pad a strided conv on an even input asymmetrically)."""
  return StdConv(
      features,
      (kernel, kernel),
      strides=(stride, stride),
      padding=[(kernel // 2, kernel // 2)] * 2,
      use_bias=False,
      dtype=dtype,
      param_dtype=param_dtype,
      name=name,
  )


def group_norm(num_groups: int, dtype, param_dtype, name: str):
  # Two-pass variance: the fast E[x^2] - E[x]^2 form loses precision on large activations.
  return nn.GroupNorm(
      num_groups=num_groups,
      epsilon=1e-5,
      use_fast_variance=False,
      dtype=dtype,
      param_dtype=param_dtype,
      name=name,
  )


class RootBlock(nn.Module):
  """The stem: no norm or activation (pre-activation: each unit normalizes its own input)."""

  width: int
  stem: str = "imagenet"
  dtype: str = "float32"
  param_dtype: str = "float32"

  @nn.compact
  def __call__(self, x_BxHxWxC):
    if self.stem == "small":
      return std_conv(self.width, 3, 1, self.dtype, self.param_dtype, "conv_root")(x_BxHxWxC)
    x_BxhxwxD = std_conv(self.width, 7, 2, self.dtype, self.param_dtype, "conv_root")(x_BxHxWxC)
    # BiT pads with zeros (not -inf) before the pool; the conv's outputs may be negative.
    x_BxhxwxD = jnp.pad(x_BxhxwxD, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return nn.max_pool(x_BxhxwxD, (3, 3), strides=(2, 2), padding="VALID")


class BottleneckUnit(nn.Module):
  """Pre-activation bottleneck: GN-ReLU-1x1, GN-ReLU-3x3 (strided), GN-ReLU-1x1, plus shortcut.

  The shortcut is a strided 1x1 projection of the pre-activated input when the shape changes.
  """

  width: int  # bottleneck channels; the unit outputs 4x as many
  stride: int = 1
  num_groups: int = 32
  dtype: str = "float32"
  param_dtype: str = "float32"

  @nn.compact
  def __call__(self, x_BxHxWxC):
    out = self.width * BOTTLENECK_EXPANSION
    conv = lambda features, kernel, stride, name: std_conv(
        features, kernel, stride, self.dtype, self.param_dtype, name
    )
    norm = lambda name: group_norm(self.num_groups, self.dtype, self.param_dtype, name)

    y_BxHxWxC = nn.relu(norm("gn1")(x_BxHxWxC))
    shortcut_BxhxwxO = x_BxHxWxC
    if x_BxHxWxC.shape[-1] != out or self.stride != 1:
      shortcut_BxhxwxO = conv(out, 1, self.stride, "conv_proj")(y_BxHxWxC)
    y_BxHxWxM = nn.relu(norm("gn2")(conv(self.width, 1, 1, "conv1")(y_BxHxWxC)))
    y_BxhxwxM = nn.relu(norm("gn3")(conv(self.width, 3, self.stride, "conv2")(y_BxHxWxM)))
    return shortcut_BxhxwxO + conv(out, 1, 1, "conv3")(y_BxhxwxM)


class Stage(nn.Module):
  """Units at one resolution; the first one strides (and projects the shortcut)."""

  units: int
  width: int
  stride: int = 1
  num_groups: int = 32
  dtype: str = "float32"
  param_dtype: str = "float32"

  @nn.compact
  def __call__(self, x_BxHxWxC):
    for j in range(self.units):
      x_BxHxWxC = BottleneckUnit(
          self.width,
          self.stride if j == 0 else 1,
          self.num_groups,
          self.dtype,
          self.param_dtype,
          name=f"unit{j + 1:02d}",
      )(x_BxHxWxC)
    return x_BxHxWxC


class ResNetV2(nn.Module):
  """BiT ResNet-v2 classifier.

  Attributes:
    num_classes: head outputs; 0 or None for no head (returns the pooled features).
    variant: "DEPTHxWIDTH", e.g. "50x1", "101x3", "152x4" (depth 26, 50, 101 or 152).
    block_counts: units per stage, overriding the depth's (e.g. (1, 1) for a 2-stage toy net).
    width_factor: overrides the variant's width multiplier.
    width: channels of the root and bottleneck width of the first stage (default 64 x width
      factor); stage i has width x 2^i and outputs 4x that.
    stem: "imagenet" (7x7/2 conv + 3x3/2 max pool: 224 px -> 56) or "small" (one 3x3/1 conv,
      no pool: for 32-px images).
    num_groups: GroupNorm groups (BiT: 32); every stage's width must be divisible by it.
    head_bias_init: initial bias of the (zero-kernel) head.
  """

  num_classes: Optional[int] = 1000
  variant: str = "50x1"
  block_counts: Optional[Sequence[int]] = None
  width_factor: Optional[int] = None
  width: Optional[int] = None
  stem: str = "imagenet"
  num_groups: int = 32
  head_bias_init: float = 0.0
  dtype: str = "float32"
  param_dtype: str = "float32"

  def shape(self) -> tuple[tuple[int, ...], int]:
    """(units per stage, root width), after the overrides; a ConfigError if inconsistent."""
    counts, factor = parse_variant(self.variant)
    counts = tuple(self.block_counts or counts)
    width = self.width or 64 * (self.width_factor or factor)
    if not counts or min(counts) < 1 or width < 1:
      raise errors.ConfigError(
          f"ResNet block_counts={list(counts)} and width={width} must be positive (at least one "
          "stage of at least one unit)."
      )
    if width % self.num_groups:
      raise errors.ConfigError(
          f"ResNet width {width} is not divisible by num_groups={self.num_groups} (GroupNorm): "
          "choose a width that is a multiple of it, or fewer groups."
      )
    if self.stem not in STEMS:
      raise errors.ConfigError(f"Unknown ResNet stem {self.stem!r}; choose one of {STEMS}.")
    return counts, width

  @nn.compact
  def __call__(self, images_BxHxWxC, train: bool = False):
    del train  # no dropout, and GroupNorm keeps no batch statistics
    counts, width = self.shape()
    dtype, param_dtype = jnp.dtype(self.dtype), jnp.dtype(self.param_dtype)
    if images_BxHxWxC.ndim != 4:
      raise errors.ConfigError(
          f"Expected images (batch, height, width, channels), got shape {images_BxHxWxC.shape}."
      )
    x_BxHxWxC = images_BxHxWxC.astype(dtype)

    x_BxhxwxD = RootBlock(width, self.stem, dtype, param_dtype, name="root_block")(x_BxHxWxC)
    for i, units in enumerate(counts):
      x_BxhxwxD = Stage(
          units,
          width * 2**i,
          stride=1 if i == 0 else 2,
          num_groups=self.num_groups,
          dtype=dtype,
          param_dtype=param_dtype,
          name=f"block{i + 1}",
      )(x_BxhxwxD)
    x_BxhxwxD = nn.relu(group_norm(self.num_groups, dtype, param_dtype, "pre_head_norm")(x_BxhxwxD))
    x_BxD = jnp.mean(x_BxhxwxD, axis=(1, 2))
    return layers.classifier_head(x_BxD, self.num_classes, param_dtype, self.head_bias_init)
