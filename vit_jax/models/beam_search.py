"""Beam search on the device: the token loop both pair designs share (docs/pairs.md).

The loop runs in one `lax.while_loop` inside the caller's jitted function; only the step differs
between designs (a seq2seq decoder attending to its encoded source, or a causal LM continuing
`source [SEP]`), given as `step(cache, tokens_Rx1) -> (logits_RxV, cache)` over R = B x K rows
(sentence-major, K beams each). At every step each sentence ranks its K x V candidates with
`top_k`, and the KV cache follows the surviving beams with one gather. A finished beam (it
wrote EOS) extends with EOS at no cost, so it stays among the candidates with its score; when
the loop stops (every sentence's beams finished or `max_new` tokens written) the finished beams
are ranked by `length_normalized`.
"""

import jax
import jax.numpy as jnp


def length_normalized(log_probs, lengths, alpha: float):
  """Beam scores divided by GNMT's length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016,
  as in flax's WMT example): alpha 0 ranks by log-probability alone, a larger alpha favours
  longer hypotheses. `lengths` count the EOS."""
  return log_probs / (((5.0 + lengths) / 6.0) ** alpha)


# Candidates are ranked in chunks of this many: see `top_k`.
TOP_K_CHUNK = 128


def top_k(candidates_BxC, k: int):
  """`lax.top_k` of each row, found among the k chunks with the largest maxima: those hold every
  one of the row's k best (each of the k best lies in a chunk whose maximum is at least it), so
  the result is exact, and XLA:CPU ranks the C / TOP_K_CHUNK chunk maxima and the
  k x TOP_K_CHUNK values those chunks hold instead of all C (4 beams over 8,192 tokens: 6x
  faster). Equal values may come in another
  order than `lax.top_k`'s. Rows too short to chunk take `lax.top_k` itself."""
  batch, width = candidates_BxC.shape
  chunks = width // TOP_K_CHUNK
  if width % TOP_K_CHUNK or chunks < 4 * k:
    return jax.lax.top_k(candidates_BxC, k)
  chunked_BxNxC = candidates_BxC.reshape(batch, chunks, TOP_K_CHUNK)
  _, best_chunks_BxK = jax.lax.top_k(chunked_BxNxC.max(axis=2), k)
  held_BxKxC = jnp.take_along_axis(chunked_BxNxC, best_chunks_BxK[..., None], axis=1)
  values_BxK, picked_BxK = jax.lax.top_k(held_BxKxC.reshape(batch, k * TOP_K_CHUNK), k)
  index_BxKxC = best_chunks_BxK[..., None] * TOP_K_CHUNK + jnp.arange(TOP_K_CHUNK)
  return values_BxK, jnp.take_along_axis(index_BxKxC.reshape(batch, -1), picked_BxK, axis=1)


def _follow(x_Rx, parent_BxK):
  """A cache array's rows (R = B x K) as the beams' parents had them: a gather within each
  sentence's K rows (alone, 3x faster on XLA:CPU than a gather of R rows out of all R; inside
  the beam loop, where XLA fuses it with the cache's other work, about 10%)."""
  if not x_Rx.ndim:
    return x_Rx
  x_BxKxF = x_Rx.reshape(*parent_BxK.shape, -1)
  picked_BxKxF = jnp.take_along_axis(
      x_BxKxF, parent_BxK[..., None], axis=1, mode="promise_in_bounds"
  )
  return picked_BxKxF.reshape(x_Rx.shape)


def search(step, cache, tokens_BxKxN, start_B, first_feed, *, max_new, eos_id, alpha):
  """The best beam's tokens (B, N) and new-token count (B,), EOS counted.

  tokens_BxKxN: each sentence's row, repeated per beam: its forced tokens (a start token, or a
  prompt) before start_B, where its new tokens go. `cache` has fed every row's tokens before
  position `first_feed` (<= min(start_B) - 1); step t feeds position t and fills t + 1, from the
  row while it is still in its forced part. eos_id < 0: no EOS (beams run to max_new).
  """
  batch, beams, total = tokens_BxKxN.shape
  rows, beam_K = batch * beams, jnp.arange(beams)
  filler = jnp.where(eos_id >= 0, eos_id, 0)  # what a finished beam appends

  def done(t, finished_BxK):  # before filling position t + 1
    return jnp.all(finished_BxK, axis=1) | (t + 1 - start_B >= max_new)

  def running(state):
    t, _, _, _, finished_BxK, _ = state
    return (t + 1 < total) & ~jnp.all(done(t, finished_BxK))

  def body(state):
    t, cache, tokens_BxKxN, scores_BxK, finished_BxK, length_BxK = state
    fed_BxK = jax.lax.dynamic_index_in_dim(tokens_BxKxN, t, axis=2, keepdims=False)
    logits_RxV, cache = step(cache, fed_BxK.reshape(rows, 1))
    logp_BxKxV = jax.nn.log_softmax(logits_RxV.astype(jnp.float32)).reshape(batch, beams, -1)
    vocab = logp_BxKxV.shape[-1]
    stay_V = jnp.where(jnp.arange(vocab) == filler, 0.0, -jnp.inf)
    logp_BxKxV = jnp.where(finished_BxK[..., None], stay_V, logp_BxKxV)
    candidates_BxKV = (scores_BxK[..., None] + logp_BxKxV).reshape(batch, beams * vocab)
    best_scores_BxK, best_BxK = top_k(candidates_BxKV, beams)
    # A sentence still in its forced part, or done, keeps its beams as they are.
    choosing_Bx1 = ((t + 1 >= start_B) & ~done(t, finished_BxK))[:, None]
    parent_BxK = jnp.where(choosing_Bx1, best_BxK // vocab, beam_K)
    token_BxK = best_BxK % vocab
    cache = jax.tree.map(lambda x: _follow(x, parent_BxK), cache)
    tokens_BxKxN = jnp.take_along_axis(tokens_BxKxN, parent_BxK[..., None], axis=1)
    forced_BxK = jax.lax.dynamic_index_in_dim(tokens_BxKxN, t + 1, axis=2, keepdims=False)
    written_BxK = jnp.where(choosing_Bx1, token_BxK, forced_BxK)
    tokens_BxKxN = jax.lax.dynamic_update_index_in_dim(tokens_BxKxN, written_BxK, t + 1, axis=2)
    was_finished_BxK = jnp.take_along_axis(finished_BxK, parent_BxK, axis=1)
    growing_BxK = choosing_Bx1 & ~was_finished_BxK
    length_BxK = jnp.take_along_axis(length_BxK, parent_BxK, axis=1) + growing_BxK
    finished_BxK = was_finished_BxK | (growing_BxK & (token_BxK == eos_id))
    scores_BxK = jnp.where(choosing_Bx1, best_scores_BxK, scores_BxK)
    return t + 1, cache, tokens_BxKxN, scores_BxK, finished_BxK, length_BxK

  # All beams start identical: only the first expands.
  scores_BxK = jnp.where(beam_K == 0, 0.0, -jnp.inf) * jnp.ones((batch, 1))
  state = (
      jnp.int32(first_feed),
      cache,
      tokens_BxKxN,
      scores_BxK,
      jnp.zeros((batch, beams), bool),
      jnp.zeros((batch, beams), jnp.int32),
  )
  _, _, tokens_BxKxN, scores_BxK, _, length_BxK = jax.lax.while_loop(running, body, state)
  best_B = jnp.argmax(length_normalized(scores_BxK, length_BxK, alpha), axis=1)
  best_tokens_BxN = jnp.take_along_axis(tokens_BxKxN, best_B[:, None, None], axis=1)[:, 0]
  return best_tokens_BxN, jnp.take_along_axis(length_BxK, best_B[:, None], axis=1)[:, 0]
