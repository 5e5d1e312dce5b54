"""Position information: learned tables, fixed sin-cos (1-D and 2-D), RoPE, and resampling."""

import dataclasses
import math
from typing import Optional

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from vit_jax import errors

KINDS = ("learn", "sincos1d", "sincos2d", "rope", "none")


def arange_positions(batch: int, length: int, start=0):
  """Positions start, start + 1, ... of `length` tokens, for every sequence of the batch: (B, L)."""
  return jnp.broadcast_to(start + jnp.arange(length), (batch, length))


def next_positions(counter, batch: int, length: int, positions_BxL=None):
  """Incremental decoding: positions of `length` new tokens after those decoded so far (unless
  given), advancing `counter` (a "cache" variable) past them."""
  if positions_BxL is None:
    positions_BxL = arange_positions(batch, length, counter.value)
  counter.value = counter.value + length
  return positions_BxL


def sincos_1d(length: int, dim: int, base: float = 10_000.0) -> np.ndarray:
  """The original Transformer table: PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(...)."""
  if dim % 2:
    raise errors.ConfigError(f"1-D sin-cos position embeddings need an even width, got {dim}.")
  pos_Lx1 = np.arange(length, dtype=np.float64)[:, None]
  inv_freq_F = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
  angles_LxF = pos_Lx1 * inv_freq_F[None, :]
  table_LxD = np.zeros((length, dim), np.float32)
  table_LxD[:, 0::2] = np.sin(angles_LxF)
  table_LxD[:, 1::2] = np.cos(angles_LxF)
  return table_LxD


def sincos_2d(height: int, width: int, dim: int, temperature: float = 10_000.0) -> np.ndarray:
  """Fixed 2-D table for an image grid (row-major): [sin x, cos x, sin y, cos y] per patch."""
  if dim % 4:
    raise errors.ConfigError(
        f"2-D sin-cos position embeddings need a width divisible by 4, got {dim}."
    )
  y_HxW, x_HxW = np.mgrid[:height, :width].astype(np.float64)
  quarter = dim // 4
  omega_Q = 1.0 / temperature ** (np.arange(quarter) / max(quarter - 1, 1))
  x_NxQ = x_HxW.reshape(-1, 1) * omega_Q[None]
  y_NxQ = y_HxW.reshape(-1, 1) * omega_Q[None]
  return np.concatenate(
      [np.sin(x_NxQ), np.cos(x_NxQ), np.sin(y_NxQ), np.cos(y_NxQ)], axis=1
  ).astype(np.float32)


ROPE_SCALINGS = ("none", "linear", "llama3")


@dataclasses.dataclass(frozen=True)
class RopeScaling:
  """How RoPE's frequencies are stretched for contexts longer than training's (Hugging Face's
  `rope_scaling`): "linear" divides every frequency by `factor` (positions interpolated);
  "llama3" divides only the low ones, those whose wavelength exceeds
  original_max_len / low_freq_factor, keeps those under original_max_len / high_freq_factor,
  and blends between the two."""

  kind: str = "none"
  factor: float = 1.0
  low_freq_factor: float = 1.0
  high_freq_factor: float = 4.0
  original_max_len: int = 8192


def rope_frequencies(head_dim: int, base: float, scaling: Optional[RopeScaling] = None):
  """The (head_dim / 2,) angular frequencies base^(-2i / head_dim), scaled by `scaling`."""
  inv_freq_F = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
  kind = scaling.kind if scaling else "none"
  if kind not in ROPE_SCALINGS:
    raise errors.ConfigError(f"Unknown RoPE scaling {kind!r}; choose one of {ROPE_SCALINGS}.")
  if kind == "linear":
    inv_freq_F = inv_freq_F / scaling.factor
  elif kind == "llama3":
    wavelen_F = 2 * math.pi / inv_freq_F
    low, high = scaling.low_freq_factor, scaling.high_freq_factor
    # 0 for low frequencies (wholly divided), 1 for high ones (kept), linear between.
    smooth_F = np.clip((scaling.original_max_len / wavelen_F - low) / (high - low), 0.0, 1.0)
    inv_freq_F = (1 - smooth_F) * inv_freq_F / scaling.factor + smooth_F * inv_freq_F
  return inv_freq_F.astype(np.float32)


def apply_rope(
    x_BxTxHxK, positions_BxT, base: float = 10_000.0, scaling: Optional[RopeScaling] = None
):
  """Rotary embedding: rotates (first half, second half) pairs of each head by position * freq."""
  half = x_BxTxHxK.shape[-1] // 2
  if 2 * half != x_BxTxHxK.shape[-1]:
    raise ValueError(f"RoPE needs an even head width, got {x_BxTxHxK.shape[-1]}.")
  inv_freq_F = jnp.asarray(rope_frequencies(2 * half, base, scaling))
  angles_BxTxF = positions_BxT[..., None].astype(jnp.float32) * inv_freq_F
  sin_BxTx1xF = jnp.sin(angles_BxTxF)[:, :, None, :]
  cos_BxTx1xF = jnp.cos(angles_BxTxF)[:, :, None, :]
  x1, x2 = x_BxTxHxK[..., :half].astype(jnp.float32), x_BxTxHxK[..., half:].astype(jnp.float32)
  rotated = jnp.concatenate(
      [x1 * cos_BxTx1xF - x2 * sin_BxTx1xF, x2 * cos_BxTx1xF + x1 * sin_BxTx1xF], axis=-1
  )
  return rotated.astype(x_BxTxHxK.dtype)


class AddPositionEmbedding(nn.Module):
  """Adds a position table to a fixed-length sequence (ViT style: `pos_embedding` (1, L, D)).

  Attributes:
    kind: "learn" (a parameter), "sincos1d", "sincos2d" (needs `grid`), or "none".
    grid: (rows, cols) of the patch grid, for "sincos2d".
    prefix_tokens: leading tokens (e.g. the cls token) that get no fixed embedding; a learned
      table holds a slot for each, as in the original ViT checkpoints.
  """

  kind: str = "learn"
  grid: tuple = ()
  prefix_tokens: int = 0
  init_std: float = 0.02  # of a learned table
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x_BxLxD):
    length, dim = x_BxLxD.shape[1:]
    if self.kind == "none":
      return x_BxLxD
    if self.kind == "learn":
      table = self.param(
          "pos_embedding", nn.initializers.normal(self.init_std), (1, length, dim), self.param_dtype
      )
      if table.shape[1] != length:
        raise ValueError(
            f"Sequence of length {length} does not match the position table "
            f"({table.shape[1]} slots); resample it with resample_grid_embedding."
        )
      return x_BxLxD + table.astype(x_BxLxD.dtype)
    if self.kind == "sincos2d":
      fixed_NxD = sincos_2d(*self.grid, dim)
    elif self.kind == "sincos1d":
      fixed_NxD = sincos_1d(length - self.prefix_tokens, dim)
    else:
      raise errors.ConfigError(f"Unknown position embedding {self.kind!r}; choose one of {KINDS}.")
    fixed_LxD = np.concatenate([np.zeros((self.prefix_tokens, dim), np.float32), fixed_NxD])
    if fixed_LxD.shape[0] != length:
      raise ValueError(
          f"Position table for grid {self.grid} has {fixed_LxD.shape[0]} slots but the "
          f"sequence has {length} tokens."
      )
    return x_BxLxD + jnp.asarray(fixed_LxD, x_BxLxD.dtype)[None]


def resample_grid_embedding(posemb_1xLxD, new_grid, prefix_tokens: int = 0):
  """Resizes a learned grid position table to `new_grid` (rows, cols) as the original ViT and
  big_vision do: scipy.ndimage.zoom(order=1), linear interpolation whose corner cells stay the
  corners (vision_transformer vit_jax/checkpoint.py:235-236, big_vision models/vit.py:318-319).

  The table is (1, prefix + rows * cols, D) with a square old grid; prefix slots are kept as
  they are.
  Used to fine-tune at another resolution than the one the checkpoint was trained at.
  """
  from scipy import ndimage  # pylint: disable=import-outside-toplevel  (fine-tuning only)

  posemb_1xLxD = np.asarray(posemb_1xLxD)
  prefix, grid_1xNxD = posemb_1xLxD[:, :prefix_tokens], posemb_1xLxD[:, prefix_tokens:]
  old = int(math.isqrt(grid_1xNxD.shape[1]))
  if old * old != grid_1xNxD.shape[1]:
    raise ValueError(
        f"Cannot resample a position table of {grid_1xNxD.shape[1]} grid slots: "
        "it is not a square grid."
    )
  rows, cols = new_grid
  if (rows, cols) == (old, old):
    return posemb_1xLxD
  grid_HxWxD = grid_1xNxD.reshape(old, old, -1).astype(np.float32)
  resized_hxwxD = ndimage.zoom(grid_HxWxD, (rows / old, cols / old, 1), order=1)
  resized_1xNxD = resized_hxwxD.astype(posemb_1xLxD.dtype).reshape(1, rows * cols, -1)
  return np.concatenate([prefix, resized_1xNxD], axis=1)
