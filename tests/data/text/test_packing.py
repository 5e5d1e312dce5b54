"""Packing documents into rows: segments, positions, splits, padding."""

import numpy as np

from vit_jax.data.text import packing


def _docs():
  # Lengths 5, 3, 9, 1, 4: the 9 spans rows, nothing fits exactly.
  lengths = [5, 3, 9, 1, 4]
  starts = np.cumsum([0] + lengths[:-1]) + 100
  return [list(range(s, s + n)) for s, n in zip(starts, lengths)]


def test_rows_hold_the_concatenated_stream():
  rows = list(packing.pack_documents(_docs(), seq_len=8, pad_id=0))
  tokens_RxL = np.stack([r["tokens"] for r in rows])
  segments_RxL = np.stack([r["segment_ids"] for r in rows])
  positions_RxL = np.stack([r["positions"] for r in rows])
  assert tokens_RxL.shape == (3, 8) and tokens_RxL.dtype == np.int32
  stream = np.concatenate(_docs())
  assert np.array_equal(tokens_RxL.ravel()[: len(stream)], stream)
  np.testing.assert_array_equal(
      segments_RxL,
      [
          [1, 1, 1, 1, 1, 2, 2, 2],
          [1, 1, 1, 1, 1, 1, 1, 1],  # The 9-token document, first 8.
          [1, 2, 3, 3, 3, 3, 0, 0],
      ],
  )  # Its last token, then 1 and 4; padding.
  np.testing.assert_array_equal(
      positions_RxL, [[0, 1, 2, 3, 4, 0, 1, 2], [0, 1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 1, 2, 3, 0, 0]]
  )
  assert (tokens_RxL[segments_RxL == 0] == 0).all()


def test_documents_never_share_a_segment():
  rng = np.random.default_rng(0)
  docs = [np.full(rng.integers(1, 30), i + 1) for i in range(200)]
  for row in packing.pack_documents(docs, seq_len=16):
    for segment in np.unique(row["segment_ids"][row["segment_ids"] > 0]):
      in_segment = row["segment_ids"] == segment
      assert len(np.unique(row["tokens"][in_segment])) == 1
      assert np.array_equal(row["positions"][in_segment], np.arange(in_segment.sum()))
      assert np.ptp(np.flatnonzero(in_segment)) == in_segment.sum() - 1


def test_next_token_targets_stay_in_segment_and_skip_padding():
  rows = list(packing.pack_documents(_docs(), seq_len=8))
  tokens_BxL = np.stack([r["tokens"] for r in rows])
  segments_BxL = np.stack([r["segment_ids"] for r in rows])
  targets_BxL, weights_BxL = packing.next_token_targets(tokens_BxL, segments_BxL)
  assert weights_BxL.dtype == np.float32 and targets_BxL.dtype == np.int32
  assert (weights_BxL[segments_BxL == 0] == 0).all()
  b, i = np.nonzero(weights_BxL)
  assert (segments_BxL[b, i] == segments_BxL[b, i + 1]).all()
  assert (targets_BxL[b, i] == tokens_BxL[b, i + 1]).all()
  # Within a document consecutive ids: the target is always token + 1.
  assert (targets_BxL[b, i] == tokens_BxL[b, i] + 1).all()
  np.testing.assert_array_equal(weights_BxL[0], [1, 1, 1, 1, 0, 1, 1, 0])


def test_batch_rows_pads_eval_batches():
  rows = [{"x": np.full(3, i + 1)} for i in range(5)]
  pad = {"x": np.zeros(3, np.int64)}
  assert len(list(packing.batch_rows(rows, 2))) == 2  # Training drops rest.
  batches = list(packing.batch_rows(rows, 2, pad, num_batches=4))
  assert len(batches) == 4
  assert batches[2]["x"].tolist() == [[5, 5, 5], [0, 0, 0]]
  assert (batches[3]["x"] == 0).all()
