"""Multi-head scaled dot-product attention with masks, cross-attention, a KV cache and RoPE.

Parameter names and shapes follow `flax.linen.MultiHeadDotProductAttention` (query/key/value
kernels D x H x Dh, out kernel H x Dh x D), which is also the layout of the original ViT and
big_vision checkpoints, so those load without reshaping.

Which kernel computes attention is chosen per platform at trace time (`implementation="auto"`,
see `choose_implementation`): Pallas splash attention on TPU (XLA's for short sequences at head
widths under 128, where the kernel's lane padding costs more memory than the probabilities),
cuDNN's fused attention on GPU in bf16/fp16, XLA's on CPU. The platform is the one the
computation is lowered for: the mesh in context (`jax.set_mesh(mesh)`, whose devices may be a TPU
slice's while this host is a CPU, as when compiling ahead of time), else JAX's default backend.
Splash runs per device in a shard_map over that mesh; on several devices without a mesh in
context, "auto" uses XLA's attention instead.

Shape letters: B batch, T query length, S key length, D model width, H heads, K head width.
"""

import contextlib
import functools
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import masks as masks_lib
from vit_jax.models import position

IMPLEMENTATIONS = ("auto", "xla", "cudnn", "splash", "einsum", "chunked")
CUDNN_DTYPES = (jnp.bfloat16, jnp.float16)  # cuDNN's fused attention takes no float32
CUDNN_MAX_HEAD_DIM = 128  # 256 on Hopper and later; 128 holds on every GPU cuDNN supports
# JAX's cuDNN training kernels refuse odd sequence lengths (with a mask; on an H200 with jax
# 0.11.2 also without one: ViT-B/16's 197 tokens raised NotImplementedError). An attention that
# only causality masks is padded to the next multiple (`cudnn_attention`); masked ones go to XLA.
CUDNN_LENGTH_MULTIPLE = 2


def target_platform() -> str:
  """The platform ("tpu", "gpu" or "cpu") the computation being traced will run on.

  The mesh in context (`jax.set_mesh`) names its devices' platform, which is how a TPU slice's
  step is lowered on a CPU host; without one, JAX's default backend.
  """
  device = getattr(jax.sharding.get_abstract_mesh(), "abstract_device", None)
  if device is not None:
    return device.platform
  return jax.default_backend()


def _mesh_known() -> bool:
  """Whether splash can be placed: one device, or a mesh in context to shard_map it over."""
  return not jax.sharding.get_abstract_mesh().empty or jax.device_count() == 1


def choose_implementation(
    requested: str,
    platform: str,
    dtype,
    head_dim: int,
    q_len: int,
    kv_len: int,
    spec: masks_lib.MaskSpec,
    dense_mask: bool,
) -> str:
  """The kernel that computes an attention: `requested` unless it is "auto" or cannot take it.

  "auto" is splash on TPU (XLA's where the kernel's lane-padded activations would take more
  memory: `splash_attention.keeps_more_than_xla`), cuDNN on GPU for bf16/fp16 and the head widths
  and lengths it takes (`cudnn_takes_lengths`; "cudnn" itself falls back to XLA for the lengths
  it cannot take exactly), XLA otherwise.
  A dense mask (the KV cache's, or a caller's array) goes to XLA instead of splash, which takes
  only a MaskSpec's parts; so do causal masks with more queries than keys.
  """
  if requested == "auto":
    if platform == "tpu":
      # pylint: disable-next=g-import-not-at-top
      from vit_jax.models import splash_attention  # TPU kernels: loaded only where chosen

      requested = "splash"
      if splash_attention.keeps_more_than_xla(q_len, kv_len, head_dim):
        requested = "xla"
    elif platform == "gpu" and jnp.dtype(dtype) in CUDNN_DTYPES:
      takes = head_dim % 8 == 0 and head_dim <= CUDNN_MAX_HEAD_DIM
      requested = "cudnn" if takes else "xla"
    else:
      requested = "xla"
  if requested == "cudnn" and not cudnn_takes_lengths(q_len, kv_len, spec, dense_mask):
    return "xla"
  if requested == "splash":
    # pylint: disable-next=g-import-not-at-top
    from vit_jax.models import splash_attention  # TPU kernels: loaded only where chosen

    if dense_mask or not splash_attention.supports(q_len, kv_len, spec):
      return "xla"
  return requested


def cudnn_takes_lengths(q_len: int, kv_len: int, spec: masks_lib.MaskSpec, dense_mask: bool):
  """Whether cuDNN can compute an attention of these lengths exactly: even lengths, or odd ones
  that MultiHeadAttention pads to even ones (`cudnn_attention`'s `kv_length`). Padding is exact
  only where the kernel's key lengths hide the padded keys and the padded queries are sliced off:
  no mask but causality, and causality only with as many queries as keys (cuDNN's causal mask is
  aligned top-left, s <= t, MaskSpec's bottom-right, s <= t + S - T: padding T != S to equal
  lengths would move the diagonal)."""
  if q_len % CUDNN_LENGTH_MULTIPLE == 0 and kv_len % CUDNN_LENGTH_MULTIPLE == 0:
    return True
  parts = (spec.q_segment_ids_BxT, spec.kv_segment_ids_BxS, spec.q_valid_BxT, spec.kv_valid_BxS)
  only_causal = not dense_mask and all(part is None for part in parts)
  return only_causal and (not spec.causal or q_len == kv_len)


def einsum_attention(q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, mask=None, *, dropout_fn=None):
  """Reference attention: softmax(Q K^T / sqrt(K)) V, also returning the weights (B, H, T, S)."""
  depth = q_BxTxHxK.shape[-1]
  logits_BxHxTxS = jnp.einsum("bthk,bshk->bhts", q_BxTxHxK, k_BxSxHxK) / jnp.sqrt(depth).astype(
      q_BxTxHxK.dtype
  )
  logits_BxHxTxS = logits_BxHxTxS.astype(jnp.float32)  # softmax in fp32 even under bf16
  if mask is not None:
    logits_BxHxTxS = jnp.where(mask, logits_BxHxTxS, jnp.finfo(jnp.float32).min)
  weights_BxHxTxS = jax.nn.softmax(logits_BxHxTxS, axis=-1)
  if dropout_fn is not None:
    weights_BxHxTxS = dropout_fn(weights_BxHxTxS)
  out_BxTxHxK = jnp.einsum("bhts,bshk->bthk", weights_BxHxTxS.astype(v_BxSxHxK.dtype), v_BxSxHxK)
  return out_BxTxHxK, weights_BxHxTxS


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _probabilities(logits_BxHxTxS, dtype):
  """softmax(logits) over S, computed in fp32 and returned in `dtype`.

  Its backward keeps only the returned probabilities: the same array the product with V keeps
  for its own backward, so under bf16 no fp32 (B, H, T, S) array outlives the forward pass (XLA
  otherwise keeps fp32 logits per layer, twice the bytes of the bf16 probabilities). The softmax
  gradient p * (g - sum(g * p)) is then computed in fp32 from bf16 p.
  """
  return jax.nn.softmax(logits_BxHxTxS, axis=-1).astype(dtype)


def _probabilities_forward(logits_BxHxTxS, dtype):
  probs_BxHxTxS = _probabilities(logits_BxHxTxS, dtype)
  return probs_BxHxTxS, probs_BxHxTxS


def _probabilities_backward(dtype, probs_BxHxTxS, grad_BxHxTxS):
  del dtype
  p = probs_BxHxTxS.astype(jnp.float32)
  g = grad_BxHxTxS.astype(jnp.float32)
  return (p * (g - jnp.sum(g * p, axis=-1, keepdims=True)),)


_probabilities.defvjp(_probabilities_forward, _probabilities_backward)


def xla_attention(q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, mask=None):
  """softmax(Q K^T / sqrt(K)) V as XLA ops, the softmax computed in fp32.

  Q is scaled before the product (exact for power-of-two head widths) and the logits leave it in
  Q's dtype (its products accumulate in fp32 either way), so under bf16 the (B, H, T, S) arrays
  written and read back, forward and backward, are bf16, as in big_vision's and flax's attention;
  the mask and softmax run in fp32 on them inside XLA's fusions. Scaling the fp32 logits instead
  made XLA write an fp32 (B, H, T, S) gradient in the backward pass (14% more bytes per ViT-B
  block on a v5p). Unlike big_vision's, the softmax's exponentials and sums are fp32.

  Keys and values may have fewer heads than the queries (grouped-query attention: G key-value
  heads, each serving R = H / G consecutive query heads): the products then read each key-value
  head once for its R query heads, never a copy of the keys and values repeated to H heads (in
  a decode step, that copy was the whole KV cache, every layer). A grouped decode step (one
  query) is `grouped_one_query_attention`.
  """
  bf16 = q_BxTxHxK.dtype == jnp.bfloat16
  batch, q_len, heads, head_dim = q_BxTxHxK.shape
  kv_len, kv_heads = k_BxSxHxK.shape[1], k_BxSxHxK.shape[2]
  if kv_heads != heads and q_len == 1:
    return grouped_one_query_attention(q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, mask)
  q_BxTxHxK = q_BxTxHxK * jnp.asarray(head_dim**-0.5, q_BxTxHxK.dtype)
  if kv_heads == heads:
    q, scores, weighted = q_BxTxHxK, "bthk,bshk->bhts", "bhts,bshk->bthk"
  else:  # (B, T, G, R, K): query head g * R + r reads key-value head g
    q = q_BxTxHxK.reshape(batch, q_len, kv_heads, heads // kv_heads, head_dim)
    scores, weighted = "btgrk,bsgk->bgrts", "bgrts,bsgk->btgrk"
  logits = jnp.einsum(
      scores,
      q,
      k_BxSxHxK,
      precision=jax.lax.DotAlgorithmPreset.BF16_BF16_F32 if bf16 else None,
      preferred_element_type=q_BxTxHxK.dtype,
  )
  logits_BxHxTxS = logits.reshape(batch, heads, q_len, kv_len).astype(jnp.float32)
  if mask is not None:
    logits_BxHxTxS = jnp.where(mask, logits_BxHxTxS, jnp.finfo(jnp.float32).min)
  probs_BxHxTxS = _probabilities(logits_BxHxTxS, jnp.dtype(v_BxSxHxK.dtype))
  out = jnp.einsum(weighted, probs_BxHxTxS.reshape(logits.shape), v_BxSxHxK)
  return out.reshape(batch, q_len, heads, head_dim)


def grouped_one_query_attention(q_Bx1xHxK, k_BxSxGxK, v_BxSxGxK, mask=None):
  """xla_attention of one query per row over G < H key-value heads (a decode step), written as
  products summed rather than as matrix products.

  As matrix products, each key-value head's R = H / G query heads are a (R, K) x (K, S) product
  per row and head: XLA:CPU runs those batched products R columns wide at a few percent of its
  matrix rate, and the grouped step was slower than full multi-head attention's, whose one-query
  products XLA rewrites into such sums itself (`benchmarks/decode_profile.py --attention`).
  Summed, each product is one fusion that reads the cache once for all R query heads. The sums
  are fp32 whatever the cache's dtype (the converts live inside the fusions: no fp32 copy of the
  cache is written).
  """
  batch, _, heads, head_dim = q_Bx1xHxK.shape
  kv_len, kv_heads = k_BxSxGxK.shape[1], k_BxSxGxK.shape[2]
  f32 = jnp.float32
  q_BxGxRxK = q_Bx1xHxK.reshape(batch, kv_heads, heads // kv_heads, head_dim).astype(f32)
  q_BxGxRxK = q_BxGxRxK * head_dim**-0.5
  k_BxGx1xSxK = jnp.swapaxes(k_BxSxGxK, 1, 2)[:, :, None].astype(f32)
  logits_BxGxRxS = jnp.sum(q_BxGxRxK[:, :, :, None, :] * k_BxGx1xSxK, axis=-1)
  logits_BxHx1xS = logits_BxGxRxS.reshape(batch, heads, 1, kv_len)
  if mask is not None:
    logits_BxHx1xS = jnp.where(mask, logits_BxHx1xS, jnp.finfo(f32).min)
  probs_BxHx1xS = jax.nn.softmax(logits_BxHx1xS, axis=-1)
  probs_BxGxRxSx1 = probs_BxHx1xS.reshape(batch, kv_heads, heads // kv_heads, kv_len, 1)
  v_BxGx1xSxK = jnp.swapaxes(v_BxSxGxK, 1, 2)[:, :, None].astype(f32)
  out_BxGxRxK = jnp.sum(probs_BxGxRxSx1 * v_BxGx1xSxK, axis=-2)
  return out_BxGxRxK.reshape(batch, 1, heads, head_dim).astype(v_BxSxGxK.dtype)


def cudnn_attention(
    q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, spec: masks_lib.MaskSpec, mask=None, kv_length=None
):
  """cuDNN's fused attention (jax.nn.dot_product_attention's), with the mask by its parts.

  cuDNN skips the masked triangle given `is_causal` (its causal is s <= t, MaskSpec's when
  T == S); segments and padding have no flag that fits any pattern, so they go in as a dense
  mask, which cuDNN adds as a bias inside the fused kernel (whose gradient it is not asked for:
  `cudnn_mask_gradient_skipped`). `kv_length`: the keys from it on are padding, hidden by the
  kernel's own key lengths (no bias); MultiHeadAttention pads lengths cuDNN refuses so (see
  CUDNN_LENGTH_MULTIPLE), and then passes no other mask.
  """
  batch, q_len, kv_len = q_BxTxHxK.shape[0], q_BxTxHxK.shape[1], k_BxSxHxK.shape[1]
  is_causal = spec.causal and q_len == kv_len
  rest = spec.replace(causal=spec.causal and not is_causal)
  mask = masks_lib.combine(mask, rest.dense(batch, q_len, kv_len))
  lengths = None
  if kv_length is not None:
    if mask is not None:
      raise ValueError("cudnn_attention: kv_length is for inputs masked by causality alone")
    lengths = jnp.full((batch,), kv_length, jnp.int32)
  with cudnn_mask_gradient_skipped():
    return jax.nn.dot_product_attention(
        q_BxTxHxK,
        k_BxSxHxK,
        v_BxSxHxK,
        mask=mask,
        is_causal=is_causal,
        key_value_seq_lengths=lengths,
        implementation="cudnn",
    )


@contextlib.contextmanager
def cudnn_mask_gradient_skipped():
  """While cuDNN's attention is traced with a boolean mask and no bias: no gradient of the bias
  JAX makes of the mask is asked of cuDNN's backward kernel.

  JAX 0.8.0 to 0.11.0 ask for the gradient of every bias (their `should_export_dbias` returns
  True), a boolean mask's too, which nothing can differentiate: each backward call then computes
  and writes a (B, 1, T, S) array nobody reads (GPT-2 124M: 12 calls a step, 32 MiB each, the
  packing mask's). JAX skips it for boolean masks from jax-ml/jax PR 39512 (after 0.11.0); this
  does the same on the releases before, and changes nothing on those after. Measured by
  `benchmarks/gpu_choices.py --program` ("bias gradient requested"; benchmarks/README.md). Only
  for calls with no `bias` of their own: JAX reads the function when the call is traced.
  """
  # pylint: disable-next=g-import-not-at-top  (jax.nn imports it on every platform)
  from jax._src.cudnn import fused_attention_stablehlo as jax_cudnn

  asks = getattr(jax_cudnn, "should_export_dbias", None)
  if asks is None:  # a JAX without the function: nothing to change
    yield
    return
  jax_cudnn.should_export_dbias = lambda *shapes: False
  try:
    yield
  finally:
    jax_cudnn.should_export_dbias = asks


class MultiHeadAttention(nn.Module):
  """Multi-head attention. Self-attention when `inputs_kv` is None, cross-attention otherwise.

  Attributes:
    num_heads: number of heads H; the projection width must be divisible by it.
    num_kv_heads: key-value heads (None: num_heads); fewer is grouped-query attention, each
      serving num_heads / num_kv_heads query heads; the KV cache keeps only these.
    qkv_features: width of the Q/K/V projections (default: input width).
    head_dim: width K of each head (None: qkv_features / num_heads); set apart from the width,
      the query projection is D -> H x K and the output H x K -> D (Qwen3: 1024 wide, 16 heads
      of 128).
    out_features: output width (default: input width).
    dropout_rate: dropout on the attention weights (forces the einsum path in training).
    implementation: "auto" (by platform: `choose_implementation`), "xla" (`xla_attention`),
      "cudnn" (jax.nn.dot_product_attention's), "splash" (the Pallas TPU kernel; interpreted,
      slowly, on other platforms), "einsum" (reference) or "chunked" (online softmax over key
      chunks, memory linear in length).
    rope: rotate queries and keys by their positions (RoPE) instead of adding position embeddings.
    qkv_bias: biases of the query/key/value projections (None: use_bias, which the output's has).
    qk_norm: RMSNorm over each head's queries and keys before RoPE (Qwen3), epsilon norm_eps.
    decode: keep a KV cache in the "cache" collection and attend over it (incremental decoding);
      keys and values are stored head-major, (B, H, max_len, K).
    static_kv: cross-attention in a decoding loop, whose keys and values are the same at every
      step: they are laid out head-major behind a barrier, as the cache is, so that XLA hoists
      them out of the loop with their projections (it would otherwise transpose all of them at
      every step, which costs a seq2seq beam search as much as the rest of its decoder).

  The call's `mask` is a dense boolean (B, 1, T, S) array or a `masks.MaskSpec`. A MaskSpec
  reaches the splash and chunked kernels as its parts (O(T + S) memory) and cuDNN's as its causal
  flag (the rest as a dense mask); the xla and einsum kernels get a dense mask built here.
  """

  num_heads: int
  num_kv_heads: Optional[int] = None
  qkv_features: Optional[int] = None
  head_dim: Optional[int] = None
  out_features: Optional[int] = None
  dropout_rate: float = 0.0
  use_bias: bool = True
  qkv_bias: Optional[bool] = None
  qk_norm: bool = False
  norm_eps: float = 1e-6
  implementation: str = "auto"
  rope: bool = False
  rope_base: float = 10_000.0
  rope_scaling: Optional[position.RopeScaling] = None
  decode: bool = False
  static_kv: bool = False
  dtype: jnp.dtype = jnp.float32
  param_dtype: jnp.dtype = jnp.float32
  kernel_init: nn.initializers.Initializer = nn.initializers.xavier_uniform()
  out_kernel_init: Optional[nn.initializers.Initializer] = None  # None: kernel_init

  @nn.compact
  def __call__(
      self,
      inputs_q_BxTxD,
      inputs_kv_BxSxD=None,
      mask=None,
      *,
      deterministic: bool = True,
      return_weights: bool = False,
      positions_q_BxT=None,
      positions_kv_BxS=None,
  ):
    if self.implementation not in IMPLEMENTATIONS:
      raise errors.ConfigError(
          f"Unknown attention implementation {self.implementation!r}; "
          f"choose one of {IMPLEMENTATIONS}."
      )
    self_attention = inputs_kv_BxSxD is None
    if self_attention:
      inputs_kv_BxSxD = inputs_q_BxTxD
    head_dim = self.head_dim
    if head_dim is None:
      features = self.qkv_features or inputs_q_BxTxD.shape[-1]
      if features % self.num_heads:
        raise errors.ConfigError(
            f"Attention width {features} is not divisible by num_heads={self.num_heads}; "
            "set head_dim to give the heads a width of their own."
        )
      head_dim = features // self.num_heads
    kv_heads = self.num_kv_heads or self.num_heads
    if self.num_heads % kv_heads:
      raise errors.ConfigError(
          f"num_heads={self.num_heads} is not a multiple of num_kv_heads={kv_heads}."
      )

    def projection(name, heads):
      return nn.DenseGeneral(
          (heads, head_dim),
          use_bias=self.use_bias if self.qkv_bias is None else self.qkv_bias,
          dtype=self.dtype,
          param_dtype=self.param_dtype,
          kernel_init=self.kernel_init,
          name=name,
      )

    spec = masks_lib.MaskSpec()
    if isinstance(mask, masks_lib.MaskSpec):
      if self.decode:
        raise ValueError(
            "With decode=True the KV cache builds the causal mask over its slots; pass a dense "
            "(B, 1, T, max_len) mask or None, not a MaskSpec."
        )
      spec, mask = mask, None
    use_dropout = self.dropout_rate > 0.0 and not deterministic
    batch, q_len = inputs_q_BxTxD.shape[:2]
    real_kv_len = inputs_kv_BxSxD.shape[1]
    # cuDNN takes even lengths only: an attention it would run, masked by causality alone (ViT's
    # 197 tokens), gets its inputs padded here, before the projections, where XLA fuses the pad
    # into whatever made the inputs (and the slice of the output into what reads it); the
    # padded keys are hidden by the kernel's key lengths, the padded queries sliced off.
    pad_q = pad_kv = 0
    if not (self.decode or return_weights or use_dropout):
      early = choose_implementation(
          self.implementation,
          target_platform(),
          self.dtype,
          head_dim,
          q_len,
          real_kv_len,
          spec,
          dense_mask=mask is not None,
      )
      if early == "cudnn":
        pad_q, pad_kv = (-q_len) % CUDNN_LENGTH_MULTIPLE, (-real_kv_len) % CUDNN_LENGTH_MULTIPLE
    if pad_q or pad_kv:
      pad = lambda x, extra: jnp.pad(x, ((0, 0), (0, extra)) + ((0, 0),) * (x.ndim - 2))
      inputs_q_BxTxD = pad(inputs_q_BxTxD, pad_q)
      inputs_kv_BxSxD = inputs_q_BxTxD if self_attention else pad(inputs_kv_BxSxD, pad_kv)
      if positions_q_BxT is not None:
        positions_q_BxT = pad(positions_q_BxT, pad_q)
      if positions_kv_BxS is not None:
        positions_kv_BxS = pad(positions_kv_BxS, pad_kv)

    q_BxTxHxK = projection("query", self.num_heads)(inputs_q_BxTxD)
    k_BxSxHxK = projection("key", kv_heads)(inputs_kv_BxSxD)  # H here is kv_heads until repeated
    v_BxSxHxK = projection("value", kv_heads)(inputs_kv_BxSxD)
    if self.qk_norm:
      norm = functools.partial(
          nn.RMSNorm, epsilon=self.norm_eps, dtype=self.dtype, param_dtype=self.param_dtype
      )
      q_BxTxHxK = norm(name="query_norm")(q_BxTxHxK)
      k_BxSxHxK = norm(name="key_norm")(k_BxSxHxK)
    q_len = inputs_q_BxTxD.shape[1]
    if self.static_kv and not self_attention:
      heads_first = lambda x_BxSxHxK: jnp.swapaxes(x_BxSxHxK, 1, 2)
      k_BxHxSxK, v_BxHxSxK = jax.lax.optimization_barrier(
          (heads_first(k_BxSxHxK), heads_first(v_BxSxHxK))
      )
      k_BxSxHxK, v_BxSxHxK = heads_first(k_BxHxSxK), heads_first(v_BxHxSxK)
    if self.decode:
      if not self_attention:
        raise ValueError("The KV cache is for self-attention; cross-attention keys do not grow.")
      k_BxSxHxK, v_BxSxHxK, mask, positions_q_BxT = self._update_cache(
          q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, mask, positions_q_BxT
      )
      positions_kv_BxS = None  # cached keys were rotated when they were written
    elif self.rope:
      if positions_q_BxT is None:
        positions_q_BxT = position.arange_positions(batch, q_len)
      if positions_kv_BxS is None:
        positions_kv_BxS = (
            positions_q_BxT if self_attention else position.arange_positions(*k_BxSxHxK.shape[:2])
        )
    if self.rope:
      rope = functools.partial(position.apply_rope, base=self.rope_base, scaling=self.rope_scaling)
      q_BxTxHxK = rope(q_BxTxHxK, positions_q_BxT)
      if positions_kv_BxS is not None:
        k_BxSxHxK = rope(k_BxSxHxK, positions_kv_BxS)

    kv_len = k_BxSxHxK.shape[1]
    masks_lib.check_mask_shape(spec, batch, self.num_heads, q_len, kv_len)
    if mask is not None:
      masks_lib.check_mask_shape(mask, batch, self.num_heads, q_len, kv_len)
      mask = mask.astype(bool)
    impl = "einsum"  # the only kernel that drops out or returns weights
    if not (return_weights or use_dropout):
      platform = target_platform()
      impl = choose_implementation(
          self.implementation,
          platform,
          q_BxTxHxK.dtype,
          head_dim,
          q_len,
          kv_len,
          spec,
          dense_mask=mask is not None,
      )
      if impl == "splash" and self.implementation == "auto" and not _mesh_known():
        impl = "xla"  # XLA cannot partition the kernel over devices it was not told about
    # cuDNN's kernel and xla_attention take grouped heads themselves.
    if kv_heads != self.num_heads and impl not in ("cudnn", "xla"):
      k_BxSxHxK, v_BxSxHxK = (
          jnp.repeat(x, self.num_heads // kv_heads, axis=2) for x in (k_BxSxHxK, v_BxSxHxK)
      )

    weights = None
    if impl == "splash":
      # pylint: disable-next=g-import-not-at-top
      from vit_jax.models import splash_attention

      out_BxTxHxK = splash_attention.splash_attention(
          q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, spec, interpret=platform != "tpu"
      )
    elif impl == "chunked":  # memory linear in length (chunked_attention.py)
      # pylint: disable-next=g-import-not-at-top
      from vit_jax.models import chunked_attention  # only for configs that choose it

      out_BxTxHxK = chunked_attention.chunked_attention(
          q_BxTxHxK,
          k_BxSxHxK,
          v_BxSxHxK,
          mask,
          causal=spec.causal,
          q_segment_ids_BxT=spec.q_segment_ids_BxT,
          kv_segment_ids_BxS=spec.kv_segment_ids_BxS,
          q_valid_BxT=spec.q_valid_BxT,
          kv_valid_BxS=spec.kv_valid_BxS,
      )
    elif impl == "cudnn":
      out_BxTxHxK = cudnn_attention(
          q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, spec, mask, kv_length=real_kv_len if pad_kv else None
      )
    else:  # einsum or xla take one dense (B, 1, T, S) mask: build it here
      mask = masks_lib.combine(mask, spec.dense(batch, q_len, kv_len))
      if impl == "einsum":
        dropout_fn = None
        if use_dropout:
          dropout_fn = lambda w: nn.Dropout(self.dropout_rate)(w, deterministic=False)
        out_BxTxHxK, weights = einsum_attention(
            q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, mask, dropout_fn=dropout_fn
        )
      else:
        out_BxTxHxK = xla_attention(q_BxTxHxK, k_BxSxHxK, v_BxSxHxK, mask)

    out_BxTxD = nn.DenseGeneral(
        self.out_features or inputs_q_BxTxD.shape[-1],
        axis=(-2, -1),
        use_bias=self.use_bias,
        dtype=self.dtype,
        param_dtype=self.param_dtype,
        kernel_init=self.out_kernel_init or self.kernel_init,
        name="out",
    )(out_BxTxHxK)
    if pad_q:
      out_BxTxD = out_BxTxD[:, : q_len - pad_q]
    if return_weights:
      return out_BxTxD, weights
    return out_BxTxD

  def _update_cache(self, q_BxTxHxK, k_BxTxHxK, v_BxTxHxK, mask, positions_q_BxT):
    """Writes the new keys/values at the cache index and returns the whole cache to attend over.

    The first call (during `init`) sizes the cache from the input: pass a (B, max_len, D) dummy.
    """
    initialized = self.has_variable("cache", "cached_key")
    batch, new_len, heads, depth = k_BxTxHxK.shape
    # Stored head-major, (B, H, S, K): the batch dims of the attention products come first, so
    # XLA reads the cache in place instead of transposing all of it at every step.
    shape_BxHxSxK = (batch, heads, new_len, depth)
    cached_k = self.variable("cache", "cached_key", jnp.zeros, shape_BxHxSxK, k_BxTxHxK.dtype)
    cached_v = self.variable("cache", "cached_value", jnp.zeros, shape_BxHxSxK, v_BxTxHxK.dtype)
    cache_index = self.variable("cache", "cache_index", lambda: jnp.array(0, jnp.int32))
    start = cache_index.value if initialized else jnp.array(0, jnp.int32)
    if positions_q_BxT is None:
      positions_q_BxT = position.arange_positions(batch, new_len, start)
    if self.rope:  # store keys already rotated, so each is rotated once
      k_BxTxHxK = position.apply_rope(k_BxTxHxK, positions_q_BxT, self.rope_base, self.rope_scaling)
    if not initialized:  # init call: plain causal attention over the dummy input
      causal = masks_lib.causal_mask(new_len, batch)
      return k_BxTxHxK, v_BxTxHxK, masks_lib.combine(causal, mask), positions_q_BxT

    max_len = cached_k.value.shape[2]
    zero = jnp.array(0, start.dtype)
    for cached, new_BxTxHxK in ((cached_k, k_BxTxHxK), (cached_v, v_BxTxHxK)):
      new_BxHxTxK = jnp.swapaxes(new_BxTxHxK, 1, 2).astype(cached.value.dtype)
      cached.value = jax.lax.dynamic_update_slice(
          cached.value, new_BxHxTxK, (zero, zero, start, zero)
      )
    cache_index.value = start + new_len
    # Query t (at absolute slot start + t) sees cache slots <= start + t.
    slots_S = jnp.arange(max_len)
    query_slots_T = start + jnp.arange(new_len)
    visible_TxS = slots_S[None, :] <= query_slots_T[:, None]
    visible = jnp.broadcast_to(visible_TxS, (batch, 1, new_len, max_len))
    k_BxSxHxK, v_BxSxHxK = (jnp.swapaxes(c.value, 1, 2) for c in (cached_k, cached_v))
    return k_BxSxHxK, v_BxSxHxK, masks_lib.combine(visible, mask), positions_q_BxT
