"""Packing token documents into fixed-length rows, and rows into batches.

Documents are concatenated into rows of length L. Within a row each document
(or piece of one) gets its own segment id 1, 2, 3... and positions counting
from 0; 0 marks padding. A document longer than the room left is split, its
rest continuing in the next row as a new piece with positions from 0 (so
positions never exceed L - 1). Only the stream's last row is padded, which
makes row r hold exactly tokens [r*L, (r+1)*L) of the concatenated stream:
that is what lets training resume by counting tokens.
"""

from typing import Iterable, Iterator, Optional, Sequence

import numpy as np

from vit_jax import errors


def pack_documents(
    documents: Iterable[Sequence[int]], seq_len: int, pad_id: int = 0
) -> Iterator[dict[str, np.ndarray]]:
  """Streams rows {'tokens', 'segment_ids', 'positions'}, each int32 (L,)."""
  if seq_len < 1:
    raise errors.ConfigError(f"seq_len must be positive, got {seq_len}.")
  tokens_L, segments_L, positions_L = _empty_row(seq_len, pad_id)
  fill, segment = 0, 0
  for document in documents:
    doc_N = np.asarray(document, dtype=np.int32)
    start = 0
    while start < len(doc_N):
      n = min(seq_len - fill, len(doc_N) - start)
      segment += 1
      tokens_L[fill : fill + n] = doc_N[start : start + n]
      segments_L[fill : fill + n] = segment
      positions_L[fill : fill + n] = np.arange(n, dtype=np.int32)
      fill, start = fill + n, start + n
      if fill == seq_len:
        yield {"tokens": tokens_L, "segment_ids": segments_L, "positions": positions_L}
        tokens_L, segments_L, positions_L = _empty_row(seq_len, pad_id)
        fill, segment = 0, 0
  if fill:
    yield {"tokens": tokens_L, "segment_ids": segments_L, "positions": positions_L}


def _empty_row(seq_len: int, pad_id: int):
  return (
      np.full(seq_len, pad_id, np.int32),
      np.zeros(seq_len, np.int32),
      np.zeros(seq_len, np.int32),
  )


def next_token_targets(
    tokens_BxL: np.ndarray, segment_ids_BxL: np.ndarray, pad_id: int = 0
) -> tuple[np.ndarray, np.ndarray]:
  """Causal-LM targets: the next token of the same segment.

  Returns targets int32 (B, L) and weights float32 (B, L); the last token of
  each segment and all padding get weight 0 (and target pad_id).
  """
  same_BxL = np.zeros(tokens_BxL.shape, dtype=bool)
  same_BxL[:, :-1] = (segment_ids_BxL[:, 1:] == segment_ids_BxL[:, :-1]) & (
      segment_ids_BxL[:, :-1] > 0
  )
  targets_BxL = np.full(tokens_BxL.shape, pad_id, np.int32)
  targets_BxL[:, :-1] = tokens_BxL[:, 1:]
  targets_BxL[~same_BxL] = pad_id
  return targets_BxL, same_BxL.astype(np.float32)


def batch_rows(
    rows: Iterable[dict[str, np.ndarray]],
    batch_size: int,
    pad_row: Optional[dict[str, np.ndarray]] = None,
    num_batches: Optional[int] = None,
) -> Iterator[dict[str, np.ndarray]]:
  """Stacks rows into batches (leading axis B).

  With `pad_row` (evaluation), the last partial batch is filled with copies of
  it, and `num_batches` (if given) pads with whole pad batches up to that
  many, so every process runs the same number of eval steps. Without it,
  a partial last batch is dropped.
  """
  if num_batches is not None and pad_row is None:
    raise ValueError("num_batches needs a pad_row to pad with.")
  count = 0
  for batch in _full_batches(rows, batch_size, pad_row):
    count += 1
    if num_batches is not None and count > num_batches:
      raise errors.DataError(
          f"The eval data needs more than num_batches="
          f"{num_batches} batches of {batch_size} rows."
      )
    yield batch
  for _ in range(count, num_batches or 0):
    yield _stack([pad_row] * batch_size)


def _full_batches(rows, batch_size, pad_row):
  buffer = []
  for row in rows:
    buffer.append(row)
    if len(buffer) == batch_size:
      yield _stack(buffer)
      buffer = []
  if buffer and pad_row is not None:
    yield _stack(buffer + [pad_row] * (batch_size - len(buffer)))


def _stack(rows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
  return {k: np.stack([np.asarray(r[k]) for r in rows]) for k in rows[0]}
