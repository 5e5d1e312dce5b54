"""One text as a single token stream, its tail held out: the char-rnn / nanoGPT / enwik8 protocol.

    dataset = "stream:embedded"           the embedded corpus, documents joined by a blank line
    dataset = "stream:files:/data/*.txt"  the files' texts concatenated, in sorted path order

The split, exactly: of the text's C characters, the first floor((1 - holdout) * C) are the
training text and the rest the held-out (validation) text (`holdout` 0.1 by default); each is
tokenized on its own with the run's tokenizer. Training reads windows of seq_len + 1 tokens of
the training text (inputs the first seq_len, targets the last seq_len), at random starts drawn
from (seed, step, input shard) or, with `windows="sequential"`, one after another from its start
(wrapping around). Evaluation scores every held-out token exactly once, each predicted from the
tokens before it in the whole stream (the first from the training text's last ones): window k
scores the targets [P + k * stride, P + (k + 1) * stride) (P: the first held-out position; the
last window fewer), from the seq_len inputs that end just before its last target, so each token
sees at least seq_len - stride tokens of context (fewer only at the start of the stream). Both
depend only on the step, so a resumed run reads exactly what the uninterrupted one read.
"""

import functools
import glob
import math
import os

import numpy as np

from vit_jax import errors
from vit_jax.config import defaults
from vit_jax.data.text import corpus
from vit_jax.data.text import order

PREFIX = "stream:"
WINDOWS = defaults.CHOICES["stream.windows"]
SPLITS = ("train", "validation")
_WINDOW_SEEDS = 3  # keeps the window draws apart from other streams drawn from the seed


def is_stream(name: str) -> bool:
  return isinstance(name, str) and name.startswith(PREFIX)


@functools.lru_cache(maxsize=4)
def whole_text(name: str) -> str:
  """The stream's text: the embedded corpus or the named files, concatenated."""
  inner = name[len(PREFIX) :]
  if inner == "embedded":
    return "\n\n".join(corpus.documents())
  if inner.startswith(("files:", "paragraphs:")):  # checked by data/text/checks.py beforehand
    texts = []
    for path in sorted(glob.glob(os.path.expanduser(inner.split(":", 1)[1]))):
      with open(path, encoding="utf-8") as f:
        texts.append(f.read())
    return "".join(texts)
  raise errors.ConfigError(
      f"dataset {name!r}: a stream reads 'embedded' or files, e.g. stream:embedded or "
      "stream:files:/data/input.txt."
  )


def split_text(text: str, split: str, holdout: float) -> str:
  """The training text (the first floor((1 - holdout) * len) characters) or the held-out rest."""
  if not 0 < holdout < 1:
    raise errors.ConfigError(f"--config.stream.holdout={holdout} must be in (0, 1).")
  cut = math.floor((1 - holdout) * len(text))
  if split == "train":
    return text[:cut]
  if split == "validation":
    return text[cut:]
  raise errors.DataError(f"a stream: dataset has the splits {', '.join(SPLITS)}, not {split!r}.")


_TOKENS = {}  # (name, holdout, tokenizer fingerprint) -> (train tokens, held-out tokens)


def stream_tokens(name: str, tokenizer, holdout: float) -> tuple[np.ndarray, np.ndarray]:
  """(training tokens, held-out tokens), each int32; tokenized once per process."""
  key = (name, holdout, tokenizer.fingerprint)
  if key not in _TOKENS:
    text = whole_text(name)
    parts = [split_text(text, split, holdout) for split in SPLITS]
    _TOKENS[key] = tuple(np.asarray(tokenizer.encode(part), np.int32) for part in parts)
  return _TOKENS[key]


def tokenizer_texts(name: str, holdout: float, chunk: int = 100_000) -> list[str]:
  """The training text in pieces of `chunk` characters, to train a tokenizer on."""
  text = split_text(whole_text(name), "train", holdout)
  return [text[i : i + chunk] for i in range(0, len(text), chunk)]


def _window(tokens_N: np.ndarray, start: int, seq_len: int) -> dict:
  """Inputs tokens[start : start + seq_len], targets one further, every target weighted."""
  return {
      "inputs": tokens_N[start : start + seq_len],
      "targets": tokens_N[start + 1 : start + seq_len + 1],
      "segment_ids": np.ones(seq_len, np.int32),
      "positions": np.arange(seq_len, dtype=np.int32),
      "weights": np.ones(seq_len, np.float32),
  }


def train_batches(
    tokens_N: np.ndarray,
    *,
    batch_size: int,
    seq_len: int,
    seed: int,
    start_step: int = 0,
    windows: str = "random",
    process_index: int = 0,
    process_count: int = 1,
):
  """Endless batches of `batch_size` windows of this input shard (`process_index` of
  `process_count`); batch k depends only on k, so `start_step` resumes exactly."""
  order.check_shard(process_index, process_count)
  starts = len(tokens_N) - seq_len  # windows need seq_len + 1 tokens
  if starts < 1:
    raise errors.DataError(
        f"the stream's training text has {len(tokens_N)} tokens, fewer than seq_len + 1 = "
        f"{seq_len + 1}; use a longer text or a smaller --config.seq_len."
    )
  if windows not in WINDOWS:
    raise errors.ConfigError(f"--config.stream.windows={windows!r}: use one of {WINDOWS}.")
  step = start_step
  while True:
    if windows == "random":
      rng = order.seeded_rng(seed, _WINDOW_SEEDS, step, process_index)
      window_starts = rng.integers(0, starts, size=batch_size)
    else:  # row r of shard p at step k is global window (k * count + p) * batch + r
      first = (step * process_count + process_index) * batch_size
      window_starts = (np.arange(first, first + batch_size) * seq_len) % starts
    rows = [_window(tokens_N, int(s), seq_len) for s in window_starts]
    yield {k: np.stack([row[k] for row in rows]) for k in rows[0]}
    step += 1


def eval_windows(train_N: np.ndarray, held_out_M: np.ndarray, seq_len: int, stride: int):
  """Rows scoring every held-out token once (module docstring), in order. Inputs after the last
  scored target's are the stream's next tokens: causal attention keeps them out of the scores."""
  if not 1 <= stride <= seq_len:
    raise errors.ConfigError(f"the eval stride {stride} must be in [1, seq_len={seq_len}].")
  stream_T = np.concatenate([train_N, held_out_M])
  first, end = len(train_N), len(stream_T)  # the held-out targets: positions [first, end)
  stream_T = np.pad(stream_T, (0, max(0, seq_len + 1 - end)))  # a stream shorter than a window
  for begin in range(first, end, stride):
    stop = min(begin + stride, end)  # targets [begin, stop)
    start = max(stop - 1 - seq_len, 0)  # their inputs [start, stop - 1)
    row = _window(stream_T, start, seq_len)
    target_position_L = start + 1 + np.arange(seq_len)
    row["weights"] = ((target_position_L >= begin) & (target_position_L < stop)).astype(np.float32)
    yield row


def eval_batches(
    train_N: np.ndarray,
    held_out_M: np.ndarray,
    *,
    batch_size: int,
    seq_len: int,
    stride: int | None = None,
    process_index: int = 0,
    process_count: int = 1,
):
  """This shard's windows (every `process_count`-th), in batches; the last padded with rows of
  weight 0. `stride` None: seq_len (windows side by side)."""
  order.check_shard(process_index, process_count)
  rows = eval_windows(train_N, held_out_M, seq_len, stride or seq_len)
  mine = [row for k, row in enumerate(rows) if k % process_count == process_index]
  empty = _window(np.zeros(seq_len + 1, np.int32), 0, seq_len)
  pad = {k: np.zeros_like(v) for k, v in empty.items()}  # weight 0: counts nowhere
  for i in range(0, len(mine), batch_size):
    chunk = mine[i : i + batch_size]
    chunk += [pad] * (batch_size - len(chunk))
    yield {k: np.stack([row[k] for row in chunk]) for k in chunk[0]}
