"""The few-shot probe's closed-form ridge regression: exact on separable features, equal to
scikit-learn's Ridge on the same inputs, nested k-shot draws, and the recipe's constants."""

import numpy as np
import pytest
from sklearn import linear_model

from vit_jax import evaluate as evaluators
from vit_jax.evaluate import fewshot


def blobs(centers_CxD, per_class, spread, rng):
  """Gaussian clusters around the centers: (features_NxD, labels_N)."""
  labels_N = np.repeat(np.arange(len(centers_CxD)), per_class)
  noise_NxD = spread * rng.normal(size=(len(labels_N), centers_CxD.shape[1]))
  return centers_CxD[labels_N] + noise_NxD, labels_N


@pytest.mark.parametrize("shots", [1, 5, 25])
def test_separable_features_are_probed_perfectly(shots):
  rng = np.random.default_rng(0)
  centers_CxD = 10.0 * rng.normal(size=(10, 64))
  train, test = blobs(centers_CxD, 30, 0.1, rng), blobs(centers_CxD, 20, 0.1, rng)
  accuracies = fewshot.probe_accuracies(train, test, 10, (shots,), seeds=3, l2_reg=2.0**10)
  assert accuracies == {f"{shots}shot_accuracy": 1.0}


@pytest.mark.parametrize("examples,dim", [(40, 16), (12, 48)])  # more examples / more features
def test_probe_equals_scikit_learn_ridge(examples, dim):
  rng = np.random.default_rng(1)
  features_NxD = rng.normal(size=(examples, dim)) * rng.uniform(0.1, 5.0, size=dim) + 3.0
  labels_N = np.arange(examples) % 4
  l2_reg = 2.0**10
  probe = fewshot.fit_probe(features_NxD, labels_N, 4, l2_reg)
  # The same inputs (whitened, bias feature appended), no intercept: the bias is a feature.
  inputs_NxF = probe.inputs(features_NxD)
  targets_NxC = 2.0 * np.eye(4)[labels_N] - 1.0
  ridge = linear_model.Ridge(alpha=l2_reg, fit_intercept=False).fit(inputs_NxF, targets_NxC)
  np.testing.assert_allclose(probe.weights_FxC, ridge.coef_.T, rtol=1e-4, atol=1e-6)
  test_NxD = rng.normal(size=(50, dim)) * 3.0
  np.testing.assert_array_equal(
      probe.predict(test_NxD), np.argmax(ridge.predict(probe.inputs(test_NxD)), axis=-1)
  )
  np.testing.assert_allclose(probe.mean_D, features_NxD.mean(0))
  np.testing.assert_allclose(probe.std_D, features_NxD.std(0) + 1e-5)


def test_a_weaker_l2_weight_fits_the_training_examples_closer():
  rng = np.random.default_rng(2)
  features_NxD, labels_N = blobs(rng.normal(size=(3, 32)), 5, 20.0, rng)  # overlapping
  targets_NxC = 2.0 * np.eye(3)[labels_N] - 1.0

  def residual(l2_reg):
    probe = fewshot.fit_probe(features_NxD, labels_N, 3, l2_reg)
    return np.sum((probe.inputs(features_NxD) @ probe.weights_FxC - targets_NxC) ** 2)

  assert residual(1e-3) < residual(1.0) < residual(2.0**10)


def test_draws_are_nested_seeded_and_per_class():
  labels_N = np.array([0, 1, 2] * 10)
  first, again = fewshot.draw_shots(labels_N, 3, 0), fewshot.draw_shots(labels_N, 3, 0)
  other = fewshot.draw_shots(labels_N, 3, 1)
  for c in range(3):
    np.testing.assert_array_equal(first[c], again[c])
    assert sorted(first[c]) == list(np.flatnonzero(labels_N == c))  # every example of class c
  assert any(not np.array_equal(first[c], other[c]) for c in range(3))


def test_defaults_are_big_visions():
  # big_vision configs/common_fewshot.py: shots, seeds and L2 weight.
  keys = evaluators.KINDS["fewshot"].keys
  assert (keys["shots"], keys["seeds"], keys["l2_reg"]) == ((1, 5, 10, 25), 3, 1024.0)
  assert fewshot.BIAS_FEATURE == 100.0  # big_vision evaluators/fewshot_lsr.py BIAS_CONSTANT
