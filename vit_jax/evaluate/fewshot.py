"""Few-shot linear probes: how linearly separable the model's frozen features are, from k examples
per class (the ViT paper's and big_vision's main pretraining signal).

For each seed, k examples of every class are drawn from `train_split` (nested: the 5 of 5-shot
include the 1 of 1-shot, as in big_vision), their pre-logits features (the model without its
head: the pooled representation, after the `pre_logits` layer where there is one) are whitened
with their own mean and standard deviation, a constant feature of 100 is appended as a nearly
unregularized bias, and ridge regression onto +/-1 one-hot targets is solved in closed form with
L2 weight `l2_reg` (big_vision's 2 ** 10). The probe's accuracy on `split` is averaged over the
seeds and logged as `NAME/{k}shot_accuracy`. The recipe is big_vision's
(evaluators/fewshot_lsr.py, configs/common_fewshot.py).
"""

import dataclasses

import jax
import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax.evaluate import base
from vit_jax.models import build_model
from vit_jax.training import host_input
from vit_jax.training import mesh as mesh_lib

BIAS_FEATURE = 100.0  # large, so that its weight (the bias) is barely regularized
STD_FLOOR = 1e-5  # added to each feature's std: constant features stay finite


@dataclasses.dataclass
class Probe:
  """A linear probe on whitened features; `weights_FxC` has a last row for the bias feature."""

  mean_D: np.ndarray
  std_D: np.ndarray
  weights_FxC: np.ndarray

  def inputs(self, features_NxD) -> np.ndarray:
    return probe_inputs(features_NxD, self.mean_D, self.std_D)

  def predict(self, features_NxD) -> np.ndarray:
    return np.argmax(self.inputs(features_NxD) @ self.weights_FxC, axis=-1)


def probe_inputs(features_NxD, mean_D, std_D) -> np.ndarray:
  """Whitened features with the constant bias feature appended, in float64."""
  x_NxD = (np.asarray(features_NxD, np.float64) - mean_D) / std_D
  return np.concatenate([x_NxD, np.full((len(x_NxD), 1), BIAS_FEATURE)], axis=1)


def fit_probe(features_NxD, labels_N, num_classes: int, l2_reg: float) -> Probe:
  """Ridge regression of +/-1 one-hot targets on the whitened features, in closed form:
  W = (X^T X + l2 I)^-1 X^T Y, or the same as X^T (X X^T + l2 I)^-1 Y when there are fewer
  examples than features (the usual few-shot case; a smaller system to solve)."""
  features_NxD = np.asarray(features_NxD, np.float64)
  mean_D = features_NxD.mean(axis=0)
  std_D = features_NxD.std(axis=0) + STD_FLOOR
  x_NxF = probe_inputs(features_NxD, mean_D, std_D)
  y_NxC = 2.0 * np.eye(num_classes)[np.asarray(labels_N)] - 1.0
  n, f = x_NxF.shape
  if n >= f:
    weights_FxC = np.linalg.solve(x_NxF.T @ x_NxF + l2_reg * np.eye(f), x_NxF.T @ y_NxC)
  else:
    weights_FxC = x_NxF.T @ np.linalg.solve(x_NxF @ x_NxF.T + l2_reg * np.eye(n), y_NxC)
  return Probe(mean_D, std_D, weights_FxC)


def draw_shots(labels_N, num_classes: int, seed: int) -> list[np.ndarray]:
  """Per class, the indices of its examples in a random order drawn from `seed`: the first k of
  each make a k-shot training set."""
  rng = np.random.default_rng(seed)
  labels_N = np.asarray(labels_N)
  return [rng.permutation(np.flatnonzero(labels_N == c)) for c in range(num_classes)]


def probe_accuracies(train, test, num_classes: int, shots, seeds: int, l2_reg: float) -> dict:
  """{"{k}shot_accuracy": mean test accuracy over the seeds} of probes fitted on k examples per
  class. `train` and `test` are (features_NxD, labels_N)."""
  (train_x, train_y), (test_x, test_y) = train, test
  hits = {k: [] for k in shots}
  for seed in range(seeds):
    per_class = draw_shots(train_y, num_classes, seed)
    for k in shots:
      chosen = np.concatenate([indices[:k] for indices in per_class])
      probe = fit_probe(train_x[chosen], train_y[chosen], num_classes, l2_reg)
      hits[k].append(np.mean(probe.predict(test_x) == test_y))
  return {f"{k}shot_accuracy": float(np.mean(hits[k])) for k in shots}


class FewShot(base.Evaluator):
  """Probes on `train_split` of `dataset` (default: the run's dataset), scored on `split`; each
  image is read as the run's eval reads it (its image size and crop)."""

  def __init__(self, name, settings, config, task, setup):
    super().__init__(name, settings, config, task, setup)
    self.num_classes = self._check_data()
    headless = build_model({**setup.model_config, "num_classes": 0})  # pre-logits out

    def features(params, batch):
      features_BxD = task.apply(headless, params, batch, train=False)
      return {"features": features_BxD, "label": batch["label"], "mask": batch["mask"]}

    self.features = jax.jit(
        features,
        in_shardings=(setup.state_shardings["params"], mesh_lib.batch_sharding(setup.mesh)),
        out_shardings=mesh_lib.replicated(setup.mesh),
    )

  def _check_data(self) -> int:
    """The class count; a DataError if a split is missing or a class has fewer examples in
    `train_split` than the most shots asked for."""
    from vit_jax.data.image import sources  # pylint: disable=g-import-not-at-top

    s = self.settings
    num_classes = sources.check_split(
        self.config, s.dataset, s.train_split, key=self.config_key("train_split")
    )
    sources.check_split(self.config, s.dataset, s.split, key=self.config_key("split"))
    counts = np.bincount(self._labels(s.train_split), minlength=num_classes)
    short = [c for c in range(num_classes) if counts[c] < max(s.shots)]
    if short:
      raise errors.DataError(
          f"{self.key('shots')}={tuple(s.shots)} needs {max(s.shots)} examples of every class, "
          f"but {s.train_split!r} of {s.dataset!r} has {counts[short[0]]} of class {short[0]} "
          f"({len(short)} classes have too few); use fewer shots or a larger "
          f"{self.key('train_split')}."
      )
    return num_classes

  def _labels(self, split: str) -> np.ndarray:
    """Every label of `split`, read without decoding an image."""
    from vit_jax.data.image import sources  # pylint: disable=g-import-not-at-top

    c = self.config
    source = sources.open_source(
        self.settings.dataset,
        data_dir=c.data_dir,
        download=c.download,
        read_options=data.read_options(c),
    )
    labels = source.read(split, 0, 1).map(lambda example: example["label"])
    return np.fromiter(labels.as_numpy_iterator(), np.int64)

  def _features(self, params, split: str):
    """(features_NxD, labels_N) of every example of `split`, padding dropped."""
    mesh, dataset = self.setup.mesh, self.settings.dataset
    batches = host_input.eval_batches(
        lambda shard, count: self.task.eval_batches(shard, count, dataset=dataset, split=split),
        self.input_plan,
        None,
        self.config.prefetch_batches,
    )
    features, labels = [], []
    for batch in batches:
      with jax.set_mesh(mesh):
        out = jax.device_get(self.features(params, self.global_batch(batch)))
      real = out["mask"] > 0
      features.append(np.asarray(out["features"], np.float32)[real])
      labels.append(out["label"][real])
    return np.concatenate(features), np.concatenate(labels)

  def run(self, params, step=None, name=None) -> dict:
    del step, name  # writes no files
    s = self.settings
    train = self._features(params, s.train_split)
    test = self._features(params, s.split)
    return probe_accuracies(train, test, self.num_classes, s.shots, s.seeds, s.l2_reg)
