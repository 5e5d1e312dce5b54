"""Every task's training loss, its normalizers and its eval summary against NumPy formulas, and
the property gradient accumulation rests on: microbatch losses over the full batch's totals add
up to the full batch's loss."""

import math

import jax
import ml_collections
import numpy as np
import pytest

from tests.tasks import test_eval_sums as cases
from vit_jax.tasks import classification
from vit_jax.tasks import seq2seq
from vit_jax.tasks import text_classification
from vit_jax.tasks import token_cross_entropy

RNG = np.random.default_rng(0)


def log_softmax(x):
  x = np.asarray(x, np.float64)
  shifted = x - x.max(-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def nll_of(logits, targets):
  return -np.take_along_axis(log_softmax(logits), np.asarray(targets)[..., None], -1)[..., 0]


def split(batch, half):
  return [jax.tree.map(lambda x: x[s], batch) for s in (slice(None, half), slice(half, None))]


def assert_adds_up(task, outputs, batch, half):
  """loss(part, totals(full)) summed over the two parts == loss(full, totals(full))."""
  totals = task.totals(batch)
  whole, _ = task.loss(outputs, batch, totals)
  parts = sum(
      float(task.loss(o, b, totals)[0]) for o, b in zip(split(outputs, half), split(batch, half))
  )
  np.testing.assert_allclose(parts, float(whole), rtol=1e-5)


def test_image_classification_loss_is_mean_soft_cross_entropy():
  logits = RNG.normal(size=(4, 5)).astype(np.float32)
  labels = RNG.dirichlet(np.ones(5), size=4).astype(np.float32)  # soft (mixed/smoothed) labels
  label = np.array([0, 1, 2, 3])
  batch = {"labels": labels, "label": label}
  task = cases.image_classification()
  totals = task.totals(batch)
  assert float(totals["examples"]) == 4
  loss, metrics = task.loss(logits, batch, totals)
  expected = -(labels * log_softmax(logits)).sum(-1).mean()
  np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
  accuracy = (logits.argmax(-1) == label).mean()
  np.testing.assert_allclose(float(metrics["train_accuracy"]), accuracy)
  assert_adds_up(task, logits, batch, 1)
  sums = {
      "loss": 6.0,
      "correct": 3.0,
      "correct_any": 3.0,
      "labelled": 4.0,
      "correct_top5": 4.0,
      "count": 4.0,
  }
  summary = task.eval_summary(sums)
  assert summary == {
      "prec@1": 0.75,
      "accuracy": 0.75,
      "top5_accuracy": 1.0,
      "loss": 1.5,
      "examples": 4.0,
  }


def test_image_classification_prec1_counts_a_top1_among_the_multi_hot_labels():
  """big_vision's prec@1 (evaluators/classification.py:47-51) on a hand-made multi-label batch;
  accuracy stays against the first class (`label`), and the loss is against the multi-hot."""
  logits = np.array(
      [
          [0.0, 5.0, 1.0, 0.0, 0.0],  # top-1 class 1: among {0, 1}, not `label` 0
          [3.0, 0.0, 0.0, 1.0, 0.0],  # top-1 class 0: `label`, and among {0, 3}
          [0.0, 0.0, 0.0, 0.0, 4.0],  # top-1 class 4: not among {2, 3}
          [0.0, 0.0, 2.0, 0.0, 0.0],  # top-1 class 2: `label`, only class
          [9.0, 0.0, 0.0, 0.0, 0.0],  # padding (mask 0): top-1 0 would count as a hit
      ],
      np.float32,
  )
  label = np.array([0, 0, 2, 2, 0])
  labels = np.zeros((5, 5), np.float32)
  for row, classes in enumerate([(0, 1), (0, 3), (2, 3), (2,), ()]):
    labels[row, list(classes)] = 1.0
  batch = {"label": label, "labels": labels, "mask": np.array([1, 1, 1, 1, 0], np.float32)}
  task = cases.image_classification("sigmoid_xent")
  summary = task.eval_summary(jax.device_get(task.eval_sums(logits, batch)))
  assert summary["prec@1"] == 0.75  # rows 0, 1, 3
  assert summary["accuracy"] == 0.5  # rows 1, 3
  x = logits[:4].astype(np.float64)
  bce = -(labels[:4] * -np.log1p(np.exp(-x)) + (1 - labels[:4]) * -np.log1p(np.exp(x)))
  np.testing.assert_allclose(summary["loss"], bce.sum(-1).mean(), rtol=1e-5)
  assert summary["examples"] == 4.0


def test_image_classification_sigmoid_loss_is_per_class_binary_cross_entropy():
  """`loss=sigmoid_xent` (AugReg, big_vision utils.py sigmoid_xent): a binary cross-entropy per
  class summed over classes, averaged over examples; with a bias of -6.9 on every logit (the
  AugReg i1k head init) a one-hot target starts near 6.9 + 999 x 0.001 nats at 1000 classes."""
  logits = RNG.normal(size=(4, 5)).astype(np.float32)
  labels = RNG.dirichlet(np.ones(5), size=4).astype(np.float32)
  label = np.array([0, 1, 2, 3])
  batch = {"labels": labels, "label": label}
  task = cases.image_classification("sigmoid_xent")
  loss, _ = task.loss(logits, batch, task.totals(batch))
  x = logits.astype(np.float64)
  log_p, log_not_p = -np.log1p(np.exp(-x)), -np.log1p(np.exp(x))
  expected = -(labels * log_p + (1 - labels) * log_not_p).sum(-1).mean()
  np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
  softmax_loss, _ = cases.image_classification().loss(logits, batch, task.totals(batch))
  assert abs(float(loss) - float(softmax_loss)) > 0.1
  assert_adds_up(task, logits, batch, 1)
  at_bias = np.full((1, 1000), -6.9, np.float32)
  one_hot = np.eye(1000, dtype=np.float32)[:1]
  start, _ = task.loss(at_bias, {"labels": one_hot, "label": np.array([0])}, {"examples": 1.0})
  expected_start = np.log1p(np.exp(6.9)) + 999 * np.log1p(np.exp(-6.9))
  np.testing.assert_allclose(float(start), expected_start, rtol=1e-5)


def test_unknown_loss_is_a_config_error():
  from vit_jax.config import checks  # pylint: disable=g-import-not-at-top

  problems = checks.config_problems({"task": "image_classification", "loss": "focal"})
  # The allowed names are the task's losses, listed nowhere else.
  allowed = ", ".join(classification.LOSSES)
  assert f"--config.loss='focal' must be one of {allowed}" in problems, problems
  assert not checks.config_problems({"task": "image_classification", "loss": "sigmoid_xent"})


def token_batch():
  targets = RNG.integers(0, 6, size=(3, 4))
  weights = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], np.float32)
  return RNG.normal(size=(3, 4, 6)).astype(np.float32), {"targets": targets, "weights": weights}


def _seq2seq_task() -> seq2seq.Seq2Seq:
  """The seq2seq task's loss, without its data (no label smoothing: the plain NLL)."""
  task = object.__new__(seq2seq.Seq2Seq)
  task.config = ml_collections.ConfigDict({"label_smoothing": 0.0})
  return task


@pytest.mark.parametrize("task", [cases.causal(), _seq2seq_task()])
def test_token_loss_is_per_weighted_token(task):
  logits, batch = token_batch()
  totals = task.totals(batch)
  assert float(totals["tokens"]) == 8
  loss, metrics = task.loss(logits, batch, totals)
  weights = batch["weights"]
  nll = (nll_of(logits, batch["targets"]) * weights).sum() / 8
  np.testing.assert_allclose(float(loss), nll, rtol=1e-5)
  correct = ((logits.argmax(-1) == batch["targets"]) * weights).sum() / 8
  np.testing.assert_allclose(float(metrics["train_accuracy"]), correct)
  assert_adds_up(task, logits, batch, 1)  # halves of 3 and 5 tokens
  empty = {"targets": batch["targets"], "weights": np.zeros_like(weights)}
  assert float(task.totals(empty)["tokens"]) == 1.0  # never divides by zero


def test_weighted_cross_entropy_sums_weighted_tokens():
  logits, batch = token_batch()
  weights = batch["weights"] * 0.5
  nll, correct = token_cross_entropy.weighted_cross_entropy(logits, batch["targets"], weights)
  np.testing.assert_allclose(float(nll), (nll_of(logits, batch["targets"]) * weights).sum(), 1e-5)
  hits = (logits.argmax(-1) == batch["targets"]) * weights
  np.testing.assert_allclose(float(correct), hits.sum())


def test_causal_lm_summary_reports_perplexity_and_bits():
  task = cases.causal()
  task.unigram_bits = 3.5  # the embedded corpus's reference figure, passed through
  summary = task.eval_summary({"nll": 20.0, "correct": 5.0, "tokens": 10.0, "chars": 25.0})
  assert summary["unigram_bits_per_char"] == 3.5
  assert summary["loss"] == 2.0 and summary["accuracy"] == 0.5
  np.testing.assert_allclose(summary["perplexity"], math.exp(2.0))
  np.testing.assert_allclose(summary["bits_per_token"], 2.0 / math.log(2))
  np.testing.assert_allclose(summary["bits_per_char"], 20.0 / 25.0 / math.log(2))
  assert summary["tokens"] == 10.0


def test_seq2seq_summary_counts_exact_rows():
  summary = seq2seq.Seq2Seq.eval_summary(
      {"nll": 6.0, "correct": 9.0, "tokens": 12.0, "exact": 1.0, "rows": 4.0}
  )
  assert summary == {"loss": 0.5, "accuracy": 0.75, "exact_match": 0.25}


@pytest.mark.parametrize("nsp", [False, True])
def test_masked_lm_loss_adds_nsp_per_real_row(nsp):
  task = cases.masked(nsp)
  targets = RNG.integers(0, 6, size=(3, 2))
  batch = {
      "masked_targets": targets,
      "masked_weights": np.array([[1, 1], [1, 0], [0, 0]], np.float32),
      "input_mask": np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0]]),  # row 3 is padding
      "nsp_label": np.array([0, 1, 1]),
  }
  outputs = {
      "mlm_logits": RNG.normal(size=(3, 2, 6)).astype(np.float32),
      "nsp_logits": RNG.normal(size=(3, 2)).astype(np.float32),
  }
  totals = task.totals(batch)
  assert (float(totals["masked"]), float(totals["rows"])) == (3.0, 2.0)
  loss, metrics = task.loss(outputs, batch, totals)
  mlm = (nll_of(outputs["mlm_logits"], targets) * batch["masked_weights"]).sum() / 3
  nsp_loss = nll_of(outputs["nsp_logits"], batch["nsp_label"])[:2].sum() / 2
  np.testing.assert_allclose(float(loss), mlm + (nsp_loss if nsp else 0.0), rtol=1e-5)
  assert ("train_nsp_accuracy" in metrics) == nsp
  if nsp:
    nsp_hits = (outputs["nsp_logits"].argmax(-1) == batch["nsp_label"])[:2].mean()
    np.testing.assert_allclose(float(metrics["train_nsp_accuracy"]), nsp_hits)
  assert_adds_up(task, outputs, batch, 1)
  sums = {"nll": 6.0, "correct": 2.0, "masked": 4.0, "majority": 1.0, "nsp_correct": 1.0}
  sums["chars"] = 8.0  # what the masked tokens stand for: 2 characters each
  summary = task.eval_summary({**sums, "rows": 2.0})
  assert (summary["mlm_loss"], summary["mlm_accuracy"]) == (1.5, 0.5)
  np.testing.assert_allclose(summary["mlm_bits_per_char"], 6.0 / 8.0 / math.log(2))
  assert summary["majority_accuracy"] == 0.25 and summary["masked_tokens"] == 4.0
  assert summary.get("nsp_accuracy") == (0.5 if nsp else None)
  one = task.eval_summary({**sums, "nll": 3.0, "correct": 1.0, "masked": 1.0, "rows": 1.0})
  assert (one["mlm_loss"], one["mlm_accuracy"]) == (3.0, 1.0)  # one token is one
  none = task.eval_summary({**sums, "nll": 0.0, "correct": 0.0, "masked": 0.0, "rows": 0.0})
  assert none["mlm_loss"] == 0.0 and none["masked_tokens"] == 0.0


def test_text_classification_loss_is_per_real_row():
  task = object.__new__(text_classification.TextClassification)
  logits = RNG.normal(size=(3, 4)).astype(np.float32)
  logits[0, 1] = 5.0  # row 0 right, row 1 wrong: an accuracy of 1/2, not 0 or 1
  logits[1, 0] = 5.0
  batch = {"label": np.array([1, 2, 3]), "input_mask": np.array([[1, 1], [1, 0], [0, 0]])}
  totals = task.totals(batch)
  assert float(totals["rows"]) == 2.0
  loss, metrics = task.loss(logits, batch, totals)
  np.testing.assert_allclose(float(loss), nll_of(logits, batch["label"])[:2].mean(), rtol=1e-5)
  np.testing.assert_allclose(float(metrics["train_accuracy"]), 0.5)
  assert_adds_up(task, logits, batch, 1)
  summary = task.eval_summary({"loss": 3.0, "correct": 1.0, "rows": 2.0})
  assert summary == {"accuracy": 0.5, "loss": 1.5, "examples": 2.0}
