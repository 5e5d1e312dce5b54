"""Decoder-only rows of pairs, for a causal LM trained to translate or summarize (docs/pairs.md):
each pair is `source [SEP] target [EOS]`, and whole pairs are packed one after another into rows.

Rows. A split's pairs, in stored order, fill rows of T = seq_len + 1 tokens greedily: a pair goes
into the current row if its tokens fit what is left of it, else it starts the next row. A pair
longer than T alone is cut to fit, tokens taken from its longer side first (its SEP and EOS
kept; `fit`), and the training pairs cut are counted in one note when training starts. The rows
are the units a `batches.Reading` reads: training reads epochs of seeded permutations of them by
position (exact resume, any mesh, a global shuffle), evaluation one pass in stored order. Which
pairs share a row is fixed by the stored order; attention never crosses them, so it changes no
pair's loss.

A row is what the causal LM makes of documents (`batches.clm_rows`): inputs its first seq_len
tokens, targets its last, each pair its own segment with positions from 0, and a target weighted
only where it continues its own pair. loss_on="target" (the default) weights only the targets of
the target side and its EOS, so the model learns to write targets, not sources; "all" weights
every target of the pair, as a causal LM on documents.
"""

from typing import Iterator

import numpy as np

from vit_jax import errors
from vit_jax.config import defaults
from vit_jax.data.text import batches
from vit_jax.data.text import seq2seq_batches


def require_tokens(tokenizer) -> None:
  """A ConfigError unless the tokenizer has the separator and the end token a pair row needs."""
  missing = [name for name in ("sep", "eos") if getattr(tokenizer, f"{name}_id") is None]
  if missing:
    raise errors.ConfigError(
        f"the {tokenizer.kind!r} tokenizer has no {' or '.join(missing)} token, which a row of "
        "pairs (source [SEP] target [EOS]) needs; use a tokenizer this trainer trains "
        "(--config.tokenizer.kind), which has both."
    )


def fit(source: int, target: int, row_tokens: int) -> tuple[int, int]:
  """The lengths a pair of `source` and `target` tokens keeps in a row of `row_tokens` tokens
  (with its SEP and EOS): cut from the longer side first where it does not fit."""
  if row_tokens - 2 < 2:
    raise errors.ConfigError(
        f"--config.seq_len={row_tokens - 1} leaves no room for a pair's source and target "
        "beside its [SEP] and [EOS]; give at least 3."
    )
  return tuple(batches.truncate_longest_first([source, target], row_tokens - 2))


class PairRows:
  """The rows of a split's pairs: row r holds pairs [starts[r], starts[r + 1]), each keeping
  `source_N` and `target_N` of its tokens. Built from every shard's offsets (16 bytes a pair)."""

  def __init__(self, split, row_tokens: int):
    self.source_N, self.target_N = split.lengths("source"), split.lengths("target")
    self.cut = 0
    for i in np.flatnonzero(self.source_N + self.target_N + 2 > row_tokens):
      kept = fit(int(self.source_N[i]), int(self.target_N[i]), row_tokens)
      self.source_N[i], self.target_N[i] = kept
      self.cut += 1
    starts, used = [0], 0
    for i, size in enumerate((self.source_N + self.target_N + 2).tolist()):
      if used + size > row_tokens:
        starts.append(i)
        used = 0
      used += size
    if len(self.source_N):
      starts.append(len(self.source_N))
    self.starts = np.asarray(starts, np.int64)
    self.rows = len(starts) - 1


def pair_batches(
    dataset, tokenizer, *, batch_size: int, seq_len: int, loss_on: str = "target", **reading
) -> Iterator[batches.Batch]:
  """Causal-LM batches of packed pairs (the keys of `batches.clm_batches`, all (B, L)).
  `reading` are batches.Reading's."""
  if loss_on not in defaults.CHOICES["loss_on"]:
    choices = ", ".join(defaults.CHOICES["loss_on"])
    raise errors.ConfigError(f"--config.loss_on={loss_on!r} is not one of {choices}.")
  require_tokens(tokenizer)
  reading = batches.Reading(dataset, **reading)
  split = reading.open("pairs", tokenizer)
  row_tokens = seq_len + 1
  rows = PairRows(split, row_tokens)
  if reading.train and reading.shard == 0:
    limit = f"--config.seq_len={seq_len} (with [SEP] and [EOS])"
    seq2seq_batches.say_cut(rows.cut, split.num_examples, limit)
  pad_id = tokenizer.pad_id if tokenizer.pad_id is not None else 0
  for _, units in reading.units(rows.rows, batch_size):
    tokens_BxT = np.full((len(units), row_tokens), pad_id, np.int32)
    doc_BxT = np.full((len(units), row_tokens), -1, np.int64)
    target_BxT = np.zeros((len(units), row_tokens), bool)
    real = units >= 0
    first_B, last_B = rows.starts[units[real]], rows.starts[units[real] + 1]
    pairs_N = np.concatenate([np.arange(a, b) for a, b in zip(first_B, last_B)] or [[]])
    pairs_N = pairs_N.astype(np.int64)
    zeros_N = np.zeros_like(pairs_N)
    sources = split.spans("source", pairs_N, zeros_N, rows.source_N[pairs_N])
    targets = split.spans("target", pairs_N, zeros_N, rows.target_N[pairs_N])
    at = 0
    for b, count in zip(np.flatnonzero(real), last_B - first_B):
      column = 0
      for _ in range(count):
        source, target = sources[at], targets[at]
        pair_T = np.concatenate([source, [tokenizer.sep_id], target, [tokenizer.eos_id]])
        end = column + len(pair_T)
        tokens_BxT[b, column:end] = pair_T
        doc_BxT[b, column:end] = pairs_N[at]
        target_BxT[b, column + len(source) + 1 : end] = True  # the target side and its EOS
        column, at = end, at + 1
    counted_BxT = target_BxT if loss_on == "target" else None
    yield batches.clm_rows(tokens_BxT, doc_BxT, pad_id, counted_BxT)
