"""The evaluator contract, and the evaluator of a task's own metrics on any split of any dataset.

An evaluator is setup once per run (its data checked then) and `run(params)` returns its metrics,
which the trainer logs as `NAME/metric`. It gets the run's config, task and setup
(vit_jax/training/train.py `Setup`: model, mesh, state shardings and the jitted eval step).
"""

import abc

import jax
import jax.numpy as jnp

from vit_jax.training import host_input
from vit_jax.training import mesh as mesh_lib


class Evaluator(abc.ABC):
  """Runs every `settings.every` steps (and at the last step); `run` returns {metric: float}."""

  def __init__(self, name: str, settings, config, task, setup):
    self.name = name
    self.settings = settings
    self.every = settings.every
    self.config, self.task, self.setup = config, task, setup

  def key(self, setting: str) -> str:
    """The flag that sets one of this evaluator's keys, for error messages."""
    return f"--config.evals.{self.name}.{setting}"

  @abc.abstractmethod
  def run(self, params) -> dict:
    """{metric: float} of `params` (sharded as the run's state)."""


class TaskEval(Evaluator):
  """The task's eval metrics (`eval_sums`, `eval_summary`) on `settings.split` of
  `settings.dataset`, over at most `settings.max_batches` batches (None: the whole split)."""

  def __init__(self, name, settings, config, task, setup):
    super().__init__(name, settings, config, task, setup)
    self.check_data()

  @abc.abstractmethod
  def check_data(self) -> None:
    """A UserError unless the dataset and split exist and fit the model."""

  def batches(self):
    """This process's batches of the split, padded so every process runs the same steps."""
    s, c = self.settings, self.config
    return host_input.eval_batches(
        lambda shard, count: self.task.eval_batches(shard, count, dataset=s.dataset, split=s.split),
        c.input_shards,
        s.max_batches,
        c.prefetch_batches,
    )

  def run(self, params) -> dict:
    mesh, sums = self.setup.mesh, None
    for batch in self.batches():
      with jax.set_mesh(mesh):  # the target platform for attention_impl=auto, as in aot.py
        out = self.setup.eval_step(params, mesh_lib.global_batch(batch, mesh))
      sums = out if sums is None else jax.tree.map(jnp.add, sums, out)
    return self.task.eval_summary(jax.device_get(sums))
