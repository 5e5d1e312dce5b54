"""Cross-entropy of integer targets over a vocabulary, in one read of the logits forward and one
elementwise pass backward.

A GPT-2 step's logits are (16, 1024, 50257) fp32, 3.3 GB: every pass over them costs about
0.8 ms on an H200, as much as a transformer block's matmuls. optax's
`softmax_cross_entropy_with_integer_labels` and `argmax` read them three times forward (max,
exp-sum, argmax), and the target's logit is a gather whose backward is a scatter into a zeroed
(B, L, V) array, then added to the softmax: XLA wrote three fp32 (B, L, V) arrays in the backward
pass. Here one variadic reduction per row keeps the running max and the index of its first
occurrence, the sum of exp(x - max) rescaled as the max grows (the online softmax), and the
target's logit (picked by comparing the vocabulary index with the target, no gather); the
backward is `(softmax - onehot) * g`, one elementwise kernel that XLA fuses with the cast of the
gradient to the head's dtype.
"""

import jax
import jax.numpy as jnp


def _combine(a, b):
  """Merges two partial row statistics (max, index of its first occurrence, sum of exp(x - max),
  target logit)."""
  max_a, index_a, sum_a, target_a = a
  max_b, index_b, sum_b, target_b = b
  row_max = jnp.maximum(max_a, max_b)
  # argmax's rule: the first index among equal maxima.
  index = jnp.where(
      max_a > max_b, index_a, jnp.where(max_b > max_a, index_b, jnp.minimum(index_a, index_b))
  )
  # exp(max - row_max), 1 for the larger side: two parts whose maxima are both -inf (logits
  # masked to -inf, which the reduction may combine before the init value) would give
  # exp(-inf + inf) = NaN.
  scale_a = jnp.where(max_a == row_max, 1.0, jnp.exp(max_a - row_max))
  scale_b = jnp.where(max_b == row_max, 1.0, jnp.exp(max_b - row_max))
  return row_max, index, sum_a * scale_a + sum_b * scale_b, target_a + target_b


def _row_statistics(logits_BxLxV, targets_BxL):
  """(max, argmax, sum of exp(x - max), target logit), each (B, L), in one pass over the logits."""
  logits_BxLxV = logits_BxLxV.astype(jnp.float32)
  vocab_BxLxV = jax.lax.broadcasted_iota(jnp.int32, logits_BxLxV.shape, 2)
  is_target_BxLxV = vocab_BxLxV == targets_BxL[..., None]
  lowest = jnp.finfo(jnp.float32).min  # exp(lowest - lowest) * 0 stays 0, unlike with -inf
  return jax.lax.reduce(
      (
          logits_BxLxV,
          vocab_BxLxV,
          jnp.ones_like(logits_BxLxV),
          jnp.where(is_target_BxLxV, logits_BxLxV, 0.0),
      ),
      (jnp.float32(lowest), jnp.int32(0), jnp.float32(0.0), jnp.float32(0.0)),
      _combine,
      (2,),
  )


@jax.custom_vjp
def nll_and_hits(logits_BxLxV, targets_BxL):
  """(-log softmax(logits)[target], argmax(logits) == target), each (B, L); differentiable in the
  logits. The negative log-likelihood is fp32 whatever the logits' dtype."""
  return _forward(logits_BxLxV, targets_BxL)[0]


def _forward(logits_BxLxV, targets_BxL):
  row_max_BxL, argmax_BxL, exp_sum_BxL, target_logit_BxL = _row_statistics(
      logits_BxLxV, targets_BxL
  )
  logsumexp_BxL = row_max_BxL + jnp.log(exp_sum_BxL)
  outputs = (logsumexp_BxL - target_logit_BxL, argmax_BxL == targets_BxL)
  return outputs, (logits_BxLxV, targets_BxL, logsumexp_BxL)


def _backward(saved, cotangents):
  logits_BxLxV, targets_BxL, logsumexp_BxL = saved
  grad_nll_BxL, _ = cotangents  # the hits are not differentiable
  vocab_BxLxV = jax.lax.broadcasted_iota(jnp.int32, logits_BxLxV.shape, 2)
  probs_BxLxV = jnp.exp(logits_BxLxV.astype(jnp.float32) - logsumexp_BxL[..., None])
  onehot_BxLxV = (vocab_BxLxV == targets_BxL[..., None]).astype(jnp.float32)
  grad_BxLxV = (probs_BxLxV - onehot_BxLxV) * grad_nll_BxL[..., None]
  return grad_BxLxV.astype(logits_BxLxV.dtype), None


nll_and_hits.defvjp(_forward, _backward)


def weighted_cross_entropy(logits_BxLxV, targets_BxL, weights_BxL):
  """(sum of weighted token losses, sum of weighted correct predictions), fp32 scalars."""
  nll_BxL, hits_BxL = nll_and_hits(logits_BxLxV, targets_BxL)
  weights_BxL = weights_BxL.astype(jnp.float32)
  return jnp.sum(nll_BxL * weights_BxL), jnp.sum(hits_BxL.astype(jnp.float32) * weights_BxL)
