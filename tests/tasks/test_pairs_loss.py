"""The losses of both designs on pairs. The decoder-only translator's (configs/gpt.py:pairs on a
files: dataset of pairs): the mean negative log-likelihood of the target side's tokens and its EOS
only, so the model's predictions of the source tokens do not change it; loss_on=all puts every
token of a pair back in. The encoder-decoder's with label smoothing (the Transformer base
recipe's 0.1): optax's cross-entropy against optax's smoothed labels."""

import jax
import numpy as np
import optax
import pytest

from tests import tiny_configs as configs_lib
from tests.data.text import en_es
from vit_jax import tasks


@pytest.fixture(scope="module")
def pairs_dataset(tmp_path_factory):
  pattern = f"{tmp_path_factory.mktemp('en_es')}/*.jsonl.zst"
  en_es.write_files(pattern)
  return f"files:{pattern}"


def _task_and_batch(dataset, workdir, loss_on):
  config = configs_lib.load("gpt", f"dataset={dataset},pairs")
  config.update(source_key="en", target_key="es", seq_len=64, batch_size=4, loss_on=loss_on)
  task = tasks.build_task(config, str(workdir))
  return task, next(iter(task.train_batches(0, 0, 1)))


def _nll(logits_BxLxV, targets_BxL):
  log_p = jax.nn.log_softmax(np.asarray(logits_BxLxV, np.float64), axis=-1)
  return -np.take_along_axis(np.asarray(log_p), targets_BxL[..., None], axis=-1)[..., 0]


def test_the_loss_is_the_targets_mean_nll_and_ignores_the_source_predictions(
    pairs_dataset, tmp_path
):
  task, batch = _task_and_batch(pairs_dataset, tmp_path / "target", "target")
  tok = task.tokenizer
  inputs_BxL, targets_BxL = batch["inputs"], batch["targets"]
  in_pair_BxL = (batch["segment_ids"] > 0) & (np.roll(batch["segment_ids"], -1, axis=1) > 0)
  # A target is the target side's when its input is [SEP] or follows it within the pair.
  after_sep_BxL = np.zeros(inputs_BxL.shape, bool)
  for b in range(inputs_BxL.shape[0]):
    inside = False
    for t in range(inputs_BxL.shape[1]):
      if t and batch["segment_ids"][b, t] != batch["segment_ids"][b, t - 1]:
        inside = False
      inside |= inputs_BxL[b, t] == tok.sep_id
      after_sep_BxL[b, t] = inside
  counted_BxL = after_sep_BxL & (batch["weights"] > 0)
  np.testing.assert_array_equal(batch["weights"] > 0, counted_BxL)
  source_BxL = in_pair_BxL & ~after_sep_BxL  # predictions of the source's tokens (and [SEP])
  assert source_BxL.sum() > 50 and counted_BxL.sum() > 50

  rng = np.random.default_rng(0)
  logits_BxLxV = rng.normal(size=(*inputs_BxL.shape, task.vocab_size)).astype(np.float32)
  loss = lambda logits: float(task.loss(logits, batch, task.totals(batch))[0])
  by_hand = _nll(logits_BxLxV, targets_BxL)[counted_BxL].mean()
  assert loss(logits_BxLxV) == pytest.approx(by_hand, rel=1e-5)

  # Every prediction at a source position replaced (the source's true next tokens made certain,
  # or anything else): the loss does not move.
  b, t = np.nonzero(source_BxL)
  source_next = inputs_BxL[b, np.minimum(t + 1, inputs_BxL.shape[1] - 1)]
  for change in ("certain", "random"):
    moved = logits_BxLxV.copy()
    if change == "certain":
      moved[b, t, source_next] += 50.0
    else:
      moved[b, t] = rng.normal(scale=10.0, size=moved[b, t].shape)
    assert loss(moved) == pytest.approx(loss(logits_BxLxV), rel=1e-6)
  # The target predictions made better: it falls.
  better = logits_BxLxV.copy()
  b, t = np.nonzero(counted_BxL)
  better[b, t, targets_BxL[b, t]] += 5.0
  assert loss(better) < loss(logits_BxLxV) - 1.0

  every, every_batch = _task_and_batch(pairs_dataset, tmp_path / "all", "all")
  np.testing.assert_array_equal(every_batch["inputs"], inputs_BxL)  # the same rows
  assert (every_batch["weights"] > 0).sum() > counted_BxL.sum()
  moved = logits_BxLxV.copy()
  b, t = np.nonzero(source_BxL & (every_batch["weights"] > 0))
  moved[b, t, every_batch["targets"][b, t]] += 50.0  # (unweighted targets are padding)
  all_loss = lambda logits: float(every.loss(logits, every_batch, every.totals(every_batch))[0])
  assert all_loss(moved) < all_loss(logits_BxLxV) - 1.0  # loss_on=all counts the sources


def test_the_seq2seq_loss_with_label_smoothing_is_optaxs_on_smoothed_labels():
  config = configs_lib.load("seq2seq", "dataset=toy_reverse")
  config.tokenizer.vocab_size, config.label_smoothing = 40, 0.1
  task = tasks.build_task_without_data(config)
  rng = np.random.default_rng(1)
  logits_BxTxV = rng.normal(scale=3.0, size=(3, 7, 40)).astype(np.float32)
  targets_BxT = rng.integers(0, 40, size=(3, 7)).astype(np.int32)
  weights_BxT = (rng.random((3, 7)) < 0.7).astype(np.float32)
  batch = {"targets": targets_BxT, "weights": weights_BxT}
  loss, _ = task.loss(logits_BxTxV, batch, task.totals(batch))
  labels_BxTxV = optax.smooth_labels(jax.nn.one_hot(targets_BxT, 40), 0.1)
  per_token_BxT = optax.softmax_cross_entropy(logits_BxTxV, labels_BxTxV)
  want = float((per_token_BxT * weights_BxT).sum() / weights_BxT.sum())
  assert float(loss) == pytest.approx(want, rel=1e-5)
  config.label_smoothing = 0.0
  plain, _ = tasks.build_task_without_data(config).loss(logits_BxTxV, batch, task.totals(batch))
  nll_BxT = optax.softmax_cross_entropy_with_integer_labels(logits_BxTxV, targets_BxT)
  assert float(plain) == pytest.approx(float((nll_BxT * weights_BxT).sum() / weights_BxT.sum()))
  assert abs(float(plain) - want) > 0.01
