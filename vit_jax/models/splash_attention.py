"""Pallas splash attention, the TPU kernel, fed from a `masks.MaskSpec`'s parts: no dense mask.

The kernel takes one example's (H, T, K) queries and (H, S, K) keys and values, a static mask
(causal or full, known at trace time, so whole blocks above the diagonal are skipped) and one
segment id per token; a query sees a key only where both allow and their ids are equal. Every
dynamic part of a MaskSpec becomes a segment id: packed segments keep their ids, a padded query
gets -1 and a padded key -2, so they match nothing. The kernel's key blocks are multiples of 128
lanes, so both lengths are padded to a multiple of 128 here (a ViT-B/16's 197 tokens become 256)
and the padding is masked by its segment ids; padded query rows are cut off the output.

Query rows that see no key at all (padding) come out different from the einsum reference (which
averages every value there); no model reads them. Under a mesh (`jax.set_mesh`) the kernel runs
per device in a `shard_map`: batch over the mesh's other axes, heads over `HEAD_AXIS`.

Shape letters: B batch, T query length, S key length, H heads, K head width.
"""

import jax
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as kernel_lib
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from vit_jax.models import masks as masks_lib

LANES = 128  # the kernel's key blocks are multiples of this; lengths are padded to it
BLOCK_SIZES = (512, 256, 128)  # the largest that divides a padded length is its block
HEAD_AXIS = (
    "model"  # the mesh axis that splits heads (as training/mesh.py's sharding rules split them)
)
PADDED_QUERY, PADDED_KEY = -1, -2  # segment ids that match nothing


def supports(q_len: int, kv_len: int, spec: masks_lib.MaskSpec) -> bool:
  """Whether the kernel computes this attention. A causal mask with more queries than keys leaves
  the first queries no key, whose rows the kernel skips (undefined softmax)."""
  return not (spec.causal and q_len > kv_len)


def splash_attention(q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, spec: masks_lib.MaskSpec, interpret: bool):
  """softmax(Q K^T / sqrt(K)) V under `spec`. `interpret` runs the kernel in Pallas's
  interpreter (any platform; slow, for tests)."""
  batch, q_len, heads, depth = q_BxTxHxK.shape
  kv_len = k_BxSxHxK.shape[1]
  q_pad, kv_pad = _round_up(q_len) - q_len, _round_up(kv_len) - kv_len

  # The kernel does not scale the logits: scale the queries (the reference scales Q K^T).
  q_BxTxHxK = q_BxTxHxK / jnp.sqrt(jnp.float32(depth)).astype(q_BxTxHxK.dtype)
  to_bhtk = lambda x, pad: jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))).transpose(0, 2, 1, 3)
  q_BxHxTxK = to_bhtk(q_BxTxHxK, q_pad)
  k_BxHxSxK, v_BxHxSxK = to_bhtk(k_BxSxHxK, kv_pad), to_bhtk(v_BxSxHxK, kv_pad)
  segments = _segment_ids(spec, batch, q_len, kv_len, q_pad, kv_pad)
  # Causal as in MaskSpec: key s is visible to query t when s <= t + S - T (unpadded lengths).
  causal_offset = kv_len - q_len if spec.causal else None

  def attend(q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, segments):
    local_heads, padded_q, padded_kv = q_BxHxTxK.shape[1], q_BxHxTxK.shape[2], k_BxHxSxK.shape[2]
    kernel = _kernel(local_heads, padded_q, padded_kv, causal_offset, interpret)
    if segments is None:
      return jax.vmap(kernel)(q_BxHxTxK, k_BxHxSxK, v_BxHxSxK)
    q_ids_BxT, kv_ids_BxS = segments
    return jax.vmap(lambda q, k, v, qi, ki: kernel(q, k, v, kernel_lib.SegmentIds(qi, ki)))(
        q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, q_ids_BxT, kv_ids_BxS
    )

  mesh = jax.sharding.get_abstract_mesh()
  if not mesh.empty and mesh.size > 1:  # a Mosaic kernel is not partitioned by XLA: shard_map
    batch_axes = tuple(a for a in mesh.axis_names if a != HEAD_AXIS and mesh.shape[a] > 1)
    if batch % max(1, _size(mesh, batch_axes)):
      batch_axes = ()  # e.g. a batch of 1 at init: every device computes the whole batch
    head_axis = HEAD_AXIS if HEAD_AXIS in mesh.axis_names else None
    if head_axis is not None and (mesh.shape[HEAD_AXIS] == 1 or heads % mesh.shape[HEAD_AXIS]):
      head_axis = None
    batch_spec = batch_axes or None
    qkv_spec = P(batch_spec, head_axis, None, None)
    segments_spec = None if segments is None else (P(batch_spec, None), P(batch_spec, None))
    attend = jax.shard_map(
        attend,
        mesh=mesh,
        in_specs=(qkv_spec, qkv_spec, qkv_spec, segments_spec),
        out_specs=qkv_spec,
        check_vma=False,
    )
  out_BxHxTxK = attend(q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, segments)
  return out_BxHxTxK[:, :, :q_len].transpose(0, 2, 1, 3)


def keeps_more_than_xla(q_len: int, kv_len: int, head_dim: int) -> bool:
  """Whether the kernel's backward would keep more activation memory than XLA's attention.

  Per example and head, in the compute dtype's elements: the kernel keeps its head-major
  queries, keys, values and output, padded to the kernel's lengths, and a TPU's HBM tiles pad
  their head width to 128 lanes (a (T', 64) array takes the room of a (T', 128) one); XLA's
  attention keeps the (T, S) probabilities and the queries, keys and values (vit_jax/models/
  attention.py, xla_attention). Short sequences at head widths under 128 lanes favour XLA: a
  ViT-B/16's 197 tokens at width 64 keep 131k elements under the kernel and 77k under XLA.
  """
  lanes = _round_up(head_dim)
  kernel = (2 * _round_up(q_len) + 2 * _round_up(kv_len)) * lanes
  xla = q_len * kv_len + (q_len + 2 * kv_len) * head_dim
  return kernel > xla


def _round_up(length: int) -> int:
  return -(-length // LANES) * LANES


def _size(mesh, axes) -> int:
  size = 1
  for a in axes:
    size *= mesh.shape[a]
  return size


def _block(length: int) -> int:
  return next(b for b in BLOCK_SIZES if length % b == 0)


def _segment_ids(spec, batch, q_len, kv_len, q_pad, kv_pad):
  """(q ids (B, T'), kv ids (B, S')) padded to the kernel's lengths, or None when every token
  sees every key (no segments, no padding)."""
  q_valid, kv_valid = spec.q_valid_BxT, spec.kv_valid_BxS
  if spec.q_segment_ids_BxT is None and q_valid is None and kv_valid is None and not kv_pad:
    return None  # padded query rows see real keys, and are cut off

  def ids(segments, valid, length, pad, invalid):
    ids_BxL = jnp.zeros((1, length), jnp.int32) if segments is None else segments.astype(jnp.int32)
    if valid is not None:
      ids_BxL = jnp.where(jnp.asarray(valid, bool), ids_BxL, invalid)
    ids_BxL = jnp.broadcast_to(ids_BxL, (batch, length))
    return jnp.pad(ids_BxL, ((0, 0), (0, pad)), constant_values=invalid)

  return (
      ids(spec.q_segment_ids_BxT, q_valid, q_len, q_pad, PADDED_QUERY),
      ids(spec.kv_segment_ids_BxS, kv_valid, kv_len, kv_pad, PADDED_KEY),
  )


def _kernel(heads: int, q_len: int, kv_len: int, causal_offset, interpret: bool):
  """The kernel for one example's (heads, q_len, kv_len) attention, lengths multiples of 128."""
  shape = (q_len, kv_len)
  if causal_offset is None:
    head_mask = mask_lib.FullMask(shape)
  else:
    head_mask = mask_lib.CausalMask(shape, offset=causal_offset)
  block_q, block_kv = _block(q_len), _block(kv_len)
  block_sizes = kernel_lib.BlockSizes(
      block_q=block_q,
      block_kv=block_kv,
      block_kv_compute=block_kv,
      block_q_dkv=block_q,
      block_kv_dkv=block_kv,
      block_kv_dkv_compute=block_kv,
      use_fused_bwd_kernel=True,
  )
  return kernel_lib.make_splash_mha(
      mask_lib.MultiHeadMask([head_mask] * heads),
      block_sizes=block_sizes,
      head_shards=1,
      q_seq_shards=1,
      interpret=interpret,
  )
