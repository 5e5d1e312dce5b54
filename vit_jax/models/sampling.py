"""Text generation: GPT sampling (greedy, temperature, top-k, top-p), and greedy or beam search
for both designs trained on pairs (a seq2seq model, a GPT continuing `source [SEP]`).

The KV cache makes each new token cost one position of compute. `generate` prefills the prompts'
common part in one call, then runs the token loop on device (`lax.while_loop`, stopping at EOS
there) and syncs with the host once; its compiled decoder is kept per shape for the process.
The LM head reads a (D, V) copy of the embedding made once per call (see `gpt.Gpt`) and the KV
cache is stored head-major (`attention.MultiHeadAttention`), so no step copies either.
Prompts of different lengths are decoded in lockstep without padding: at step t every row feeds
its own token t (from its prompt while it lasts, then its last sample), so positions are shared
and no mask is needed. Beam search (`seq2seq_decode`, `beam_generate`) runs the same way, one
jitted program per model and shape (encoder or prefill, then beam_search.py's loop), one host
sync per call.
"""

import functools
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vit_jax import errors
from vit_jax.models import beam_search
from vit_jax.models import build_model
from vit_jax.models import gpt


def greedy_tokens(logits_BxV):
  """jnp.argmax over the vocabulary (the first index among equal maxima, or the first NaN's), as
  two plain reductions: XLA:CPU runs argmax's (value, index) reduction unvectorized, about five
  times these two's time on (8, 8,192) logits (2-3% of a batch-8 Llama decode step's op time,
  `benchmarks.op_profile llama_decode_b8`)."""
  max_Bx1 = jnp.max(logits_BxV, axis=-1, keepdims=True)
  hits_BxV = (logits_BxV == max_Bx1) | jnp.isnan(logits_BxV)
  vocab = logits_BxV.shape[-1]
  return jnp.min(jnp.where(hits_BxV, jnp.arange(vocab, dtype=jnp.int32), vocab), axis=-1)


def sample_logits(logits_BxV, rng, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
  """Next tokens (B,) from logits: greedy when temperature is 0, else filtered sampling."""
  if temperature == 0.0:
    return greedy_tokens(logits_BxV)
  logits_BxV = logits_BxV / temperature
  if top_k:
    kth_Bx1 = jax.lax.top_k(logits_BxV, top_k)[0][:, -1:]
    logits_BxV = jnp.where(logits_BxV < kth_Bx1, -jnp.inf, logits_BxV)
  if top_p < 1.0:  # keep the smallest set of tokens whose probability reaches top_p
    sorted_BxV = jnp.sort(logits_BxV, axis=-1)[:, ::-1]
    cumulative_BxV = jnp.cumsum(jax.nn.softmax(sorted_BxV, axis=-1), axis=-1)
    cutoff_index_B = jnp.sum(cumulative_BxV < top_p, axis=-1)
    cutoff_Bx1 = jnp.take_along_axis(sorted_BxV, cutoff_index_B[:, None], axis=-1)
    logits_BxV = jnp.where(logits_BxV < cutoff_Bx1, -jnp.inf, logits_BxV)
  return jax.random.categorical(rng, logits_BxV, axis=-1)


def fit_prompts(prompts: Sequence[Sequence[int]], max_new_tokens: int, max_len: int):
  """Keeps the last tokens of prompts that would not fit the context, saying so."""
  room = max_len - max_new_tokens
  if room < 1:
    raise errors.ConfigError(
        f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the "
        f"model's context of {max_len} tokens; ask for fewer new tokens."
    )
  if any(len(p) == 0 for p in prompts):
    raise errors.ConfigError("Empty prompt: give at least one token (or a BOS token).")
  fitted = []
  for i, prompt in enumerate(prompts):
    if len(prompt) > room:
      print(
          f"Prompt {i} has {len(prompt)} tokens; with {max_new_tokens} new tokens the context "
          f"of {max_len} holds only {room}: keeping its last {room} tokens.",
          flush=True,
      )
      prompt = prompt[-room:]
    fitted.append(list(prompt))
  return fitted


def generate(
    model_config: dict,
    params,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_id: Optional[int] = None,
    seed: int = 0,
    use_cache: bool = True,
    length: Optional[int] = None,
):
  """Continues each prompt of token ids; returns the new tokens per prompt (stopping at EOS).

  `length`: the tokens each row holds, prompt and new (None: the longest prompt's and
  max_new_tokens). Given, the decoder is compiled for it whatever the prompts, with the prefill
  cut to a power of two: calls on batches of other prompts (a file's lines, an evaluator's
  sources) reuse a few compiled decoders instead of compiling one each.
  """
  tokens_BxN, lengths_B, prefill = _prompt_rows(model_config, prompts, max_new_tokens, length, 0)
  if not use_cache:
    sample = functools.partial(sample_logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return _generate_uncached(
        model_config, params, tokens_BxN, lengths_B, max_new_tokens, sample, eos_id, seed
    )
  decode = _compiled_decoder(model_config, tokens_BxN.shape, prefill, temperature, top_k, top_p)
  out_BxN, count_B = decode(
      params,
      tokens_BxN,
      lengths_B,
      np.int32(max_new_tokens),
      np.int32(-1 if eos_id is None else eos_id),
      jax.random.PRNGKey(seed),
  )
  out_BxN, count_B = np.asarray(out_BxN), np.asarray(count_B)  # the one host sync
  return [out_BxN[i, n : n + c].tolist() for i, (n, c) in enumerate(zip(lengths_B, count_B))]


def _prompt_rows(model_config, prompts, max_new_tokens, length, left_to_loop):
  """(tokens (B, N), prompt lengths (B,), prefill): the fitted prompts in rows of N tokens, and
  how many of their first tokens one call feeds before the loop, which feeds each row's last
  `left_to_loop` prompt tokens or more. With `length` given, N is it and the prefill a power of
  two (or 0), so that batches of other prompts share a few compiled decoders."""
  prompts = fit_prompts(prompts, max_new_tokens, model_config["max_len"])
  lengths_B = np.array([len(p) for p in prompts], np.int32)
  total = int(lengths_B.max()) + max_new_tokens
  prefill = int(lengths_B.min()) - left_to_loop
  if length is not None:
    if length < total:
      raise ValueError(f"length={length} is shorter than the longest prompt and max_new_tokens")
    total, prefill = length, (1 << (prefill.bit_length() - 1)) if prefill else 0
  tokens_BxN = np.zeros((len(prompts), total), np.int32)
  for i, p in enumerate(prompts):
    tokens_BxN[i, : len(p)] = p
  return tokens_BxN, lengths_B, prefill


def _plain(model_config) -> dict:
  return dict(model_config.to_dict() if hasattr(model_config, "to_dict") else model_config)


# One jitted decoder per (model config, batch and lengths, sampling settings), kept for the
# process: repeated `generate` calls with the same shapes skip tracing and compiling.
_DECODERS = {}


def _compiled_decoder(model_config, shape, prefill_len, temperature, top_k, top_p):
  config = _plain(model_config)
  key = (repr(sorted(config.items())), shape, prefill_len, temperature, top_k, top_p)
  if key not in _DECODERS:
    model = build_model(config, decode=True)
    sample = functools.partial(sample_logits, temperature=temperature, top_k=top_k, top_p=top_p)
    _DECODERS[key] = jax.jit(functools.partial(_decode, model, sample, prefill_len))
  return _DECODERS[key]


def _decode(model, sample, prefill_len, params, tokens_BxN, lengths_B, max_new, eos_id, rng):
  """Prefills the common prompt part in one call, then loops on device until all rows stop.

  Step t holds the logits of position t and fills position t + 1: from the row's prompt while it
  lasts (prompts of different lengths run in lockstep at shared positions, so no mask is needed),
  then with a sample. Returns the tokens (B, N) and how many of each row's are new.
  """
  batch, total = tokens_BxN.shape
  cache = _empty_cache(lambda: model.init(jax.random.PRNGKey(0), tokens_BxN))
  feed = _feeder(model, params)

  def running(state):
    t, _, _, _, done_B, count_B, _ = state
    return (t < total - 1) & ~jnp.all(done_B | (count_B >= max_new))

  def step(state):
    t, cache, tokens_BxN, logits_BxV, done_B, count_B, rng = state
    rng, key = jax.random.split(rng)
    next_B = sample(logits_BxV, key).astype(jnp.int32)
    in_prompt_B = t + 1 < lengths_B
    active_B = ~in_prompt_B & ~done_B & (count_B < max_new)
    prompt_B = jax.lax.dynamic_index_in_dim(tokens_BxN, t + 1, axis=1, keepdims=False)
    token_B = jnp.where(in_prompt_B, prompt_B, jnp.where(active_B, next_B, 0))
    tokens_BxN = jax.lax.dynamic_update_index_in_dim(tokens_BxN, token_B, t + 1, axis=1)
    count_B = count_B + active_B
    done_B = done_B | (active_B & (next_B == eos_id))
    logits_BxV, cache = feed(cache, token_B[:, None])
    return t + 1, cache, tokens_BxN, logits_BxV, done_B, count_B, rng

  logits_BxV, cache = feed(cache, tokens_BxN[:, :prefill_len])
  state = (
      jnp.int32(prefill_len - 1),
      cache,
      tokens_BxN,
      logits_BxV,
      jnp.zeros(batch, bool),
      jnp.zeros(batch, jnp.int32),
      rng,
  )
  state = jax.lax.while_loop(running, step, state)
  return state[2], state[5]


def _empty_cache(init):
  """Zeros shaped as the cache that `init()` (a decode-mode model's init, sized by its input)
  makes; nothing of init runs."""
  cache_shapes = jax.eval_shape(init)["cache"]
  return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), cache_shapes)


def _feeder(model, params):
  """feed(cache, tokens (B, T)) -> (the last token's logits (B, V), the new cache)."""
  # Transposed once here, outside the loop (see gpt.Gpt.__call__).
  embedding_DxV = jnp.transpose(gpt.head_table(params))

  def feed(cache, tokens_BxT):
    logits_BxTxV, state = model.apply(
        {"params": params, "cache": cache},
        tokens_BxT,
        embedding_DxV=embedding_DxV,
        mutable=["cache"],
    )
    return logits_BxTxV[:, -1], state["cache"]

  return feed


def _generate_uncached(
    model_config, params, tokens_BxN, lengths_B, max_new_tokens, sample, eos_id, seed
):
  """Reference path: recomputes the whole sequence for every token, sampling on the host side.

  `sample(logits_BxV, key)` draws the next tokens (B,), as in the cached path's loop."""
  model = build_model(model_config)
  full_fn = jax.jit(lambda toks: model.apply({"params": params}, toks))
  sample = jax.jit(sample)
  batch, total = tokens_BxN.shape
  rng = jax.random.PRNGKey(seed)
  done_B = np.zeros(batch, bool)
  new_tokens = [[] for _ in range(batch)]
  for t in range(int(lengths_B.min()) - 1, total - 1):
    logits_BxV = full_fn(jnp.asarray(tokens_BxN))[:, t]
    rng, key = jax.random.split(rng)
    next_B = np.asarray(sample(logits_BxV, key))
    for i in range(batch):
      if t + 1 >= lengths_B[i] and not done_B[i] and len(new_tokens[i]) < max_new_tokens:
        tokens_BxN[i, t + 1] = next_B[i]
        new_tokens[i].append(int(next_B[i]))
        done_B[i] = eos_id is not None and next_B[i] == eos_id
    if all(done_B[i] or len(new_tokens[i]) >= max_new_tokens for i in range(batch)):
      break
  return new_tokens


def _decoder_step(decoder, params, cache, tokens_Bx1, encoded_BxSxD, input_mask_BxS):
  """(logits (B, 1, V), state with the new cache) of one token through the decoder."""
  return decoder.apply(
      {"params": params, "cache": cache},
      tokens_Bx1,
      encoded_BxSxD,
      input_mask_BxS,
      method=decoder.decode_logits,
      mutable=["cache"],
  )


def seq2seq_decode_step(decoder, params, encoded_BxSxD, input_mask_BxS):
  """The decoder's one-token step, jitted: (cache, tokens (B, 1)) -> (logits (B, 1, V), state
  with the new cache). The cache index is part of the (traced) cache, so one program serves
  every step."""
  return jax.jit(
      lambda cache, tokens_Bx1: _decoder_step(
          decoder, params, cache, tokens_Bx1, encoded_BxSxD, input_mask_BxS
      )
  )


def beam_generate(
    model_config: dict,
    params,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    beam_size: int,
    eos_id: Optional[int],
    length_penalty: float = 0.6,
    length: Optional[int] = None,
):
  """Continues each prompt by beam search on the device (see `beam_search`); returns the best
  beam's new tokens per prompt (its EOS kept, as `generate`'s), finished beams ranked by GNMT's
  length penalty with alpha `length_penalty`. `length` as `generate`'s."""
  tokens_BxN, lengths_B, prefill = _prompt_rows(model_config, prompts, max_new_tokens, length, 1)
  search = _compiled_beam_search(model_config, tokens_BxN.shape, prefill, beam_size)
  best_BxN, count_B = search(
      params,
      tokens_BxN,
      lengths_B,
      np.int32(max_new_tokens),
      np.int32(-1 if eos_id is None else eos_id),
      np.float32(length_penalty),
  )
  return _new_tokens(best_BxN, lengths_B, count_B)


# One jitted beam search per (model config, batch and lengths, beams), kept as `_DECODERS` are.
_BEAM_SEARCHES = {}


def _compiled_beam_search(model_config, shape, prefill_len, beams):
  config = _plain(model_config)
  key = (repr(sorted(config.items())), shape, prefill_len, beams)
  if key not in _BEAM_SEARCHES:
    model = build_model(config, decode=True)

    def search(params, tokens_BxN, lengths_B, max_new, eos_id, alpha):
      cache = _empty_cache(lambda: model.init(jax.random.PRNGKey(0), tokens_BxN))
      feed = _feeder(model, params)
      if prefill_len:
        _, cache = feed(cache, tokens_BxN[:, :prefill_len])
      # Every (prompt, beam) is a row of the decoder batch.
      cache = jax.tree.map(lambda x: jnp.repeat(x, beams, axis=0) if x.ndim else x, cache)
      tokens_BxKxN = jnp.repeat(tokens_BxN[:, None], beams, axis=1)
      return beam_search.search(
          feed,
          cache,
          tokens_BxKxN,
          lengths_B,
          prefill_len,
          max_new=max_new,
          eos_id=eos_id,
          alpha=alpha,
      )

    _BEAM_SEARCHES[key] = jax.jit(search)
  return _BEAM_SEARCHES[key]


# One jitted beam search per (seq2seq model config, beams, new tokens), kept for the process: each
# batch a translation decodes (a file's, an evaluator's) reuses its compiled program.
_SEQ2SEQ_SEARCHES = {}


def _seq2seq_search(model_config, beams: int, max_new_tokens: int):
  config = _plain(model_config)
  key = (repr(sorted(config.items())), beams, max_new_tokens)
  if key not in _SEQ2SEQ_SEARCHES:
    model, decoder = build_model(config), build_model(config, decode=True)

    def search(params, inputs_BxS, input_mask_BxS, start_id, eos_id, alpha):
      encoded_BxSxD = model.apply(
          {"params": params}, inputs_BxS, input_mask_BxS, method=model.encode
      )
      # Every (sentence, beam) is a row of the decoder batch.
      encoded_RxSxD = jnp.repeat(encoded_BxSxD, beams, axis=0)
      input_mask_RxS = jnp.repeat(input_mask_BxS, beams, axis=0)
      dummy_RxL = jnp.zeros((encoded_RxSxD.shape[0], max_new_tokens), jnp.int32)
      cache = _empty_cache(
          lambda: decoder.init(
              jax.random.PRNGKey(0), dummy_RxL, encoded_RxSxD, method=decoder.decode_logits
          )
      )

      def step(cache, tokens_Rx1):
        logits_Rx1xV, state = _decoder_step(
            decoder, params, cache, tokens_Rx1, encoded_RxSxD, input_mask_RxS
        )
        return logits_Rx1xV[:, 0], state["cache"]

      batch = inputs_BxS.shape[0]
      tokens_BxKxN = (
          jnp.zeros((batch, beams, 1 + max_new_tokens), jnp.int32).at[:, :, 0].set(start_id)
      )
      start_B = jnp.ones(batch, jnp.int32)
      return beam_search.search(
          step, cache, tokens_BxKxN, start_B, 0, max_new=max_new_tokens, eos_id=eos_id, alpha=alpha
      )

    _SEQ2SEQ_SEARCHES[key] = jax.jit(search)
  return _SEQ2SEQ_SEARCHES[key]


def seq2seq_decode(
    model_config: dict,
    params,
    inputs_BxS,
    input_mask_BxS,
    *,
    max_new_tokens: int,
    start_id: int,
    eos_id: Optional[int],
    beam_size: int = 1,
    length_penalty: float = 0.6,
):
  """Greedy (beam_size 1) or beam search decoding; returns the best tokens per input row, without
  the EOS. The whole decode runs on the device (see `beam_search`), ranking finished beams by
  GNMT's length penalty with alpha `length_penalty`; one host sync per call."""
  search = _seq2seq_search(model_config, beam_size, max_new_tokens)
  tokens_BxN, length_B = search(
      params,
      jnp.asarray(inputs_BxS),
      jnp.asarray(input_mask_BxS),
      np.int32(start_id),
      np.int32(-1 if eos_id is None else eos_id),
      np.float32(length_penalty),
  )
  return _without_eos(_new_tokens(tokens_BxN, np.ones(len(length_B), int), length_B), eos_id)


def _new_tokens(tokens_BxN, start_B, length_B):
  """Each row's `length` tokens from its `start`, as lists (the one host sync)."""
  tokens_BxN, length_B = jax.device_get((tokens_BxN, length_B))
  return [tokens_BxN[i, s : s + n].tolist() for i, (s, n) in enumerate(zip(start_B, length_B))]


def _without_eos(rows, eos_id):
  return [row[:-1] if row and eos_id is not None and row[-1] == eos_id else row for row in rows]
