"""Text in, text out through a seq2seq model: what `vit_jax.generate --input_file` and the decoding
evaluator (vit_jax/evaluate/decoding.py) share, so that both decode the same sources alike.

Sources are token ids, batched `batch_size` rows at a time, each row cut to `input_len` tokens as
training cuts it (its EOS kept) and padded to `input_len`, the last batch filled with empty rows:
every batch has one shape, so the encoder and the decoder step compile once per call. Each batch is
decoded on the device by `sampling.seq2seq_decode` (greedy, or beam search with GNMT's length
penalty) and detokenized; a line break in a decoded text becomes a space, so that one output line
is one source.
"""

from typing import Sequence

import numpy as np

from vit_jax.models import sampling


def start_id(tokenizer) -> int:
  """The decoder's first input: BOS, or PAD for tokenizers without one (the T5 convention)."""
  return tokenizer.bos_id if tokenizer.bos_id is not None else pad_id(tokenizer)


def pad_id(tokenizer) -> int:
  return tokenizer.pad_id if tokenizer.pad_id is not None else 0


def encoder_inputs(tokenizer, sources: Sequence[Sequence[int]], input_len: int):
  """(inputs, input_mask), int32 (B, input_len): each source cut to `input_len` tokens with its
  EOS (if the tokenizer has one), as seq2seq_batches makes training's inputs."""
  inputs_BxS = np.full((len(sources), input_len), pad_id(tokenizer), np.int32)
  mask_BxS = np.zeros_like(inputs_BxS)
  for i, ids in enumerate(sources):
    ids = list(ids)
    if tokenizer.eos_id is not None:
      ids = ids[: input_len - 1] + [tokenizer.eos_id]
    ids = ids[:input_len]
    inputs_BxS[i, : len(ids)], mask_BxS[i, : len(ids)] = ids, 1
  return inputs_BxS, mask_BxS


def one_line(text: str) -> str:
  return " ".join(text.splitlines())


def translate(
    model_config: dict,
    params,
    tokenizer,
    sources: Sequence[Sequence[int]],
    *,
    input_len: int,
    batch_size: int,
    max_new_tokens: int,
    beam_size: int,
    length_penalty: float,
) -> list[str]:
  """The decoded text of each source (token ids), one line each."""
  outputs = []
  for first in range(0, len(sources), batch_size):
    chunk = list(sources[first : first + batch_size])
    real = len(chunk)
    chunk += [[]] * (batch_size - real)  # the last batch keeps the shape
    inputs_BxS, mask_BxS = encoder_inputs(tokenizer, chunk, input_len)
    if tokenizer.eos_id is None:
      mask_BxS[real:, 0] = 1  # a filler row attends to something
    decoded = sampling.seq2seq_decode(
        model_config,
        params,
        inputs_BxS,
        mask_BxS,
        max_new_tokens=max_new_tokens,
        start_id=start_id(tokenizer),
        eos_id=tokenizer.eos_id,
        beam_size=beam_size,
        length_penalty=length_penalty,
    )
    outputs += [one_line(tokenizer.decode(ids)) for ids in decoded[:real]]
  return outputs
