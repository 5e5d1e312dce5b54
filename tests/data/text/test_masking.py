"""Masking statistics over many rows of real text."""

import numpy as np
import pytest

from vit_jax.data.text import batches
from vit_jax.data.text import masking
from vit_jax.data.text import order

SEQ_LEN = 128


def _unmasked_rows(tokenizer, docs, n=1000):
  """Rows before masking: rebuild them from a pass with masking disabled."""
  config = masking.MaskingConfig(rate=0.0, max_predictions=1)
  batch = next(
      batches.mlm_batches(
          list(docs), tokenizer, batch_size=n, seq_len=SEQ_LEN, train=False, masking_config=config
      )
  )
  return batch["tokens"]


@pytest.fixture(scope="module")
def tokens_BxL(char_tokenizer, train_docs):
  tokens = _unmasked_rows(char_tokenizer, train_docs[:150])
  assert tokens.shape == (1000, SEQ_LEN)
  return tokens


def _mask(tokenizer, tokens_BxL, config, seed=0, by="generator"):
  """mask_tokens with one Generator for the batch, or mask_rows with each row's key."""
  if by == "keys":
    keys_B = np.arange(len(tokens_BxL)) * 7 + 3
    return masking.mask_rows(tokens_BxL, keys_B, seed, 1, tokenizer, config)
  return masking.mask_tokens(tokens_BxL, np.random.default_rng(seed), tokenizer, config)


def test_a_rows_masking_depends_on_its_key_only(char_tokenizer, tokens_BxL):
  """mask_rows draws each row from its key: a row masks alike in any batch, and whole-word
  rows are mask_tokens' with a Generator of (seed, stream, key)."""
  for config in (masking.MaskingConfig(), masking.MaskingConfig(whole_word=True)):
    keys_B = np.arange(10, 30)
    whole = masking.mask_rows(tokens_BxL[:20], keys_B, 5, 1, char_tokenizer, config)
    part = masking.mask_rows(tokens_BxL[7:9], keys_B[7:9], 5, 1, char_tokenizer, config)
    for key in whole:
      np.testing.assert_array_equal(whole[key][7:9], part[key], err_msg=key)
    other = masking.mask_rows(tokens_BxL[:20], keys_B + 1, 5, 1, char_tokenizer, config)
    assert (other["masked_positions"] != whole["masked_positions"]).any()
  one = masking.mask_tokens(
      tokens_BxL[7:8],
      order.seeded_rng(5, 1, 17),
      char_tokenizer,
      masking.MaskingConfig(whole_word=True),
  )
  for key in one:
    np.testing.assert_array_equal(whole[key][7:8], one[key], err_msg=key)


def _candidates(tokenizer, tokens_BxL):
  return ~np.isin(tokens_BxL, list(tokenizer.special_id_set()))


@pytest.mark.parametrize("by", ["generator", "keys"])
def test_fifteen_percent_and_80_10_10(char_tokenizer, tokens_BxL, by):
  tok = char_tokenizer
  out = _mask(tok, tokens_BxL, masking.MaskingConfig(), by=by)
  weights_BxP = out["masked_weights"]
  assert out["masked_positions"].shape == (1000, 29)  # round(.15*128) + 10.
  assert out["masked_positions"].dtype == np.int32
  assert weights_BxP.dtype == np.float32
  selected = weights_BxP.sum()
  assert abs(selected / _candidates(tok, tokens_BxL).sum() - 0.15) < 0.01

  b, p = np.nonzero(weights_BxP)
  where = out["masked_positions"][b, p]
  original = tokens_BxL[b, where]
  assert (out["masked_targets"][b, p] == original).all()
  now = out["tokens"][b, where]
  masked = np.mean(now == tok.mask_id)
  kept = np.mean(now == original)
  replaced = np.mean((now != tok.mask_id) & (now != original))
  assert abs(masked - 0.8) < 0.01
  assert abs(replaced - 0.1) < 0.01  # Minus rare draws of the same token.
  assert abs(kept - 0.1) < 0.01
  assert not np.isin(now[now != tok.mask_id], list(tok.special_id_set())).any()
  # Nothing outside the selected positions changed.
  changed = out["tokens"] != tokens_BxL
  changed[b, where] = False
  assert not changed.any()


@pytest.mark.parametrize(
    "config",
    [
        masking.MaskingConfig(),
        masking.MaskingConfig(whole_word=True),
        masking.MaskingConfig(span=True),
    ],
    ids=["token", "whole_word", "span"],
)
@pytest.mark.parametrize("by", ["generator", "keys"])
def test_special_tokens_are_never_masked(char_tokenizer, tokens_BxL, config, by):
  out = _mask(char_tokenizer, tokens_BxL, config, by=by)
  b, p = np.nonzero(out["masked_weights"])
  where = out["masked_positions"][b, p]
  assert _candidates(char_tokenizer, tokens_BxL)[b, where].all()
  special = ~_candidates(char_tokenizer, tokens_BxL)
  assert (out["tokens"][special] == tokens_BxL[special]).all()
  # Padding rows (all special) get no predictions at all.
  assert (out["masked_weights"][~_candidates(char_tokenizer, tokens_BxL).any(axis=1)] == 0).all()


def test_whole_word_masking_takes_whole_words(spm_tokenizer, train_docs):
  tok = spm_tokenizer
  tokens = _unmasked_rows(tok, train_docs[:60], n=300)
  out = _mask(tok, tokens, masking.MaskingConfig(whole_word=True))
  selected_BxL = np.zeros(tokens.shape, bool)
  b, p = np.nonzero(out["masked_weights"])
  selected_BxL[b, out["masked_positions"][b, p]] = True
  candidates_BxL = _candidates(tok, tokens)
  starts_BxL = tok.word_starts(tokens)
  multi_token_words = 0
  for row in range(len(tokens)):
    idx = np.flatnonzero(candidates_BxL[row])
    # BERT adds a word only while it fits the row's token budget.
    assert selected_BxL[row].sum() <= max(1, round(0.15 * len(idx)))
    word_ids = np.cumsum(starts_BxL[row, idx] | np.r_[True, np.diff(idx) != 1])
    for word in np.unique(word_ids):
      in_word = selected_BxL[row, idx[word_ids == word]]
      assert in_word.all() or not in_word.any()
      multi_token_words += len(in_word) > 1 and in_word.all()
  assert multi_token_words > 100
  fraction = selected_BxL.sum() / candidates_BxL.sum()
  assert 0.13 < fraction < 0.16


def test_span_lengths_follow_clipped_geometric(char_tokenizer, tokens_BxL):
  config = masking.MaskingConfig(span=True)
  lengths, selected = [], 0
  for seed in range(4):
    out = _mask(char_tokenizer, tokens_BxL, config, seed)
    for positions, weights in zip(out["masked_positions"], out["masked_weights"]):
      chosen = positions[weights > 0]
      selected += len(chosen)
      # Spans never touch, so each run of consecutive positions is a span.
      breaks = np.flatnonzero(np.diff(chosen) != 1)
      lengths.extend(np.diff(np.r_[-1, breaks, len(chosen) - 1]))
  histogram = np.bincount(lengths, minlength=11)[1:] / len(lengths)
  assert len(lengths) > 10_000
  assert np.abs(histogram - masking.span_length_pmf(0.2, 10)).max() < 0.02
  candidates = 4 * _candidates(char_tokenizer, tokens_BxL).sum()
  assert abs(selected / candidates - 0.15) < 0.01


def test_span_length_pmf():
  pmf = masking.span_length_pmf(0.2, 10)
  assert pmf.shape == (10,) and abs(pmf.sum() - 1) < 1e-12
  assert pmf[0] == pytest.approx(0.2) and pmf[-1] == pytest.approx(0.8**9)


def test_masking_needs_a_mask_token(train_docs):
  from vit_jax.data import tokenizers  # pylint: disable=import-outside-toplevel

  tok = tokenizers.HfTokenizer.train_byte_level_bpe(train_docs[:5], 300)
  no_mask = tokenizers.HfTokenizer(tok._tok, {"mask": None})  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="mask"):
    masking.mask_tokens(np.zeros((1, 4), np.int32), np.random.default_rng(0), no_mask)


def test_span_layouts_reach_every_unit_and_stay_in_the_row():
  selector = masking._SpanSelector(masking.MaskingConfig(span=True))  # pylint: disable=protected-access
  units = [np.array([i]) for i in range(20)]
  rng = np.random.default_rng(0)
  counts = np.zeros(20)
  for _ in range(2000):
    chosen = selector.select(units, rng)
    assert len(set(chosen.tolist())) == len(chosen) and chosen.max(initial=0) < 20
    counts[chosen] += 1
  assert (counts > 0).all(), counts  # first and last units included: layouts start at 0
