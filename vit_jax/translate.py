"""Text in, text out through a model trained on pairs: what `vit_jax.generate --input_file` and the
decoding evaluator (vit_jax/evaluate/decoding.py) share, so that both decode the same sources alike.

Two designs (docs/pairs.md), told apart by the run's task entry (vit_jax/tasks TASKS):

- Encoder-decoder (seq2seq): sources are batched `batch_size` rows at a time, each row cut to
  `input_len` tokens as training cuts it (its EOS kept) and padded to `input_len`, the last batch
  filled with empty rows: every batch has one shape, so the encoder and the decoder step compile
  once per call. Each batch is decoded on the device by `sampling.seq2seq_decode`.
- Decoder-only (a causal LM trained on rows of `source [SEP] target [EOS]`): each source, cut to
  leave `max_new_tokens` of the context (the run's seq_len), is the prompt `source [SEP]`,
  continued until EOS by `sampling.generate` (greedy) or `sampling.beam_generate`; every batch has
  the context's length, so a few decoders compile per call.

Both designs decode greedily with `beam_size` 1, else by the one beam search on the device
(vit_jax/models/beam_search.py) with GNMT's length penalty.

Outputs are detokenized; a line break in a decoded text becomes a space, so that one output line is
one source.
"""

from typing import Sequence

import numpy as np

from vit_jax import errors
from vit_jax import tasks
from vit_jax.models import sampling


def start_id(tokenizer) -> int:
  """The decoder's first input: BOS, or PAD for tokenizers without one (the T5 convention)."""
  return tokenizer.bos_id if tokenizer.bos_id is not None else pad_id(tokenizer)


def pad_id(tokenizer) -> int:
  return tokenizer.pad_id if tokenizer.pad_id is not None else 0


def decoder_only(run) -> bool:
  """Whether run `run` (a config, or a workdir's saved one) trained a decoder-only model on
  pairs."""
  return tasks.TASKS[run["task"]].packs_pairs


def default_new_tokens(run) -> int:
  """The tokens decoded per source unless said: seq2seq's target_len; a decoder-only model's
  half its context (seq_len), the source keeping the other half but the [SEP]."""
  return run["seq_len"] // 2 if decoder_only(run) else run["target_len"]


def check_settings(run, *, max_new_tokens: int, where: str) -> None:
  """A ConfigError for settings the run's design cannot decode with: more new tokens than a
  decoder-only model's context holds beside a source. `where`: how the user set them (flags, an
  evaluator's keys)."""
  if not decoder_only(run):
    return
  if run["seq_len"] - max_new_tokens - 1 < 1:
    raise errors.ConfigError(
        f"{where}: max_new_tokens={max_new_tokens} leaves no room for a source and its [SEP] in "
        f"the model's context of seq_len={run['seq_len']} tokens; ask for fewer."
    )


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
    run,
    model_config: dict,
    params,
    tokenizer,
    sources: Sequence[Sequence[int]],
    *,
    batch_size: int,
    max_new_tokens: int,
    beam_size: int,
    length_penalty: float,
) -> list[str]:
  """The decoded text of each source (token ids), one line each, by the model of run `run`."""
  check_settings(run, max_new_tokens=max_new_tokens, where="decoding")
  outputs = []
  for first in range(0, len(sources), batch_size):
    chunk = list(sources[first : first + batch_size])
    real = len(chunk)
    chunk += [[]] * (batch_size - real)  # the last batch keeps the shape
    if decoder_only(run):
      decoded = _continue_pairs(model_config, params, tokenizer, chunk, run["seq_len"],
                                max_new_tokens, beam_size, length_penalty)  # fmt: skip
    else:
      decoded = _seq2seq(model_config, params, tokenizer, chunk, run["input_len"], real,
                         max_new_tokens, beam_size, length_penalty)  # fmt: skip
    outputs += [one_line(tokenizer.decode(ids)) for ids in decoded[:real]]
  return outputs


def _seq2seq(model_config, params, tokenizer, chunk, input_len, real, max_new, beams, penalty):
  inputs_BxS, mask_BxS = encoder_inputs(tokenizer, chunk, input_len)
  if tokenizer.eos_id is None:
    mask_BxS[real:, 0] = 1  # a filler row attends to something
  return sampling.seq2seq_decode(
      model_config,
      params,
      inputs_BxS,
      mask_BxS,
      max_new_tokens=max_new,
      start_id=start_id(tokenizer),
      eos_id=tokenizer.eos_id,
      beam_size=beams,
      length_penalty=penalty,
  )


def _continue_pairs(model_config, params, tokenizer, chunk, context, max_new, beams, penalty):
  """The tokens a decoder-only model writes after each `source [SEP]` (up to its EOS), each row
  `context` tokens long (the run's seq_len, as its training rows)."""
  room = context - max_new - 1  # the source's tokens beside its [SEP]
  prompts = [list(ids)[:room] + [tokenizer.sep_id] for ids in chunk]
  kwargs = dict(max_new_tokens=max_new, eos_id=tokenizer.eos_id, length=context)
  if beams > 1:
    decoded = sampling.beam_generate(
        model_config, params, prompts, beam_size=beams, length_penalty=penalty, **kwargs
    )
  else:
    decoded = sampling.generate(model_config, params, prompts, temperature=0.0, **kwargs)
  return [ids[: ids.index(tokenizer.eos_id)] if tokenizer.eos_id in ids else ids for ids in decoded]
