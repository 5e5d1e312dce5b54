"""Boolean attention masks: True means "query may attend to this key".

Every dense mask here has shape (B, 1, T, S) (batch, heads broadcast, queries, keys), so masks of
different kinds combine with a plain logical AND. `MaskSpec` describes the same masks by their
structure in O(T + S) memory; the models pass it down and attention builds the dense mask only
for the kernels that take one (the chunked kernel builds each chunk of it instead).
"""

from typing import Optional

import flax.struct
import jax
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


def _and(a, b):
  return jnp.asarray(b).astype(bool) if a is None else a & jnp.asarray(b).astype(bool)


@flax.struct.dataclass
class MaskSpec:
  """An attention mask by its parts; query t may attend to key s when every given part allows:

    causal: s <= t + S - T (the last query sees every key; the usual triangle when T == S);
    q_segment_ids_BxT, kv_segment_ids_BxS: equal ids (packed sequences);
    q_valid_BxT, kv_valid_BxS: both tokens are real (False marks padding).

  Build it with `MaskSpec(causal=...).with_padding(...).with_segments(...)`, which mean the
  same as `padding_mask` and `segment_mask`. It is a pytree, so it passes through jit, scan and
  remat like an array.
  """

  causal: bool = flax.struct.field(pytree_node=False, default=False)
  q_segment_ids_BxT: Optional[jax.Array] = None
  kv_segment_ids_BxS: Optional[jax.Array] = None
  q_valid_BxT: Optional[jax.Array] = None
  kv_valid_BxS: Optional[jax.Array] = None

  def with_padding(self, query_valid_BxT, key_valid_BxS=None) -> "MaskSpec":
    """Also mask padding, as `padding_mask` (keys default to the queries); None adds nothing."""
    if query_valid_BxT is None:
      return self
    if key_valid_BxS is None:
      key_valid_BxS = query_valid_BxT
    return self.replace(
        q_valid_BxT=_and(self.q_valid_BxT, query_valid_BxT),
        kv_valid_BxS=_and(self.kv_valid_BxS, key_valid_BxS),
    )

  def with_segments(self, query_segments_BxT, key_segments_BxS=None) -> "MaskSpec":
    """Also mask across segments, as `segment_mask` (0 is padding); None adds nothing."""
    if query_segments_BxT is None:
      return self
    if self.q_segment_ids_BxT is not None:
      raise ValueError("MaskSpec already has segment ids; combine them into one id per token.")
    if key_segments_BxS is None:
      key_segments_BxS = query_segments_BxT
    q_BxT, k_BxS = jnp.asarray(query_segments_BxT), jnp.asarray(key_segments_BxS)
    spec = self.replace(q_segment_ids_BxT=q_BxT, kv_segment_ids_BxS=k_BxS)
    return spec.with_padding(q_BxT > 0, k_BxS > 0)

  def dense(self, batch: int, q_len: int, kv_len: int):
    """The (B, 1, T, S) boolean mask, or None when no part is given. Quadratic in memory."""
    parts = []
    if self.causal:
      query_T, key_S = jnp.arange(q_len) + kv_len - q_len, jnp.arange(kv_len)
      parts.append((key_S[None, :] <= query_T[:, None])[None, None])
    if self.q_segment_ids_BxT is not None:
      q_BxT, k_BxS = self.q_segment_ids_BxT, self.kv_segment_ids_BxS
      parts.append((q_BxT[:, :, None] == k_BxS[:, None, :])[:, None])
    if self.q_valid_BxT is not None:
      parts.append(jnp.asarray(self.q_valid_BxT, bool)[:, None, :, None])
    if self.kv_valid_BxS is not None:
      parts.append(jnp.asarray(self.kv_valid_BxS, bool)[:, None, None, :])
    mask = combine(*parts)
    return None if mask is None else jnp.broadcast_to(mask, (batch, 1, q_len, kv_len))


def check_mask_shape(mask, batch: int, heads: int, q_len: int, kv_len: int):
  """Raises a ValueError naming the shapes unless `mask` broadcasts to (B, H, T, S).

  A MaskSpec's query vectors must broadcast to (B, T) and its key vectors to (B, S).
  """
  if isinstance(mask, MaskSpec):
    vectors = {
        "q_segment_ids_BxT": (mask.q_segment_ids_BxT, q_len),
        "kv_segment_ids_BxS": (mask.kv_segment_ids_BxS, kv_len),
        "q_valid_BxT": (mask.q_valid_BxT, q_len),
        "kv_valid_BxS": (mask.kv_valid_BxS, kv_len),
    }
    for name, (vector, length) in vectors.items():
      if vector is not None and (
          vector.ndim != 2 or vector.shape[0] not in (1, batch) or vector.shape[1] != length
      ):
        raise ValueError(
            f"MaskSpec.{name} has shape {tuple(vector.shape)} but must be (batch, length) = "
            f"{(batch, length)}."
        )
    return
  want = (batch, heads, q_len, kv_len)
  if mask.ndim != 4 or any(m not in (1, w) for m, w in zip(mask.shape, want)):
    raise ValueError(
        f"Attention mask has shape {tuple(mask.shape)} but must broadcast to "
        f"(batch, heads, queries, keys) = {want}. Build it with vit_jax.models.masks "
        "(padding_mask, causal_mask, segment_mask), which return (B, 1, T, S)."
    )
