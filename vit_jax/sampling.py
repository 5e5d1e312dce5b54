"""Text generation: GPT sampling (greedy, temperature, top-k, top-p) and seq2seq greedy/beam search.

The KV cache makes each new token cost one position of compute. Prompts of different lengths are
decoded in lockstep without padding: at step t every row feeds its own token t (from its prompt
while it lasts, then its last sample), so positions are shared and no mask is needed.
"""

from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vit_jax import errors
from vit_jax.models import build_model


def sample_logits(logits_BxV, rng, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
  """Next tokens (B,) from logits: greedy when temperature is 0, else filtered sampling."""
  if temperature == 0.0:
    return jnp.argmax(logits_BxV, axis=-1)
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
    raise errors.ConfigError(f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the "
                             f"model's context of {max_len} tokens; ask for fewer new tokens.")
  if any(len(p) == 0 for p in prompts):
    raise errors.ConfigError("Empty prompt: give at least one token (or a BOS token).")
  fitted = []
  for i, prompt in enumerate(prompts):
    if len(prompt) > room:
      print(f"Prompt {i} has {len(prompt)} tokens; with {max_new_tokens} new tokens the context "
            f"of {max_len} holds only {room}: keeping its last {room} tokens.", flush=True)
      prompt = prompt[-room:]
    fitted.append(list(prompt))
  return fitted


def generate(model_config: dict, params, prompts: Sequence[Sequence[int]], *,
             max_new_tokens: int, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
             eos_id: Optional[int] = None, seed: int = 0, use_cache: bool = True):
  """Continues each prompt of token ids; returns the new tokens per prompt (stopping at EOS)."""
  max_len = model_config["max_len"]
  prompts = fit_prompts(prompts, max_new_tokens, max_len)
  batch = len(prompts)
  lengths = np.array([len(p) for p in prompts])
  total = int(lengths.max()) + max_new_tokens
  tokens_BxN = np.zeros((batch, total), np.int32)
  for i, p in enumerate(prompts):
    tokens_BxN[i, :len(p)] = p
  rng = jax.random.PRNGKey(seed)
  sample = jax.jit(lambda logits, key: sample_logits(logits, key, temperature, top_k, top_p))

  if use_cache:
    model = build_model(model_config, decode=True)
    cache = model.init(jax.random.PRNGKey(0), jnp.zeros((batch, total), jnp.int32))["cache"]
    step_fn = jax.jit(lambda cache, tok_Bx1: model.apply({"params": params, "cache": cache},
                                                         tok_Bx1, mutable=["cache"]))
  else:
    model = build_model(model_config)
    full_fn = jax.jit(lambda toks: model.apply({"params": params}, toks))

  done_B = np.zeros(batch, bool)
  start = int(lengths.min()) - 1  # the first step at which some row samples
  new_tokens = [[] for _ in range(batch)]
  for t in range(total - 1):
    if use_cache:
      (logits, state) = step_fn(cache, jnp.asarray(tokens_BxN[:, t:t + 1]))
      cache = state["cache"]
      logits_BxV = logits[:, 0]
    else:
      logits_BxV = full_fn(jnp.asarray(tokens_BxN))[:, t]
    if t < start:
      continue
    rng, key = jax.random.split(rng)
    next_B = np.asarray(sample(logits_BxV, key))
    for i in range(batch):
      if t + 1 >= lengths[i] and not done_B[i] and len(new_tokens[i]) < max_new_tokens:
        tokens_BxN[i, t + 1] = next_B[i]
        new_tokens[i].append(int(next_B[i]))
        done_B[i] = eos_id is not None and next_B[i] == eos_id
    if all(done_B[i] or len(new_tokens[i]) >= max_new_tokens for i in range(batch)):
      break
  return new_tokens


def seq2seq_decode(model_config: dict, params, inputs_BxS, input_mask_BxS, *, max_new_tokens: int,
                   start_id: int, eos_id: Optional[int], beam_size: int = 1,
                   length_penalty: float = 0.6):
  """Greedy (beam_size 1) or beam search decoding; returns the best tokens per input row."""
  model = build_model(model_config)
  inputs_BxS, input_mask_BxS = jnp.asarray(inputs_BxS), jnp.asarray(input_mask_BxS)
  encoded_BxSxD = model.apply({"params": params}, inputs_BxS, input_mask_BxS, method=model.encode)
  batch, beams = inputs_BxS.shape[0], beam_size
  # Every (row, beam) is a row of the decoder batch.
  encoded = jnp.repeat(encoded_BxSxD, beams, axis=0)
  input_mask = jnp.repeat(input_mask_BxS, beams, axis=0)
  decoder = build_model(model_config, decode=True)
  cache = decoder.init(jax.random.PRNGKey(0), jnp.zeros((batch * beams, max_new_tokens), jnp.int32),
                       encoded, method=decoder.decode_logits)["cache"]
  step_fn = jax.jit(lambda cache, tok: decoder.apply(
      {"params": params, "cache": cache}, tok, encoded, input_mask, method=decoder.decode_logits,
      mutable=["cache"]))

  tokens = np.full((batch, beams, 1), start_id, np.int32)
  scores = np.zeros((batch, beams))
  scores[:, 1:] = -np.inf  # all beams start identical: expand only the first
  finished = np.zeros((batch, beams), bool)
  for _ in range(max_new_tokens):
    logits, state = step_fn(cache, jnp.asarray(tokens[:, :, -1].reshape(-1, 1)))
    logp = np.asarray(jax.nn.log_softmax(logits[:, 0]), np.float64).reshape(batch, beams, -1)
    vocab = logp.shape[-1]
    # Finished beams only extend with EOS (or a pad stand-in) at no cost.
    logp[finished] = -np.inf
    logp[finished, eos_id if eos_id is not None else 0] = 0.0
    candidates = (scores[:, :, None] + logp).reshape(batch, -1)
    best = np.argsort(-candidates, axis=-1)[:, :beams]
    beam_index, token = best // vocab, best % vocab
    scores = np.take_along_axis(candidates, best, axis=-1)
    tokens = np.concatenate([np.take_along_axis(tokens, beam_index[:, :, None], axis=1),
                             token[:, :, None]], axis=-1)
    finished = np.take_along_axis(finished, beam_index, axis=1) | (
        (token == eos_id) if eos_id is not None else False)
    flat_index = (np.arange(batch)[:, None] * beams + beam_index).reshape(-1)
    cache = jax.tree.map(lambda x: x[flat_index] if x.ndim > 0 else x, state["cache"])
    if finished.all():
      break
  lengths = np.array([[_length(row[1:], eos_id) for row in rows] for rows in tokens])
  normalized = scores / (((5.0 + lengths) / 6.0) ** length_penalty)  # GNMT length penalty
  best_beam = np.argmax(normalized, axis=-1)
  return [_strip(tokens[b, best_beam[b], 1:], eos_id) for b in range(batch)]


def _length(row, eos_id):
  if eos_id is not None and eos_id in row:
    return int(np.argmax(row == eos_id)) + 1
  return len(row)


def _strip(row, eos_id):
  return [int(t) for t in row[:_length(row, eos_id)] if t != eos_id]
