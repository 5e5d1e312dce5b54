"""Dynamic masked-LM masking: BERT token/whole-word masking, SpanBERT spans.

Per row, `rate` (15%) of the non-special tokens are selected; each selected
token becomes [MASK] with probability 0.8, a random non-special token with
0.1, and stays itself with 0.1. Special tokens (CLS, SEP, PAD, ...) are never
selected.

  token:       exactly round(rate * n) tokens, uniformly.
  whole_word:  words (a word-start token and its continuations) in random
               order, each taken if it still fits in the token budget (BERT).
  span:        span lengths ~ min(Geometric(p), span_max), in tokens (or in
               words with whole_word); spans are drawn until the budget is
               met and laid out without overlap or adjacency.

Span stopping is randomized so the expected number selected is exactly the
budget: with r units left, one more span is drawn with probability
r / (mean_len + E[(r - len)+]). The decision depends only on the past, so the
histogram of drawn lengths keeps the clipped-geometric law exactly.

`mask_rows` draws each row's randomness from (seed, stream, the row's key): a row is masked the
same whatever batch it is in. Token masking draws the whole batch at once (counter-based
uniforms, vit_jax/data/text/order.py): the tokens with the `budget` smallest draws among a row's
candidates are a uniformly random subset. Whole-word and span masking draw row by row from a
Generator seeded the same way (`mask_tokens`).
"""

import dataclasses
from typing import Optional

import numpy as np

from vit_jax.data.text import order


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
  rate: float = 0.15
  max_predictions: Optional[int] = None  # Default: round(rate * L) + 10.
  whole_word: bool = False
  span: bool = False
  span_p: float = 0.2
  span_max: int = 10
  mask_prob: float = 0.8
  random_prob: float = 0.1

  def predictions(self, seq_len: int) -> int:
    """P, the number of prediction slots per row."""
    if self.max_predictions is not None:
      return self.max_predictions
    # Slack covers the last span overshooting the budget.
    return int(round(self.rate * seq_len)) + self.span_max


def span_length_pmf(p: float = 0.2, span_max: int = 10) -> np.ndarray:
  """pmf of min(Geometric(p), span_max) over lengths 1..span_max."""
  lengths = np.arange(1, span_max + 1)
  pmf = p * (1 - p) ** (lengths - 1)
  pmf[-1] = (1 - p) ** (span_max - 1)
  return pmf


def mask_tokens(
    tokens_BxL: np.ndarray,
    rng: np.random.Generator,
    tokenizer,
    config: MaskingConfig = MaskingConfig(),
) -> dict[str, np.ndarray]:
  """Masks a batch. Returns the MLM batch entries.

  tokens (B, L) int32 masked input; masked_positions, masked_targets (B, P)
  int32 and masked_weights (B, P) float32 (0 on unused slots).
  """
  tokenizer.require("mask")
  batch, seq_len = tokens_BxL.shape
  num_predictions = config.predictions(seq_len)
  special = np.array(sorted(tokenizer.special_id_set()), dtype=np.int32)
  candidates_BxL = ~np.isin(tokens_BxL, special)
  word_starts_BxL = (
      tokenizer.word_starts(tokens_BxL) if config.whole_word else np.ones_like(candidates_BxL)
  )  # Tokens as units.
  selector = _SpanSelector(config) if config.span else None

  positions_BxP = np.zeros((batch, num_predictions), np.int32)
  weights_BxP = np.zeros((batch, num_predictions), np.float32)
  for b in range(batch):
    candidates = np.flatnonzero(candidates_BxL[b])
    if len(candidates) == 0:
      continue
    if not (config.span or config.whole_word):
      budget = _budget(config.rate, len(candidates))
      chosen = rng.choice(candidates, budget, replace=False)
    else:
      units = _units(candidates, word_starts_BxL[b])
      chosen = (
          selector.select(units, rng) if selector is not None else _select_units(units, config, rng)
      )
    # Only a user-set, too small max_predictions can cut predictions here.
    chosen = np.sort(chosen)[:num_predictions]
    positions_BxP[b, : len(chosen)] = chosen
    weights_BxP[b, : len(chosen)] = 1.0

  targets_BxP = np.take_along_axis(tokens_BxL, positions_BxP, axis=1)
  targets_BxP = np.where(weights_BxP > 0, targets_BxP, 0).astype(np.int32)
  masked_BxL = _corrupt(tokens_BxL, positions_BxP, weights_BxP, rng, tokenizer, config)
  return {
      "tokens": masked_BxL,
      "masked_positions": positions_BxP,
      "masked_targets": targets_BxP,
      "masked_weights": weights_BxP,
  }


def mask_rows(
    tokens_BxL: np.ndarray,
    keys_B: np.ndarray,
    seed: int,
    stream: int,
    tokenizer,
    config: MaskingConfig = MaskingConfig(),
) -> dict[str, np.ndarray]:
  """`mask_tokens`' entries, each row's randomness drawn from (seed, stream, keys_B[row])."""
  if config.whole_word or config.span:
    rows = [
        mask_tokens(
            tokens_BxL[b : b + 1], order.seeded_rng(seed, stream, int(key)), tokenizer, config
        )
        for b, key in enumerate(keys_B)
    ]
    return {k: np.concatenate([row[k] for row in rows]) for k in rows[0]}
  tokenizer.require("mask")
  batch, seq_len = tokens_BxL.shape
  num_predictions = config.predictions(seq_len)
  special = np.array(sorted(tokenizer.special_id_set()), dtype=np.int32)
  candidates_BxL = ~np.isin(tokens_BxL, special)
  count_B = candidates_BxL.sum(axis=1)
  budget_B = np.where(
      count_B > 0, np.maximum(int(config.rate > 0), np.round(config.rate * count_B)), 0
  ).astype(np.int64)
  draws_Bx3xL = order.uniform(seed, stream, keys_B, 3 * seq_len).reshape(batch, 3, seq_len)
  score_BxL = np.where(candidates_BxL, draws_Bx3xL[:, 0], 2.0)  # non-candidates last
  rank_BxL = np.empty((batch, seq_len), np.int64)
  np.put_along_axis(rank_BxL, np.argsort(score_BxL, axis=1), np.arange(seq_len)[None], axis=1)
  chosen_BxL = rank_BxL < budget_B[:, None]
  column_L = np.arange(seq_len)
  # Only a user-set, too small max_predictions can cut predictions here.
  positions_BxP = np.sort(np.where(chosen_BxL, column_L, seq_len), axis=1)[:, :num_predictions]
  weights_BxP = (positions_BxP < seq_len).astype(np.float32)
  positions_BxP = np.where(weights_BxP > 0, positions_BxP, 0).astype(np.int32)
  targets_BxP = np.take_along_axis(tokens_BxL, positions_BxP, axis=1)
  targets_BxP = np.where(weights_BxP > 0, targets_BxP, 0).astype(np.int32)
  predicted_BxL = np.zeros((batch, seq_len), bool)
  np.put_along_axis(predicted_BxL, positions_BxP, weights_BxP > 0, axis=1)
  draw_BxL = draws_Bx3xL[:, 1]
  to_mask_BxL = predicted_BxL & (draw_BxL < config.mask_prob)
  to_random_BxL = (
      predicted_BxL
      & (draw_BxL >= config.mask_prob)
      & (draw_BxL < config.mask_prob + config.random_prob)
  )
  normal = tokenizer.normal_ids()
  random_BxL = normal[
      np.minimum((draws_Bx3xL[:, 2] * len(normal)).astype(np.int64), len(normal) - 1)
  ]
  masked_BxL = tokens_BxL.astype(np.int32, copy=True)
  masked_BxL[to_mask_BxL] = tokenizer.mask_id
  masked_BxL[to_random_BxL] = random_BxL[to_random_BxL]
  return {
      "tokens": masked_BxL,
      "masked_positions": positions_BxP,
      "masked_targets": targets_BxP,
      "masked_weights": weights_BxP,
  }


def _budget(rate: float, count: int) -> int:
  """round(rate * count), but at least one prediction per non-empty row."""
  return max(1 if rate > 0 else 0, int(round(rate * count)))


def _units(candidate_idx: np.ndarray, word_starts_L: np.ndarray) -> list[np.ndarray]:
  """Groups candidate positions into maskable units (tokens or words).

  A unit breaks at a word start or where a special token sits in between.
  """
  if len(candidate_idx) == 0:
    return []
  breaks = word_starts_L[candidate_idx].copy()
  breaks[1:] |= np.diff(candidate_idx) != 1
  breaks[0] = True
  return np.split(candidate_idx, np.flatnonzero(breaks)[1:])


def _select_units(
    units: list[np.ndarray], config: MaskingConfig, rng: np.random.Generator
) -> np.ndarray:
  """BERT whole-word masking: words in random order while they fit."""
  num_tokens = sum(len(u) for u in units)
  budget = _budget(config.rate, num_tokens)
  chosen, total = [], 0
  for i in rng.permutation(len(units)):
    if total + len(units[i]) <= budget:
      chosen.append(units[i])
      total += len(units[i])
  return np.concatenate(chosen) if chosen else np.zeros(0, np.int64)


class _SpanSelector:
  """SpanBERT span selection with an exact expected budget."""

  def __init__(self, config: MaskingConfig):
    self.rate, self.p = config.rate, config.span_p
    self.span_max = config.span_max
    self.pmf = span_length_pmf(config.span_p, config.span_max)
    self.lengths = np.arange(1, config.span_max + 1)
    self.mean = float(self.pmf @ self.lengths)
    self._continue_prob = {}

  def continue_prob(self, remaining: int) -> float:
    if remaining not in self._continue_prob:
      shortfall = np.maximum(remaining - self.lengths, 0) @ self.pmf
      self._continue_prob[remaining] = min(1.0, remaining / (self.mean + shortfall))
    return self._continue_prob[remaining]

  def draw_lengths(self, budget: int, rng: np.random.Generator) -> list[int]:
    lengths, remaining = [], budget
    while remaining > 0 and rng.random() < self.continue_prob(remaining):
      length = min(int(rng.geometric(self.p)), self.span_max)
      lengths.append(length)
      remaining -= length
    return lengths

  def select(self, units: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    num_units = len(units)
    budget = _budget(self.rate, num_units)
    lengths = self.draw_lengths(budget, rng)
    # Spans need a gap between them; drop the last ones if a row is too short.
    while lengths and sum(lengths) + len(lengths) - 1 > num_units:
      lengths.pop()
    if not lengths:
      return np.zeros(0, np.int64)
    free = num_units - sum(lengths) - (len(lengths) - 1)
    # Uniform over layouts: k sorted draws from free + k slots (stars and bars).
    extra_before = np.sort(
        rng.choice(free + len(lengths), len(lengths), replace=False)
    ) - np.arange(len(lengths))
    chosen, offset = [], 0
    for i, length in enumerate(lengths):
      start = extra_before[i] + offset + i
      chosen.extend(units[start : start + length])
      offset += length
    return np.concatenate(chosen)


def _corrupt(
    tokens_BxL, positions_BxP, weights_BxP, rng, tokenizer, config: MaskingConfig
) -> np.ndarray:
  """80% [MASK], 10% random non-special token, 10% unchanged."""
  masked_BxL = tokens_BxL.astype(np.int32, copy=True)
  rows, cols = np.nonzero(weights_BxP)
  where = positions_BxP[rows, cols]
  draw = rng.random(len(where))
  to_mask = draw < config.mask_prob
  to_random = (draw >= config.mask_prob) & (draw < config.mask_prob + config.random_prob)
  masked_BxL[rows[to_mask], where[to_mask]] = tokenizer.mask_id
  normal = tokenizer.normal_ids()
  masked_BxL[rows[to_random], where[to_random]] = rng.choice(normal, size=int(to_random.sum()))
  return masked_BxL
