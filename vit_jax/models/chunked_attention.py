"""Attention in key chunks with an online softmax: memory linear in sequence length.

The forward pass keeps a running max, sum and output per query (Milakov & Gimelshein 2018; Rabe &
Staats 2021) and saves only the output and each row's max and sum; the backward pass recomputes
each chunk's weights from them (FlashAttention, Dao et al. 2022), so no (T, S) array is stored.
Structural masks (`causal`, segment ids, query and key validity: what a `masks.MaskSpec` holds)
are built per chunk from O(T + S) vectors; a dense `mask` is sliced per chunk, but the caller has
already paid for it (T x S bytes). Masked logits get float32's minimum, as in the einsum
reference, so even fully masked rows give the same values and gradients (uniform weights).

Shape letters: B batch, T query length, S key length, H heads, K head width, C chunk length.
"""

import functools

import jax
import jax.numpy as jnp

MASKED = float(jnp.finfo(jnp.float32).min)


def chunked_attention(
    q_BxTxHxK,
    k_BxSxHxK,
    v_BxSxHxK,
    mask=None,
    *,
    causal: bool = False,
    q_segment_ids_BxT=None,
    kv_segment_ids_BxS=None,
    q_valid_BxT=None,
    kv_valid_BxS=None,
    chunk_size: int = 512,
):
  """softmax(Q K^T / sqrt(K)) V with the masks applied, in fp32, computed chunk by chunk.

  Query t may attend to key s when every mask given allows it: `mask[b, :, t, s]`; with `causal`,
  s <= t + S - T; equal segment ids; `q_valid_BxT[b, t]` and `kv_valid_BxS[b, s]`.
  """
  (_, length, _, depth), keys = q_BxTxHxK.shape, k_BxSxHxK.shape[1]
  chunk = min(chunk_size, keys)
  padded = -(-keys // chunk) * chunk
  to_bhsk = lambda x: jnp.pad(
      x.astype(jnp.float32).transpose(0, 2, 1, 3),
      ((0, 0), (0, 0), (0, padded - x.shape[1]), (0, 0)),
  )
  q_BxHxTxK = q_BxTxHxK.astype(jnp.float32).transpose(0, 2, 1, 3) / jnp.sqrt(jnp.float32(depth))
  if mask is not None:
    mask = jnp.pad(mask.astype(bool), [(0, 0)] * 3 + [(0, padded - keys)])
  pad_keys = lambda x_BxS: None if x_BxS is None else jnp.pad(x_BxS, ((0, 0), (0, padded - keys)))
  if q_valid_BxT is not None:
    q_valid_BxT = jnp.asarray(q_valid_BxT, bool)
  if kv_valid_BxS is not None:
    kv_valid_BxS = jnp.asarray(kv_valid_BxS, bool)
  structure = (chunk, keys, length, causal)
  out_BxHxTxK = _attention(
      structure,
      q_BxHxTxK,
      to_bhsk(k_BxSxHxK),
      to_bhsk(v_BxSxHxK),
      (mask, q_segment_ids_BxT, pad_keys(kv_segment_ids_BxS), q_valid_BxT, pad_keys(kv_valid_BxS)),
  )
  return out_BxHxTxK.transpose(0, 2, 1, 3).astype(q_BxTxHxK.dtype)


def _visible(structure, masks, start):
  """(allowed, in range) for keys [start, start + C): allowed by the masks, and real keys."""
  chunk, keys, length, causal = structure
  mask, q_segments_BxT, kv_segments_BxS, q_valid_BxT, kv_valid_BxS = masks
  key_C = start + jnp.arange(chunk)
  in_range = (key_C < keys)[None, None, None, :]
  allowed = jnp.ones((1, 1, 1, chunk), bool)
  if mask is not None:
    allowed = allowed & jax.lax.dynamic_slice_in_dim(mask, start, chunk, axis=3)
  if causal:  # query t sits at position keys - length + t (the last query sees every key)
    query_T = keys - length + jnp.arange(length)
    allowed = allowed & (key_C[None, :] <= query_T[:, None])[None, None]
  if q_segments_BxT is not None:
    kv_BxC = jax.lax.dynamic_slice_in_dim(kv_segments_BxS, start, chunk, axis=1)
    allowed = allowed & (q_segments_BxT[:, None, :, None] == kv_BxC[:, None, None, :])
  if q_valid_BxT is not None:
    allowed = allowed & q_valid_BxT[:, None, :, None]
  if kv_valid_BxS is not None:
    kv_BxC = jax.lax.dynamic_slice_in_dim(kv_valid_BxS, start, chunk, axis=1)
    allowed = allowed & kv_BxC[:, None, None, :]
  return allowed, in_range


def _logits(structure, masks, q_BxHxTxK, k_BxHxCxK, start):
  logits_BxHxTxC = jnp.einsum("bhtk,bhck->bhtc", q_BxHxTxK, k_BxHxCxK)
  allowed, in_range = _visible(structure, masks, start)
  logits_BxHxTxC = jnp.where(allowed, logits_BxHxTxC, MASKED)
  return jnp.where(in_range, logits_BxHxTxC, -jnp.inf), allowed  # padding keys weigh nothing


def _chunks(x_BxHxSxK, chunk):
  batch, heads, padded, depth = x_BxHxSxK.shape
  return x_BxHxSxK.reshape(batch, heads, padded // chunk, chunk, depth).transpose(2, 0, 1, 3, 4)


def _forward(structure, q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, masks):
  chunk = structure[0]
  batch, heads, length, depth = q_BxHxTxK.shape

  def step(carry, inputs):
    max_BxHxT, sum_BxHxT, out_BxHxTxK = carry
    index, k_BxHxCxK, v_BxHxCxK = inputs
    logits_BxHxTxC, _ = _logits(structure, masks, q_BxHxTxK, k_BxHxCxK, index * chunk)
    new_max_BxHxT = jnp.maximum(max_BxHxT, logits_BxHxTxC.max(axis=-1))
    weights_BxHxTxC = jnp.exp(logits_BxHxTxC - new_max_BxHxT[..., None])
    rescale_BxHxT = jnp.exp(max_BxHxT - new_max_BxHxT)
    sum_BxHxT = sum_BxHxT * rescale_BxHxT + weights_BxHxTxC.sum(axis=-1)
    out_BxHxTxK = out_BxHxTxK * rescale_BxHxT[..., None] + jnp.einsum(
        "bhtc,bhck->bhtk", weights_BxHxTxC, v_BxHxCxK
    )
    return (new_max_BxHxT, sum_BxHxT, out_BxHxTxK), None

  init = (
      jnp.full((batch, heads, length), -jnp.inf),
      jnp.zeros((batch, heads, length)),
      jnp.zeros((batch, heads, length, depth)),
  )
  k_chunks, v_chunks = _chunks(k_BxHxSxK, chunk), _chunks(v_BxHxSxK, chunk)
  (max_BxHxT, sum_BxHxT, out_BxHxTxK), _ = jax.lax.scan(
      step, init, (jnp.arange(k_chunks.shape[0]), k_chunks, v_chunks)
  )
  out_BxHxTxK = out_BxHxTxK / sum_BxHxT[..., None]
  # Not one log-sum-exp: in a fully masked row max is float32's minimum, which swallows log(sum).
  return out_BxHxTxK, (max_BxHxT, sum_BxHxT)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(structure, q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, masks):
  return _forward(structure, q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, masks)[0]


def _attention_fwd(structure, q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, masks):
  out_BxHxTxK, softmax_stats = _forward(structure, q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, masks)
  return out_BxHxTxK, (q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, masks, out_BxHxTxK, softmax_stats)


def _attention_bwd(structure, residuals, dout_BxHxTxK):
  q_BxHxTxK, k_BxHxSxK, v_BxHxSxK, masks, out_BxHxTxK, (max_BxHxT, sum_BxHxT) = residuals
  chunk = structure[0]
  delta_BxHxT = jnp.sum(dout_BxHxTxK * out_BxHxTxK, axis=-1)

  def step(dq_BxHxTxK, inputs):
    index, k_BxHxCxK, v_BxHxCxK = inputs
    logits_BxHxTxC, allowed = _logits(structure, masks, q_BxHxTxK, k_BxHxCxK, index * chunk)
    weights_BxHxTxC = jnp.exp(logits_BxHxTxC - max_BxHxT[..., None]) / sum_BxHxT[..., None]
    dv_BxHxCxK = jnp.einsum("bhtc,bhtk->bhck", weights_BxHxTxC, dout_BxHxTxK)
    dweights_BxHxTxC = jnp.einsum("bhtk,bhck->bhtc", dout_BxHxTxK, v_BxHxCxK)
    # Softmax backward; a masked logit is a constant, so it passes no gradient.
    dlogits_BxHxTxC = jnp.where(
        allowed, weights_BxHxTxC * (dweights_BxHxTxC - delta_BxHxT[..., None]), 0.0
    )
    dq_BxHxTxK = dq_BxHxTxK + jnp.einsum("bhtc,bhck->bhtk", dlogits_BxHxTxC, k_BxHxCxK)
    dk_BxHxCxK = jnp.einsum("bhtc,bhtk->bhck", dlogits_BxHxTxC, q_BxHxTxK)
    return dq_BxHxTxK, (dk_BxHxCxK, dv_BxHxCxK)

  k_chunks, v_chunks = _chunks(k_BxHxSxK, chunk), _chunks(v_BxHxSxK, chunk)
  dq_BxHxTxK, (dk_chunks, dv_chunks) = jax.lax.scan(
      step, jnp.zeros_like(q_BxHxTxK), (jnp.arange(k_chunks.shape[0]), k_chunks, v_chunks)
  )
  unchunk = lambda x: x.transpose(1, 2, 0, 3, 4).reshape(k_BxHxSxK.shape)
  no_grad = jax.tree.map(lambda _: None, masks)
  return dq_BxHxTxK, unchunk(dk_chunks), unchunk(dv_chunks), no_grad


_attention.defvjp(_attention_fwd, _attention_bwd)
