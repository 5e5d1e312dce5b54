"""Generation: the KV cache changes nothing, sampling filters work, prompts are fitted."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.data.text import batches
from vit_jax.data.text import token_store
from vit_jax.models import beam_search
from vit_jax.models import build_model
from vit_jax.models import sampling

GPT = {"name": "gpt", "variant": "pico", "vocab_size": 29, "max_len": 32}


def random_gpt(cfg=GPT, seed=0):
  model = build_model(cfg)
  params = model.init(jax.random.PRNGKey(seed), jnp.zeros((1, 4), jnp.int32))["params"]
  # Random init is nearly uniform; sharpen it so greedy choices are not ties.
  return jax.tree.map(lambda p: p * 3.0, params)


@pytest.mark.parametrize("posemb", ["learn", "rope"])
def test_greedy_with_cache_equals_without(posemb):
  cfg = {**GPT, "posemb": posemb}
  params = random_gpt(cfg)
  prompts = [[1, 2, 3, 4, 5], [7], [3, 9, 11]]
  kwargs = dict(max_new_tokens=12, temperature=0.0)
  cached = sampling.generate(cfg, params, prompts, use_cache=True, **kwargs)
  uncached = sampling.generate(cfg, params, prompts, use_cache=False, **kwargs)
  assert cached == uncached
  assert all(len(row) == 12 for row in cached)
  # Lockstep decoding of a batch equals decoding each prompt alone.
  for prompt, row in zip(prompts, cached):
    assert sampling.generate(cfg, params, [prompt], use_cache=True, **kwargs)[0] == row


def test_sampling_is_seeded_and_stops_at_eos():
  params = random_gpt()
  kwargs = dict(max_new_tokens=10, temperature=1.0, top_k=5)
  a = sampling.generate(GPT, params, [[1, 2]], seed=3, **kwargs)
  assert a == sampling.generate(GPT, params, [[1, 2]], seed=3, **kwargs)
  eos = a[0][2]
  stopped = sampling.generate(GPT, params, [[1, 2]], seed=3, eos_id=eos, **kwargs)[0]
  assert stopped[-1] == eos and len(stopped) <= 3


def test_top_k_and_top_p_filters():
  logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05]]))
  keys = jax.random.split(jax.random.PRNGKey(0), 500)
  draw = lambda **kw: {int(sampling.sample_logits(logits, k, **kw)[0]) for k in keys}
  assert draw(top_k=2) == {0, 1}
  assert draw(top_p=0.7) == {0, 1}  # 0.5 < 0.7 <= 0.8
  assert draw(top_p=0.5) == {0}
  assert int(sampling.sample_logits(logits, keys[0], temperature=0.0)[0]) == 0


def test_prompt_longer_than_context_is_truncated_and_announced(capsys):
  fitted = sampling.fit_prompts([list(range(40))], max_new_tokens=8, max_len=32)
  assert fitted == [list(range(16, 40))]
  assert "keeping its last 24 tokens" in capsys.readouterr().out
  with pytest.raises(ValueError, match="leaves no room"):
    sampling.fit_prompts([[1]], max_new_tokens=32, max_len=32)


class _NoEos:
  """A tokenizer without EOS or PAD: documents follow each other directly."""

  eos_id = pad_id = None


def test_packed_documents_do_not_see_each_other():
  docs = [[np.array([3, 4, 5, 6, 7])], [np.array([8, 9, 10, 11])], [np.array([12, 13, 14])]]
  split = token_store.in_memory(("text",), docs)
  row = next(batches.clm_batches(split, _NoEos(), batch_size=1, seq_len=12, train=False))
  tokens, segments, positions = (
      jnp.asarray(row[k]) for k in ("inputs", "segment_ids", "positions")
  )
  assert segments[0].tolist() == [1] * 5 + [2] * 4 + [3] * 3
  model = build_model(GPT)
  params = random_gpt()
  out = model.apply({"params": params}, tokens, positions, segments)
  changed = tokens.at[0, 1].set(20)  # a token of the first document
  new = model.apply({"params": params}, changed, positions, segments)
  second_and_third = np.asarray(segments[0]) > 1
  np.testing.assert_array_equal(
      np.asarray(new)[0, second_and_third], np.asarray(out)[0, second_and_third]
  )
  assert not np.allclose(new[0, 1:5], out[0, 1:5])


# Every sequence of T tokens over a vocabulary of V (EOS among them) is scored by teacher forcing:
# the best hypothesis under any length penalty is then known exactly.
V, T, EOS = 4, 3, 2
ALL_NxT = np.array(list(itertools.product(range(V), repeat=T)), np.int32)


def tiny_seq2seq(seed=9):
  """(decode(beams, alpha) -> the tokens with their EOS, log-probs (V**T, T, V) of ALL_NxT)."""
  cfg = {
      "name": "seq2seq",
      "vocab_size": V,
      "width": 16,
      "num_layers": 1,
      "num_heads": 2,
      "mlp_dim": 32,
      "max_len": 8,
      "dropout_rate": 0.0,
  }
  model = build_model(cfg)
  inputs_1xS = jnp.array([[3, 1, 3, 2]])
  mask_1xS = jnp.ones_like(inputs_1xS)
  params = model.init(jax.random.PRNGKey(seed), inputs_1xS, inputs_1xS)["params"]
  params = jax.tree.map(lambda p: p * 2.0, params)
  decoder_in_NxT = np.concatenate([np.ones((len(ALL_NxT), 1), np.int32), ALL_NxT[:, :-1]], 1)
  many = lambda x: jnp.repeat(x, len(ALL_NxT), axis=0)
  logits_NxTxV = model.apply({"params": params}, many(inputs_1xS), decoder_in_NxT, many(mask_1xS))

  def decode(beams, alpha):
    (out,) = sampling.seq2seq_decode(
        cfg, params, inputs_1xS, mask_1xS, max_new_tokens=T, start_id=1, eos_id=EOS,
        beam_size=beams, length_penalty=alpha,
    )  # fmt: skip
    return tuple(out + [EOS] if len(out) < T else out)  # its EOS, stripped by seq2seq_decode

  return decode, np.asarray(jax.nn.log_softmax(logits_NxTxV, -1))


def tiny_gpt(seed=16):
  """As tiny_seq2seq, for a causal LM continuing a prompt (the decoder-only pairs design)."""
  cfg = {"name": "gpt", "variant": "pico", "vocab_size": V, "max_len": 8}
  params = random_gpt(cfg, seed)
  prompt = [3, 1]
  tokens_NxL = np.concatenate([np.tile(prompt, (len(ALL_NxT), 1)), ALL_NxT], 1)
  logits_NxLxV = build_model(cfg).apply({"params": params}, tokens_NxL)
  logits_NxTxV = logits_NxLxV[:, len(prompt) - 1 : len(prompt) - 1 + T]

  def decode(beams, alpha):
    (out,) = sampling.beam_generate(
        cfg, params, [prompt], max_new_tokens=T, beam_size=beams, eos_id=EOS, length_penalty=alpha
    )
    return tuple(out)

  return decode, np.asarray(jax.nn.log_softmax(logits_NxTxV, -1))


def hypotheses(logp_NxTxV, alpha):
  """{hypothesis (tokens up to the first EOS, kept): its log-prob / ((5 + length) / 6) ** alpha}."""
  logp_NxT = np.take_along_axis(logp_NxTxV, ALL_NxT[:, :, None], -1)[..., 0]
  is_eos_NxT = ALL_NxT == EOS
  length_N = np.where(is_eos_NxT.any(1), is_eos_NxT.argmax(1) + 1, T)
  logp_N = np.where(np.arange(T) < length_N[:, None], logp_NxT, 0.0).sum(1)
  score_N = logp_N / ((5.0 + length_N) / 6.0) ** alpha
  return {tuple(s[:n].tolist()): float(v) for s, n, v in zip(ALL_NxT, length_N, score_N)}


def greedy_of(logp_NxTxV):
  """The argmax path through the table, stopping at EOS."""
  out = []
  while len(out) < T and EOS not in out:
    row = np.ravel_multi_index(tuple(out) + (0,) * (T - len(out)), (V,) * T)
    out.append(int(np.argmax(logp_NxTxV[row, len(out)])))
  return tuple(out)


@pytest.mark.parametrize("tiny", [tiny_seq2seq, tiny_gpt], ids=["seq2seq", "decoder-only"])
def test_beam_search_equals_exhaustive_search_under_the_length_penalty(tiny):
  decode, logp_NxTxV = tiny()
  greedy = greedy_of(logp_NxTxV)
  assert decode(1, 0.6) == greedy
  best = {}
  for alpha in (0.0, 3.0):
    scores = hypotheses(logp_NxTxV, alpha)
    best[alpha] = max(scores, key=scores.get)
    # V**T beams keep every hypothesis alive: the search is exhaustive.
    assert decode(V**T, alpha) == best[alpha]
    assert scores[decode(2, alpha)] >= scores[greedy] - 1e-6
  assert best[0.0] != greedy and best[0.0] != best[3.0], "the case proves nothing"


def test_one_beam_is_greedy_for_ragged_prompts_and_compiles_once():
  params = random_gpt()
  prompts, other = [[1, 2, 3, 4, 5], [7], [3, 9, 11]], [[2, 2, 3, 4, 5], [8], [3, 9, 12]]
  for eos in (None, 15):
    kwargs = dict(max_new_tokens=10, eos_id=eos, length=24)
    greedy = sampling.generate(GPT, params, prompts, **kwargs)
    assert sampling.beam_generate(GPT, params, prompts, beam_size=1, **kwargs) == greedy
  assert [len(row) for row in greedy] == [10, 2, 10]  # the second row stopped at its EOS
  searches = len(sampling._BEAM_SEARCHES)  # pylint: disable=protected-access
  for alpha in (0.0, 0.6):
    sampling.beam_generate(
        GPT, params, other, max_new_tokens=10, beam_size=1, eos_id=15, length=24,
        length_penalty=alpha,
    )  # fmt: skip
  assert len(sampling._BEAM_SEARCHES) == searches  # pylint: disable=protected-access
  (search,) = [
      s
      for k, s in sampling._BEAM_SEARCHES.items()  # pylint: disable=protected-access
      if k[1] == (3, 24)
  ]
  assert search._cache_size() == 1  # pylint: disable=protected-access


@pytest.mark.parametrize("where", ["spread", "one_chunk", "last_chunk"])
def test_chunked_top_k_is_lax_top_k(where):
  """Beam search's top_k over 4 beams x 2,048 tokens (64 chunks): the same values and indices as
  lax.top_k, whether the best candidates are spread out or all in one chunk."""
  rng = np.random.default_rng(0)
  candidates = rng.permutation(6 * 8192).astype(np.float32)[: 6 * 4 * 2048].reshape(6, -1)
  chunk = beam_search.TOP_K_CHUNK
  if where != "spread":  # no ties: the four best, written into one chunk of each row
    start = 0 if where == "one_chunk" else candidates.shape[1] - chunk
    candidates[:, start + np.array([3, 17, 64, 127])] = 1e6 + np.arange(4)
  values, indices = jax.jit(lambda c: beam_search.top_k(c, 4))(candidates)
  want_values, want_indices = jax.lax.top_k(candidates, 4)
  np.testing.assert_array_equal(values, want_values)
  np.testing.assert_array_equal(indices, want_indices)
