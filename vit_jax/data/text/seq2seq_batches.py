"""Numpy batches for encoder-decoder training on (source, target) pairs.

Datasets: the offline toy tasks ('toy_reverse', 'toy_number_words'), TFDS translation
('wmt14_translate/de-en', German -> English, from its token store), files: and hf: datasets read
as pairs (--config.source_key, --config.target_key), or a list of pairs. Training/eval semantics
(endless by index from start_step, or one padded pass) are those of vit_jax.data.text.batches,
with the examples as units.
"""

from typing import Iterator

import numpy as np

from vit_jax.data.text import batches as text_batches


def seq2seq_batches(
    dataset, tokenizer, *, batch_size: int, input_len: int, target_len: int, **reading
) -> Iterator[text_batches.Batch]:
  """Keys: inputs, input_mask int32 (B, Li); decoder_inputs, targets int32
  (B, Lt); weights float32 (B, Lt). `reading` are text_batches.Reading's.

  Sources and targets end with EOS (if the tokenizer has one): a longer one is cut to
  input_len / target_len tokens, its EOS kept, and the training pairs cut are counted in one note
  when training starts. decoder_inputs is the target shifted right behind BOS, or behind PAD for
  tokenizers without BOS (the T5 convention).
  """
  reading = text_batches.Reading(dataset, **reading)
  split = reading.open("pairs", tokenizer)
  if reading.train and reading.shard == 0:
    eos = int(tokenizer.eos_id is not None)
    cut = (split.lengths("source") + eos > input_len) | (split.lengths("target") + eos > target_len)
    limits = f"--config.input_len={input_len} or --config.target_len={target_len} (with [EOS])"
    say_cut(int(cut.sum()), split.num_examples, limits)
  empty = np.zeros(0, np.int32)
  pad_row = _row(tokenizer, input_len, target_len, empty, empty, pad=True)
  for _, units in reading.units(split.num_examples, batch_size):
    real = units >= 0
    examples = np.where(real, units, 0)
    sources, targets = (split.examples(field, examples) for field in ("source", "target"))
    rows = [
        _row(tokenizer, input_len, target_len, src, tgt) if ok else pad_row
        for src, tgt, ok in zip(sources, targets, real)
    ]
    yield {k: np.stack([row[k] for row in rows]) for k in pad_row}


def say_cut(cut: int, pairs: int, limits: str) -> None:
  """One line, where training pairs are longer than the run's lengths: how many are cut to fit
  (docs/pairs.md)."""
  if cut:
    print(
        f"note: {cut:,} of the {pairs:,} training pairs are longer than {limits}: each is cut to "
        "fit (docs/pairs.md).",
        flush=True,
    )


def _row(
    tokenizer, input_len: int, target_len: int, src: np.ndarray, tgt: np.ndarray, pad: bool = False
) -> dict[str, np.ndarray]:
  pad_id = tokenizer.pad_id if tokenizer.pad_id is not None else 0
  start_id = tokenizer.bos_id if tokenizer.bos_id is not None else pad_id
  src = _with_eos(tokenizer, src, input_len, pad)
  tgt = _with_eos(tokenizer, tgt, target_len, pad)
  inputs_Li = np.full(input_len, pad_id, np.int32)
  inputs_Li[: len(src)] = src
  input_mask_Li = (np.arange(input_len) < len(src)).astype(np.int32)
  targets_Lt = np.full(target_len, pad_id, np.int32)
  targets_Lt[: len(tgt)] = tgt
  decoder_inputs_Lt = np.full(target_len, pad_id, np.int32)
  if not pad:
    decoder_inputs_Lt[0] = start_id
    decoder_inputs_Lt[1 : len(tgt)] = tgt[:-1]
  weights_Lt = (np.arange(target_len) < len(tgt)).astype(np.float32)
  return {
      "inputs": inputs_Li,
      "input_mask": input_mask_Li,
      "decoder_inputs": decoder_inputs_Lt,
      "targets": targets_Lt,
      "weights": weights_Lt,
  }


def _with_eos(tokenizer, ids: np.ndarray, max_len: int, pad: bool):
  ids = np.asarray(ids, np.int32)
  if pad:
    return ids[:0]
  if tokenizer.eos_id is None:
    return ids[:max_len]
  return np.append(ids[: max_len - 1], np.int32(tokenizer.eos_id))
