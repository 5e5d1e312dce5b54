"""Boolean attention masks: True means "query may attend to this key".

Every mask here has shape (B, 1, T, S) (batch, heads broadcast, queries, keys), so masks of
different kinds combine with a plain logical AND.
"""

from typing import Optional

import jax.numpy as jnp


def padding_mask(query_valid_BxT, key_valid_BxS=None):
  """Mask out padded keys (and padded queries, whose rows are never used)."""
  if key_valid_BxS is None:
    key_valid_BxS = query_valid_BxT
  q_BxT = jnp.asarray(query_valid_BxT).astype(bool)
  k_BxS = jnp.asarray(key_valid_BxS).astype(bool)
  return q_BxT[:, None, :, None] & k_BxS[:, None, None, :]


def causal_mask(length: int, batch: int = 1):
  """Lower-triangular mask: position t sees positions <= t."""
  idx = jnp.arange(length)
  mask_TxT = idx[:, None] >= idx[None, :]
  return jnp.broadcast_to(mask_TxT, (batch, 1, length, length))


def segment_mask(query_segments_BxT, key_segments_BxS=None):
  """Packed sequences: a token attends only within its own segment id (0 = padding)."""
  if key_segments_BxS is None:
    key_segments_BxS = query_segments_BxT
  q_BxT = jnp.asarray(query_segments_BxT)
  k_BxS = jnp.asarray(key_segments_BxS)
  same_BxTxS = q_BxT[:, :, None] == k_BxS[:, None, :]
  # Padding (segment 0) attends nowhere useful; keep it from seeing real tokens.
  real_BxTxS = (q_BxT[:, :, None] > 0) & (k_BxS[:, None, :] > 0)
  return (same_BxTxS & real_BxTxS)[:, None]


def combine(*masks: Optional[jnp.ndarray]):
  """Logical AND of the masks that are not None; None if all are None."""
  masks = [m for m in masks if m is not None]
  if not masks:
    return None
  out = masks[0].astype(bool)
  for m in masks[1:]:
    out = out & m.astype(bool)
  return out


def check_mask_shape(mask, batch: int, heads: int, q_len: int, kv_len: int):
  """Raises a ValueError naming the shapes unless `mask` broadcasts to (B, H, T, S)."""
  want = (batch, heads, q_len, kv_len)
  if mask.ndim != 4 or any(m not in (1, w) for m, w in zip(mask.shape, want)):
    raise ValueError(
        f"Attention mask has shape {tuple(mask.shape)} but must broadcast to "
        f"(batch, heads, queries, keys) = {want}. Build it with vit_jax.models.masks "
        "(padding_mask, causal_mask, segment_mask), which return (B, 1, T, S)."
    )
