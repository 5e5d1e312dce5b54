"""Numpy batches for causal LM, masked LM and sequence classification, read by index.

Every function takes a token split (vit_jax/data/text/token_store.py: a prepared store's, or text
tokenized in memory; a dataset name or a list of examples is opened with `datasets.as_split`) and
returns an iterator of dicts of numpy arrays of B = batch_size rows: input shard `shard` of
`shard_count`.

train=True: endless. Row r of shard i at step s is training position u = (s * n + i) * B + r
(n = shard_count), and position u reads unit `order.epoch_units(u)`: epochs of seeded
permutations of the units (causal LM: windows of the document stream; masked LM: chunks of
documents; classification: examples). Masking and next-sentence draws are seeded by u too. So
a batch is a function of (seed, step, shard) alone: `start_step=k` reads exactly batch k with
nothing skipped or replayed, and the global batch (the shards' batches in order) is the same for
any shard_count.
`mixed_clm_batches` reads a weighted mixture of token stores so too: each position's row from the
source (and the row of it) that vit_jax/data/text/mixture.py gives that position.
train=False: one pass over the units in stored order, shard i taking units i, i + n, i + 2n...;
the last batch is padded with rows of zero weight (all-pad rows with input_mask 0).
"""

import dataclasses
from typing import Any, Iterator, Optional

import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax.data.text import datasets
from vit_jax.data.text import order
from vit_jax.data.text import token_store as stores

Batch = dict[str, np.ndarray]
# Keys separating the random streams drawn from one seed.
_MASK_STREAM, _NSP_STREAM, _EVAL_MASK_STREAM = 1, 2, 4
_NSP_TRIES = 10  # draws of a random other document before a row keeps its true continuation


@dataclasses.dataclass(frozen=True)
class Reading:
  """What every batch function shares: which units this shard reads, and in what order.

  The batch functions take these fields as keyword arguments (`dataset` positionally); the
  module docstring says what `train` and `start_step` do.
  """

  dataset: Any  # a stores.Split, a dataset name (vit_jax.data.text.datasets), or examples
  split: str = "train"
  train: bool = True
  seed: int = 0
  start_step: int = 0
  token_store: Optional[str] = None  # the run's token store (a dataset name is read from it)
  data_dir: Optional[str] = None
  shard: int = 0
  shard_count: int = 1
  read_options: Optional[data.ReadOptions] = None  # how files and an hf: dataset are read

  def open(self, kind: str, tokenizer) -> stores.Split:
    return datasets.as_split(
        self.dataset,
        kind,
        tokenizer,
        split=self.split,
        token_store_path=self.token_store,
        data_dir=self.data_dir,
        read_options=self.read_options,
    )

  def units(self, units_per_epoch: int, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(keys, units) of each batch's rows. Training: the rows' positions, and the units the
    epochs' permutations put there. Evaluation: this shard's units in stored order, as both
    (-1 pads the last batch)."""
    order.check_shard(self.shard, self.shard_count)
    if self.train:
      if units_per_epoch < 1:
        raise errors.DataError(
            "The dataset yields nothing to train on (every example is empty or too short)."
        )
      step = self.start_step
      while True:
        positions = order.shard_positions(step, rows, self.shard, self.shard_count)
        yield positions, order.epoch_units(positions, units_per_epoch, self.seed)
        step += 1
    mine = np.arange(self.shard, units_per_epoch, self.shard_count, dtype=np.int64)
    for i in range(0, len(mine), rows):
      chunk = np.pad(mine[i : i + rows], (0, rows - len(mine[i : i + rows])), constant_values=-1)
      yield chunk, chunk


def _pad_id(tokenizer) -> int:
  return tokenizer.pad_id if tokenizer.pad_id is not None else 0


# ---- Causal LM: windows of the document stream -----------------------------------------------


class DocumentStream:
  """A split's documents one after another, each followed by `separator` (EOS) unless it is
  None: a token sequence read by position. Position p lies in document d of shard k where
  p - shard_starts[k] is in [offsets[d] + d, offsets[d + 1] + d + 1) (with a separator)."""

  def __init__(self, split: stores.Split, separator: Optional[int], field: str = "text"):
    self.split, self.separator, self.field = split, separator, field
    self.gap = 0 if separator is None else 1
    lengths = [s.tokens[field].length + self.gap * s.examples for s in split.shards]
    self.shard_starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    self.length = int(self.shard_starts[-1])

  def _document_at(self, offsets: np.ndarray, position: int) -> int:
    """The document holding local position `position` (the last d with offsets[d] + gap d <=
    position): a binary search over the shard's offsets, which may be a memory map."""
    low, high = 0, len(offsets) - 2
    while low < high:
      mid = (low + high + 1) // 2
      if offsets[mid] + self.gap * mid <= position:
        low = mid
      else:
        high = mid - 1
    return low

  def read(self, starts_R: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, document) int32/int64 (R, length) of the windows [start, start + length) of the
    stream; positions past its end hold token -1 and document -1. A document is its global
    example index."""
    pieces = []  # (row, column, shard, first doc, local start, local end, offsets slice)
    for row, start in enumerate(np.asarray(starts_R, np.int64)):
      position, end = int(start), min(int(start) + length, self.length)
      while position < end:
        shard = int(np.searchsorted(self.shard_starts, position, side="right") - 1)
        local = position - int(self.shard_starts[shard])
        stop = min(
            local + end - position, int(self.shard_starts[shard + 1] - self.shard_starts[shard])
        )
        offsets = self.split.offsets(shard, self.field)
        first, last = self._document_at(offsets, local), self._document_at(offsets, stop - 1)
        pieces.append(
            (row, position - int(start), shard, first, local, stop, offsets[first : last + 2])
        )
        position += stop - local
    reads, layouts = [], []
    for row, column, shard, first, local, stop, offsets in pieces:
      p_N = np.arange(local, stop, dtype=np.int64)
      starts_D = offsets[:-1] + self.gap * np.arange(first, first + len(offsets) - 1)
      doc_N = first + np.searchsorted(starts_D, p_N, side="right") - 1
      real_N = p_N - self.gap * doc_N
      is_separator_N = real_N >= offsets[doc_N - first + 1]
      real_N = np.where(is_separator_N, -1, real_N)
      kept = real_N[~is_separator_N]
      begin, finish = (int(kept.min()), int(kept.max()) + 1) if len(kept) else (0, 0)
      reads.append((self.split.shards[shard].tokens[self.field], begin, finish))
      layouts.append((row, column, shard, doc_N, real_N - begin, is_separator_N))
    tokens_RxL = np.full((len(starts_R), length), -1, np.int32)
    doc_RxL = np.full((len(starts_R), length), -1, np.int64)
    for (row, column, shard, doc_N, index_N, is_separator_N), got in zip(
        layouts, stores.read_ranges(reads)
    ):
      values_N = np.where(
          is_separator_N, self.separator or 0, got[np.maximum(index_N, 0)] if len(got) else 0
      )
      tokens_RxL[row, column : column + len(doc_N)] = values_N
      doc_RxL[row, column : column + len(doc_N)] = self.split.starts[shard] + doc_N
    return tokens_RxL, doc_RxL


def clm_batches(
    dataset, tokenizer, *, batch_size: int, seq_len: int, add_eos: bool = True, **reading
) -> Iterator[Batch]:
  """Causal-LM batches: windows of seq_len + 1 tokens of the document stream (documents one
  after another, each ended by EOS when add_eos and the tokenizer has one).

  Window w is stream positions [w L, w L + L + 1) (L = seq_len; the last window of the stream
  padded): inputs its first L tokens, targets its last L, so every token after the first is a
  target exactly once per epoch. Keys
  (all (B, L)): inputs, targets, segment_ids, positions int32; weights float32. Each document
  (or the part of one inside the window) is its own segment, with positions counted from 0, and
  attention never crosses documents; a target is weighted 1 where it continues its input's
  document (the model learns to end a text: the last real token's target is EOS) and 0 across
  documents and on padding.
  """
  reading = Reading(dataset, **reading)
  split = reading.open("documents", tokenizer)
  eos = tokenizer.eos_id if add_eos else None
  stream = DocumentStream(split, eos)
  pad_id = _pad_id(tokenizer)
  windows = -(-max(0, stream.length - 1) // seq_len)  # the last one padded
  for _, units in reading.units(windows, batch_size):
    starts_B = np.where(units >= 0, units * seq_len, stream.length)
    tokens_BxT, doc_BxT = stream.read(starts_B, seq_len + 1)
    yield clm_rows(tokens_BxT, doc_BxT, pad_id)


def mixed_clm_batches(
    mixture,
    tokenizer,
    *,
    batch_size: int,
    seq_len: int,
    split: str = "train",
    seed: int = 0,
    start_step: int = 0,
    shard: int = 0,
    shard_count: int = 1,
    add_eos: bool = True,
) -> Iterator[Batch]:
  """Endless causal-LM training batches of a weighted mixture of token stores (a
  data/text/mixture.py Mixture), as `clm_batches` yields them: the schedule gives each training
  position its source and its row of that source, and that row is a window of the source's own
  epochs (keyed by its name). A row holds one source's tokens."""
  splits = [
      datasets.open_split(name, split, kind="documents", tokenizer=tokenizer, token_store_path=path)
      for name, path in mixture.stores.items()
  ]
  streams = [DocumentStream(s, tokenizer.eos_id if add_eos else None) for s in splits]
  windows = [-(-max(0, stream.length - 1) // seq_len) for stream in streams]
  keys = mixture.epoch_keys()
  schedule = mixture.schedule(batch_size * shard_count, seed)
  pad_id = _pad_id(tokenizer)
  order.check_shard(shard, shard_count)
  step = start_step
  while True:
    positions = order.shard_positions(step, batch_size, shard, shard_count)
    source_B, row_B = schedule.locate(positions)
    tokens_BxT = np.empty((batch_size, seq_len + 1), np.int32)
    doc_BxT = np.empty((batch_size, seq_len + 1), np.int64)
    for k in np.unique(source_B):
      at = source_B == k
      if windows[k] < 1:
        raise errors.DataError(
            f"mixture source {mixture.names[k]!r} ({mixture.stores[mixture.names[k]]}) yields "
            f"nothing to train on in its {split!r} split (it is empty)."
        )
      units = order.epoch_units(row_B[at], windows[k], seed, keys[k])
      tokens_BxT[at], doc_BxT[at] = streams[k].read(units * seq_len, seq_len + 1)
    yield clm_rows(tokens_BxT, doc_BxT, pad_id)
    step += 1


def clm_rows(
    tokens_BxT: np.ndarray,
    doc_BxT: np.ndarray,
    pad_id: int,
    counted_BxT: Optional[np.ndarray] = None,
) -> Batch:
  """Inputs and targets of windows of T = L + 1 tokens, segments from their documents (-1:
  padding). `counted_BxT`: which tokens the loss may be on as targets (None: all), e.g. a pair's
  target side (vit_jax/data/text/packed_pairs.py)."""
  doc_BxL = doc_BxT[:, :-1]
  real_BxL = doc_BxL >= 0
  new_segment_BxL = np.ones(doc_BxL.shape, bool)
  new_segment_BxL[:, 1:] = doc_BxL[:, 1:] != doc_BxL[:, :-1]
  segment_ids_BxL = np.where(real_BxL, np.cumsum(new_segment_BxL, axis=1), 0).astype(np.int32)
  column_L = np.arange(doc_BxL.shape[1])
  segment_start_BxL = np.maximum.accumulate(np.where(new_segment_BxL, column_L, 0), axis=1)
  positions_BxL = np.where(real_BxL, column_L - segment_start_BxL, 0).astype(np.int32)
  weights_BxL = real_BxL & (doc_BxT[:, 1:] == doc_BxL)
  if counted_BxT is not None:
    weights_BxL &= counted_BxT[:, 1:]
  weights_BxL = weights_BxL.astype(np.float32)
  tokens_BxT = np.where(doc_BxT >= 0, tokens_BxT, pad_id).astype(np.int32)
  return {
      "inputs": tokens_BxT[:, :-1],
      "targets": np.where(weights_BxL > 0, tokens_BxT[:, 1:], pad_id).astype(np.int32),
      "segment_ids": segment_ids_BxL,
      "positions": positions_BxL,
      "weights": weights_BxL,
  }


# ---- Masked LM: chunks of documents -----------------------------------------------------------


class ChunkIndex:
  """Rows of masked LM: each document cut into chunks of `chunk` tokens, numbered one after
  another over the split (with `nsp`, a chunk needs at least 2 tokens to split into A and B).
  Built from every shard's offsets: 8 bytes per document, the same at any step."""

  def __init__(self, split: stores.Split, chunk: int, nsp: bool, field: str = "text"):
    self.split, self.chunk, self.field = split, chunk, field
    lengths_D = split.lengths(field)
    full_D, rest_D = np.divmod(lengths_D, chunk)
    rows_D = full_D + (rest_D >= 2 if nsp else rest_D > 0)
    self.row_starts = np.concatenate([[0], np.cumsum(rows_D)]).astype(np.int64)
    self.rows = int(self.row_starts[-1])
    self.lengths_D = lengths_D

  def locate(self, row_N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(document, chunk within it) of each row."""
    doc_N = np.searchsorted(self.row_starts, row_N, side="right") - 1
    return doc_N, row_N - self.row_starts[doc_N]


def mlm_batches(
    dataset,
    tokenizer,
    *,
    batch_size: int,
    seq_len: int,
    masking_config=None,
    nsp: bool = False,
    **reading,
) -> Iterator[Batch]:
  """Masked-LM batches; masking is redrawn at every training position (seeded by it).

  Rows are `[CLS] chunk [SEP]`, chunks of one document (L - 2 tokens), or with nsp
  `[CLS] A [SEP] B [SEP]`: a chunk of L - 3 tokens cut in two at a random point, B replaced,
  half the time, by a span of the same length of a random other document of the split
  (nsp_label 1; 0 when B continues A: the labels of BERT and Hugging Face).
  Keys: tokens, token_type_ids, input_mask, positions int32 (B, L); masked_positions,
  masked_targets int32 (B, P); masked_weights float32 (B, P), P =
  masking_config.predictions(L); nsp_label int32 (B,) with nsp.
  masking_config: a masking.MaskingConfig (default: BERT's 15%).
  """
  # pylint: disable-next=g-import-not-at-top  (a causal-LM run loads no masking)
  from vit_jax.data.text import masking

  masking_config = masking.MaskingConfig() if masking_config is None else masking_config
  tokenizer.require("cls", "sep", "mask")
  reading = Reading(dataset, **reading)
  chunk = seq_len - 3 if nsp else seq_len - 2
  if chunk < 2:
    raise errors.ConfigError(f"seq_len={seq_len} is too short for masked LM rows.")
  split = reading.open("documents", tokenizer)
  index = ChunkIndex(split, chunk, nsp)
  pad_row = _pad_bert_row(tokenizer, seq_len, nsp)
  streams = (_MASK_STREAM, _NSP_STREAM) if reading.train else (_EVAL_MASK_STREAM, _NSP_STREAM + 8)
  for positions, units in reading.units(index.rows, batch_size):
    real = units >= 0
    doc_B, piece_B = index.locate(np.where(real, units, 0))
    pieces = split.spans("text", doc_B, piece_B * chunk, (piece_B + 1) * chunk)
    keys_B = positions  # eval: the units themselves, so every pass masks alike
    if nsp:
      firsts, seconds, labels_B = _nsp_pairs(
          split, index, doc_B, pieces, keys_B, reading.seed, streams[1]
      )
      batch = _bert_rows(tokenizer, seq_len, firsts, seconds)
      batch["nsp_label"] = labels_B
    else:
      batch = _bert_rows(tokenizer, seq_len, pieces)
    for key, value in batch.items():  # eval's padding rows: all pad, masked nowhere
      value[~real] = pad_row[key]
    batch.update(
        masking.mask_rows(
            batch["tokens"], keys_B, reading.seed, streams[0], tokenizer, masking_config
        )
    )
    yield batch


def _nsp_pairs(split, index, doc_B, pieces, keys_B, seed, stream):
  """(A, B, nsp_label int32 (B,)) of `[CLS] A [SEP] B [SEP]` rows: each piece cut at a random
  point; B replaced, with probability 1/2, by a span of as many tokens of a random other
  non-empty document (label 1). Each row's draws are counter-based uniforms of (seed, stream, its
  key)."""
  draws_BxD = order.uniform(seed, stream, keys_B, 2 + 2 * _NSP_TRIES)
  cuts, others = [], {}  # others: row -> (document, first token, end token)
  for b, (doc, piece, draws) in enumerate(zip(doc_B, pieces, draws_BxD)):
    cut = 1 + int(draws[0] * (len(piece) - 1)) if len(piece) >= 2 else len(piece)
    cuts.append(cut)
    if split.num_examples > 1 and draws[1] < 0.5:
      for t in range(_NSP_TRIES):
        candidate = int(draws[2 + 2 * t] * (split.num_examples - 1))
        candidate += candidate >= doc  # any document but this one
        if index.lengths_D[candidate] > 0:
          room = int(index.lengths_D[candidate]) - (len(piece) - cut)
          start = int(draws[3 + 2 * t] * max(1, room + 1))
          others[b] = (candidate, start, start + len(piece) - cut)
          break
  spans = (
      dict(zip(others, split.spans("text", *map(np.array, zip(*others.values())))))
      if others
      else {}
  )
  firsts = [piece[:cut] for piece, cut in zip(pieces, cuts)]
  seconds = [spans.get(b, piece[cut:]) for b, (piece, cut) in enumerate(zip(pieces, cuts))]
  labels_B = np.array([b in others for b in range(len(pieces))], np.int32)
  return firsts, seconds, labels_B


def _bert_rows(tokenizer, seq_len: int, firsts, seconds=None) -> dict[str, np.ndarray]:
  """`[CLS] first [SEP]` (or `[CLS] first [SEP] second [SEP]`) per row, padded to seq_len:
  tokens, token_type_ids, input_mask, positions int32 (B, L)."""
  rows = len(firsts)
  tokens_BxL = np.full((rows, seq_len), _pad_id(tokenizer), np.int32)
  row_B = np.arange(rows)
  end_B = np.zeros(rows, np.int64)  # where the next part starts
  type_start_B = None
  for part, segment in ((firsts, 0), *(((seconds, 1),) if seconds is not None else ())):
    if segment == 0:
      tokens_BxL[:, 0] = tokenizer.cls_id
      end_B += 1
    else:
      type_start_B = end_B.copy()
    lengths_B = np.array([len(p) for p in part], np.int64)
    if lengths_B.sum():
      flat = np.concatenate([np.asarray(p, np.int32) for p in part])
      at = np.repeat(end_B - np.concatenate([[0], np.cumsum(lengths_B)[:-1]]), lengths_B)
      tokens_BxL[np.repeat(row_B, lengths_B), at + np.arange(len(flat))] = flat
    tokens_BxL[row_B, end_B + lengths_B] = tokenizer.sep_id
    end_B += lengths_B + 1
  column_L = np.arange(seq_len)
  input_mask_BxL = (column_L[None] < end_B[:, None]).astype(np.int32)
  types_BxL = np.zeros((rows, seq_len), np.int32)
  if type_start_B is not None:
    types_BxL = ((column_L[None] >= type_start_B[:, None]) & (input_mask_BxL > 0)).astype(np.int32)
  return {
      "tokens": tokens_BxL,
      "token_type_ids": types_BxL,
      "input_mask": input_mask_BxL,
      "positions": np.tile(column_L.astype(np.int32), (rows, 1)),
  }


def _bert_row(
    tokenizer, seq_len: int, first: np.ndarray, second: Optional[np.ndarray] = None
) -> dict[str, np.ndarray]:
  """`_bert_rows` of one row."""
  batch = _bert_rows(tokenizer, seq_len, [first], None if second is None else [second])
  return {k: v[0] for k, v in batch.items()}


def _pad_bert_row(tokenizer, seq_len: int, nsp: bool) -> dict[str, np.ndarray]:
  row = {
      "tokens": np.full(seq_len, _pad_id(tokenizer), np.int32),
      "token_type_ids": np.zeros(seq_len, np.int32),
      "input_mask": np.zeros(seq_len, np.int32),
      "positions": np.arange(seq_len, dtype=np.int32),
  }
  if nsp:
    row["nsp_label"] = np.int32(0)
  return row


# ---- Classification: labeled examples ---------------------------------------------------------


def cls_batches(dataset, tokenizer, *, batch_size: int, seq_len: int, **reading) -> Iterator[Batch]:
  """Classification batches: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`.

  Keys: tokens, token_type_ids, input_mask int32 (B, L); label int32 (B,).
  Eval padding rows have input_mask all 0 (and label 0): count a row only
  where input_mask[:, 0] == 1.
  """
  tokenizer.require("cls", "sep")
  reading = Reading(dataset, **reading)
  split = reading.open("labeled", tokenizer)
  pad_row = {**_pad_bert_row(tokenizer, seq_len, False), "label": np.int32(0)}
  for _, units in reading.units(split.num_examples, batch_size):
    real = units >= 0
    examples = np.where(real, units, 0)
    segments = [split.examples(field, examples) for field in split.fields]
    labels = split.labels(examples)
    rows = [
        _classification_row(tokenizer, seq_len, [s[b] for s in segments], labels[b])
        if real[b]
        else pad_row
        for b in range(len(units))
    ]
    yield {k: np.stack([row[k] for row in rows]) for k in pad_row if k != "positions"}


def _classification_row(tokenizer, seq_len: int, segments, label: int):
  room = seq_len - 1 - len(segments)  # CLS, and one SEP per segment.
  lengths = truncate_longest_first([len(s) for s in segments], room)
  segments = [s[:n] for s, n in zip(segments, lengths)]
  row = _bert_row(tokenizer, seq_len, *segments)
  row["label"] = np.int32(label)
  return row


def truncate_longest_first(lengths: list[int], room: int) -> list[int]:
  """Lengths fitting `room`, taking tokens from the longer segment first."""
  if room < len(lengths):
    raise errors.ConfigError("seq_len is too short for the [CLS]/[SEP] tokens.")
  if len(lengths) == 1:
    return [min(lengths[0], room)]
  first, second = lengths
  if first + second <= room:
    return [first, second]
  half = room // 2
  if first <= half:
    return [first, room - first]
  if second <= room - half:
    return [room - second, second]
  return [half, room - half]
