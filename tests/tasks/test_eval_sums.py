"""Every task's eval sums ignore padded rows, even a padded row whose prediction is right."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from vit_jax.tasks import causal_lm
from vit_jax.tasks import classification
from vit_jax.tasks import masked_lm
from vit_jax.tasks import seq2seq
from vit_jax.tasks import text_classification

V, L = 6, 4


def confident(targets):
  """Logits whose argmax is `targets` (any shape), so every prediction is right."""
  return 10.0 * jax.nn.one_hot(jnp.asarray(targets), V) - 5.0


def token_case():
  """Causal LM / seq2seq: weights are 0 on the padded row, which predicts its targets exactly."""
  targets = np.array([[1, 2, 3, 4], [5, 5, 1, 2]])
  logits = np.array(confident(targets))
  logits[0, 1:] = confident([0, 0, 0])  # real row: only the first token is right
  batch = {"targets": targets, "weights": np.array([[1, 1, 1, 0], [0, 0, 0, 0]], np.float32)}
  return logits, batch


def causal():
  task = object.__new__(causal_lm.CausalLM)
  task.token_chars_V = jnp.arange(1.0, V + 1.0)
  return task


def masked(nsp):
  task = object.__new__(masked_lm.MaskedLM)
  task.nsp, task.most_frequent_id = nsp, 5
  task.token_chars_V = jnp.arange(1.0, V + 1.0)
  return task


def mlm_case():
  targets = np.array([[5, 5, 3], [5, 5, 5]])  # 5 is the most frequent id
  mlm_logits = np.array(confident(targets))
  mlm_logits[0, 0] = confident(0)
  nsp_label = np.array([1, 0])
  nsp_logits = np.array([[1.0, 0.0], [3.0, 0.0]])  # row 0 wrong, padded row 1 right
  batch = {
      "masked_targets": targets,
      "masked_weights": np.array([[1, 1, 0], [0, 0, 0]], np.float32),
      "input_mask": np.array([[1, 1, 1, 0], [0, 0, 0, 0]]),
      "nsp_label": nsp_label,
  }
  return {"mlm_logits": mlm_logits, "nsp_logits": nsp_logits}, batch


def image_classification(loss="softmax_xent"):
  """The task without a dataset (num_classes given), with `loss` as its config's."""
  config = ml_collections.ConfigDict({"loss": loss})
  return classification.ImageClassification(config, num_classes=5)


def classification_case():
  logits = np.array(confident([0, 3]))[:, :5]
  mask = np.array([1.0, 0.0], np.float32)
  label = np.array([2, 3])
  labels = np.eye(5, dtype=np.float32)[label]  # the padded row's too: only the mask keeps it out
  return logits, {"label": label, "labels": labels, "mask": mask}


def text_classification_case():
  logits = np.array([[0.0, 2.0], [0.0, 4.0]])
  return logits, {"label": np.array([0, 1]), "input_mask": np.array([[1, 1, 0], [0, 0, 0]])}


CASES = {
    "image_classification": (
        lambda o, b: image_classification().eval_sums(o, b),
        classification_case,
    ),
    "image_classification_sigmoid": (
        lambda o, b: image_classification("sigmoid_xent").eval_sums(o, b),
        classification_case,
    ),
    "causal_lm": (lambda o, b: causal().eval_sums(o, b), token_case),
    "seq2seq": (seq2seq.Seq2Seq.eval_sums, token_case),
    "masked_lm": (lambda o, b: masked(False).eval_sums(o, b), mlm_case),
    "masked_lm_nsp": (lambda o, b: masked(True).eval_sums(o, b), mlm_case),
    "text_classification": (
        lambda o, b: object.__new__(text_classification.TextClassification).eval_sums(o, b),
        text_classification_case,
    ),
}


def first_row(tree):
  return jax.tree.map(lambda x: x[:1], tree)


@pytest.mark.parametrize("name", list(CASES))
def test_padded_row_that_matches_counts_nowhere(name):
  eval_sums, case = CASES[name]
  outputs, batch = case()
  both = jax.device_get(eval_sums(outputs, batch))
  alone = jax.device_get(eval_sums(first_row(outputs), first_row(batch)))
  assert both.keys() == alone.keys()
  for key in both:
    np.testing.assert_allclose(both[key], alone[key], rtol=1e-6, err_msg=key)


def test_cases_are_what_they_claim():
  """The real rows are partly wrong and the padded rows right, so a leak changes the sums."""
  sums = jax.device_get(image_classification().eval_sums(*classification_case()))
  assert (sums["correct"], sums["correct_any"], sums["count"]) == (0.0, 0.0, 1.0)
  sums = jax.device_get(seq2seq.Seq2Seq.eval_sums(*token_case()))
  assert (sums["correct"], sums["tokens"], sums["exact"], sums["rows"]) == (1.0, 3.0, 0.0, 1.0)
  sums = jax.device_get(masked(True).eval_sums(*mlm_case()))
  assert (sums["correct"], sums["masked"], sums["nsp_correct"], sums["rows"]) == (1, 2, 0, 1)
  # Both masked tokens are the most frequent id, and token t stands for t + 1 characters.
  assert (sums["majority"], sums["chars"]) == (2, 12)


@pytest.mark.parametrize(
    "task, count_key",
    [
        (classification.ImageClassification, "count"),
        (text_classification.TextClassification, "rows"),
    ],
)
def test_classification_summary_is_per_example(task, count_key):
  top5 = task is classification.ImageClassification  # text classifiers have few classes
  sums = {"loss": np.float32(3.0), "correct": np.float32(1.0), count_key: np.float32(4.0)}
  want = {"accuracy": 0.25, "loss": 0.75, "examples": 4.0}
  if top5:
    sums["correct_top5"], want["top5_accuracy"] = np.float32(3.0), 0.75
    sums["correct_any"], sums["labelled"], want["prec@1"] = np.float32(2.0), 4.0, 0.5
  assert task.eval_summary(sums) == want
  empty = {k: 0.0 for k in sums}  # no examples: zeros, not NaN
  assert all(v == 0.0 for v in task.eval_summary(empty).values())


def test_prec1_is_over_the_rows_with_labels():
  """ReaL's relabelled validation leaves some images without labels: big_vision's prec@1 leaves
  them out (evaluators/classification.py:40-41), while accuracy still counts every row."""
  labels = np.zeros((3, V), np.float32)
  labels[0, [1, 2]] = 1.0  # top-1 (1) is one of its labels
  labels[1, 3] = 1.0  # top-1 (1) is not
  # row 2: no labels at all, though its top-1 (1) is its original `label`
  batch = {"labels": labels, "label": np.array([1, 3, 1]), "mask": np.ones(3, np.float32)}
  sums = jax.device_get(image_classification().eval_sums(confident([1, 1, 1]), batch))
  summary = classification.ImageClassification.eval_summary(sums)
  assert summary["prec@1"] == 0.5 and summary["accuracy"] == pytest.approx(2 / 3)
