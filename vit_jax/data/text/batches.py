"""Numpy batches for causal LM, masked LM and sequence classification.

Every function takes a dataset (a name from vit_jax.data.text.datasets, a source, or a
list of examples) and a tokenizer, and returns an iterator of dicts of numpy
arrays with B = batch_size rows per process.

train=True: infinite, shuffled by `seed`, deterministic. `start_step=k`
  yields exactly what batches k, k+1, ... of a fresh iterator would: the
  stream is skipped by counting units (tokens for causal LM, rows otherwise)
  without building the skipped rows, and all randomness (masking, NSP) is
  seeded by step or row index rather than drawn from a running generator.
train=False: one pass in stored order; the last batch is padded with rows of
  zero weight (all-pad rows with input_mask 0), and `num_batches` pads further
  so all processes run the same number of eval steps.
"""

import dataclasses
import functools
from typing import Any, Iterator, Optional

import numpy as np

from vit_jax import errors
from vit_jax.data.text import datasets as text
from vit_jax.data.text import packing
from vit_jax.data.text import sources

Batch = dict[str, np.ndarray]
# Keys separating the random streams drawn from one seed.
_MASK_STREAM, _NSP_STREAM = 1, 2
# NSP negatives come from one of the next this-many documents of the stream.
NSP_LOOKAHEAD = 16


@dataclasses.dataclass(frozen=True)
class Stream:
  """What every batch function shares: which examples this process reads, and in what order.

  The batch functions take these fields as keyword arguments (`dataset` positionally); the
  module docstring says what `train`, `start_step` and `num_batches` do.
  """

  dataset: Any  # a name from vit_jax.data.text.datasets, a source, or a list of examples
  split: str = "train"
  train: bool = True
  seed: int = 0
  start_step: int = 0
  num_batches: Optional[int] = None
  data_dir: Optional[str] = None
  process_index: int = 0
  process_count: int = 1

  def examples(self, kind: str, encode, cost, skip: int) -> Iterator[tuple[Any, int]]:
    """(encoded example, units already consumed): resumed epochs after `skip` units, or one
    eval pass. `kind` is what a named dataset yields ("documents", "labeled" or "pairs")."""
    if isinstance(self.dataset, str):
      source = text.load_source(
          self.dataset,
          self.split,
          kind=kind,
          data_dir=self.data_dir,
          process_index=self.process_index,
          process_count=self.process_count,
          seed=self.seed,
      )
    else:
      source = sources.as_source(self.dataset, self.seed)
    encoded = source.map_batches(encode)
    if self.train:
      return sources.resume_stream(encoded, cost, skip)
    return ((example, 0) for example in encoded.single_pass())

  def batch(self, rows, batch_size: int, pad_row: Batch) -> Iterator[Batch]:
    """Training drops a partial last batch; eval pads it, and up to `num_batches`, with pad_row."""
    if self.train:
      return packing.batch_rows(rows, batch_size)
    return packing.batch_rows(rows, batch_size, pad_row, self.num_batches)


def clm_batches(
    dataset, tokenizer, *, batch_size: int, seq_len: int, add_eos: bool = True, **stream_args
) -> Iterator[Batch]:
  """Causal-LM batches of packed documents.

  Keys (all (B, L)): inputs, targets, segment_ids, positions int32; weights
  float32. Documents end with EOS (add_eos and the tokenizer has one), so
  the model learns to end a text: the last real token's target is EOS, and
  the last token of every segment (EOS, or the cut of a split document) has
  weight 0, as does padding.
  """
  stream = Stream(dataset, **stream_args)
  eos = [tokenizer.eos_id] if add_eos and tokenizer.eos_id is not None else []
  encode = functools.partial(encode_all, tokenizer, suffix=eos)
  skip = stream.start_step * batch_size * seq_len
  examples = stream.examples("documents", encode, cost=len, skip=skip)
  pad_id = _pad_id(tokenizer)
  rows = packing.pack_documents((doc[done:] for doc, done in examples), seq_len, pad_id)
  pad_row = {
      "tokens": np.full(seq_len, pad_id, np.int32),
      "segment_ids": np.zeros(seq_len, np.int32),
      "positions": np.zeros(seq_len, np.int32),
  }
  return (_clm_batch(batch, pad_id) for batch in stream.batch(rows, batch_size, pad_row))


def mlm_batches(
    dataset,
    tokenizer,
    *,
    batch_size: int,
    seq_len: int,
    masking_config=None,
    nsp: bool = False,
    **stream_args,
) -> Iterator[Batch]:
  """Masked-LM batches; masking is redrawn per step (seeded by step).

  Rows are `[CLS] chunk [SEP]`, chunks of one document (L - 2 tokens), or
  with nsp `[CLS] A [SEP] B [SEP]`, where B continues A (nsp_label 0) or,
  half the time, is a span of a nearby other document (nsp_label 1; the
  labels of BERT and Hugging Face).
  Keys: tokens, token_type_ids, input_mask, positions int32 (B, L);
  masked_positions, masked_targets int32 (B, P); masked_weights float32
  (B, P), P = masking_config.predictions(L); nsp_label int32 (B,) with nsp.
  masking_config: a masking.MaskingConfig (default: BERT's 15%).
  """
  # pylint: disable-next=g-import-not-at-top  (a causal-LM run loads no masking)
  from vit_jax.data.text import masking

  masking_config = masking.MaskingConfig() if masking_config is None else masking_config
  tokenizer.require("cls", "sep", "mask")
  stream = Stream(dataset, **stream_args)
  chunk = seq_len - 3 if nsp else seq_len - 2
  cost = functools.partial(_nsp_rows if nsp else _plain_rows, chunk)
  first_step = stream.start_step if stream.train else 0
  start_row = stream.start_step * batch_size
  examples = stream.examples("documents", functools.partial(encode_all, tokenizer), cost, start_row)
  if chunk < 2:
    raise errors.ConfigError(f"seq_len={seq_len} is too short for masked LM rows.")
  if nsp:
    rows = _nsp_row_stream(
        examples, tokenizer, seq_len, chunk, stream.seed, first_step * batch_size
    )
  else:
    rows = (
        _bert_row(tokenizer, seq_len, doc[i * chunk : (i + 1) * chunk])
        for doc, done in examples
        for i in range(done, cost(doc))
    )
  batches = stream.batch(rows, batch_size, _pad_bert_row(tokenizer, seq_len, nsp))
  mask = functools.partial(_mask_batch, tokenizer, masking_config, stream.seed)
  return (mask(step, batch) for step, batch in enumerate(batches, start=first_step))


def cls_batches(
    dataset, tokenizer, *, batch_size: int, seq_len: int, **stream_args
) -> Iterator[Batch]:
  """Classification batches: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`.

  Keys: tokens, token_type_ids, input_mask int32 (B, L); label int32 (B,).
  Eval padding rows have input_mask all 0 (and label 0): count a row only
  where input_mask[:, 0] == 1.
  """
  tokenizer.require("cls", "sep")
  stream = Stream(dataset, **stream_args)
  encode = functools.partial(_encode_labeled, tokenizer)
  examples = stream.examples(
      "labeled", encode, cost=lambda _: 1, skip=stream.start_step * batch_size
  )
  rows = (
      _classification_row(tokenizer, seq_len, segments, label) for (segments, label), _ in examples
  )
  pad_row = {**_pad_bert_row(tokenizer, seq_len, False), "label": np.int32(0)}
  batches = stream.batch(rows, batch_size, pad_row)
  return ({k: v for k, v in batch.items() if k != "positions"} for batch in batches)


# --- shared plumbing (also used by seq2seq_batches) --------------------------
def encode_all(tokenizer, texts: list[str], suffix=()) -> list[np.ndarray]:
  suffix = list(suffix)
  return [np.asarray(ids + suffix, dtype=np.int32) for ids in tokenizer.encode_batch(texts)]


def _pad_id(tokenizer) -> int:
  return tokenizer.pad_id if tokenizer.pad_id is not None else 0


def _clm_batch(batch: Batch, pad_id: int) -> Batch:
  targets, weights = packing.next_token_targets(batch["tokens"], batch["segment_ids"], pad_id)
  return {
      "inputs": batch["tokens"],
      "targets": targets,
      "segment_ids": batch["segment_ids"],
      "positions": batch["positions"],
      "weights": weights,
  }


# --- masked-LM rows ----------------------------------------------------------
def _mask_batch(tokenizer, config, seed: int, step: int, batch: Batch) -> Batch:
  """Masks `batch` by `config` (a masking.MaskingConfig), redrawn per step."""
  from vit_jax.data.text import masking  # pylint: disable=g-import-not-at-top

  rng = sources.seeded_rng(seed, _MASK_STREAM, step)
  batch.update(masking.mask_tokens(batch["tokens"], rng, tokenizer, config))
  return batch


def _plain_rows(chunk: int, doc: np.ndarray) -> int:
  return -(-len(doc) // chunk)


def _nsp_rows(chunk: int, doc: np.ndarray) -> int:
  # Chunks of at least 2 tokens can be split into A and B.
  full, rest = divmod(len(doc), chunk)
  return full + (rest >= 2)


def _nsp_row_stream(
    stream, tokenizer, seq_len: int, chunk: int, seed: int, first_row: int
) -> Iterator[dict[str, np.ndarray]]:
  row_index = first_row
  for (doc, done), ahead in sources.lookahead(stream, NSP_LOOKAHEAD):
    others = [d for d, _ in ahead if len(d) > 0]
    for i in range(done, _nsp_rows(chunk, doc)):
      rng = sources.seeded_rng(seed, _NSP_STREAM, row_index)
      row_index += 1
      piece = doc[i * chunk : (i + 1) * chunk]
      cut = int(rng.integers(1, len(piece)))
      first, second, is_random = piece[:cut], piece[cut:], 0
      if others and rng.random() < 0.5:
        other = others[rng.integers(len(others))]
        start = int(rng.integers(max(1, len(other) - len(second) + 1)))
        second, is_random = other[start : start + len(second)], 1
      row = _bert_row(tokenizer, seq_len, first, second)
      row["nsp_label"] = np.int32(is_random)
      yield row


def _bert_row(
    tokenizer, seq_len: int, first: np.ndarray, second: Optional[np.ndarray] = None
) -> dict[str, np.ndarray]:
  """`[CLS] first [SEP] (second [SEP])`, padded to seq_len."""
  cls, sep = [tokenizer.cls_id], [tokenizer.sep_id]
  parts = [cls, first, sep] + ([second, sep] if second is not None else [])
  ids = np.concatenate([np.asarray(p, np.int32) for p in parts])
  n_first = len(first) + 2
  row = _pad_bert_row(tokenizer, seq_len, False)
  row["tokens"][: len(ids)] = ids
  row["token_type_ids"][n_first : len(ids)] = 1
  row["input_mask"][: len(ids)] = 1
  return row


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


# --- classification rows -----------------------------------------------------
def _encode_labeled(tokenizer, examples: list) -> list:
  flat = [t for texts, _ in examples for t in texts]
  encoded = iter(encode_all(tokenizer, flat))
  return [(tuple(next(encoded) for _ in texts), label) for texts, label in examples]


def _classification_row(tokenizer, seq_len: int, segments, label: int):
  room = seq_len - 1 - len(segments)  # CLS, and one SEP per segment.
  lengths = _truncate_longest_first([len(s) for s in segments], room)
  segments = [s[:n] for s, n in zip(segments, lengths)]
  row = _bert_row(tokenizer, seq_len, *segments)
  row["label"] = np.int32(label)
  return row


def _truncate_longest_first(lengths: list[int], room: int) -> list[int]:
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
