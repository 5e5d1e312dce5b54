"""The evaluator contract; the evaluator of a task's own metrics on any split of any dataset; and
classification's: top-1 and top-5 accuracy and loss (with prec@1 on multi-label data) on any split
of any dataset with the model's classes, e.g. the test split, a minival slice of the training
split, or ImageNet-V2 for an ImageNet model.

An evaluator is built once per run (its data checked then) and `run(params)` returns its metrics,
which the trainer logs as `NAME/metric`. It gets the run's config, task and setup
(vit_jax/training/train.py `Setup`: model, mesh, state shardings and the jitted eval step).
"""

import abc

import jax
import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax import tasks
from vit_jax.training import host_input
from vit_jax.training import mesh as mesh_lib


class Evaluator(abc.ABC):
  """Runs every `settings.every` steps (and at the last step); `run` returns {metric: float}."""

  # Where an evaluator that writes files beside its metrics writes them (the trainer's workdir;
  # vit_jax.evaluate: the folder of its --output); None: nowhere. `registry.build` sets it.
  files_dir: str | None = None

  def __init__(self, name: str, settings, config, task, setup):
    self.name = name
    self.settings = settings
    self.every = settings.every
    self.config, self.task, self.setup = config, task, setup
    # The input shards this process reads: exactly the rows its devices hold (host_input.py).
    self.input_plan = host_input.plan_input(setup.mesh, config.batch_size, config.input_shards)

  def key(self, setting: str) -> str:
    """The flag that sets one of this evaluator's keys, for error messages."""
    return f"--config.{self.config_key(setting)}"

  def config_key(self, setting: str) -> str:
    """One of this evaluator's keys in the config (the data checks add `--config.`)."""
    return f"evals.{self.name}.{setting}"

  @abc.abstractmethod
  def run(self, params, step: int | None = None, name: str | None = None) -> dict:
    """{metric: float} of `params` (sharded as the run's state) at training step `step`, logged
    under `name` (None: its own; the EMA's name for the EMA params). Only files written beside
    the metrics are named by the two."""

  def global_batch(self, batch: dict) -> dict:
    """This process's rows of an eval batch as the global batch on the mesh."""
    return mesh_lib.global_batch(batch, self.setup.mesh, self.input_plan.batch_size)


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
    """This process's rows of the split's batches, padded so every process runs the same
    steps."""
    s = self.settings
    return host_input.eval_batches(
        lambda shard, count: self.task.eval_batches(shard, count, dataset=s.dataset, split=s.split),
        self.input_plan,
        s.max_batches,
        self.config.prefetch_batches,
    )

  def run(self, params, step=None, name=None) -> dict:
    del step, name  # writes no files
    return self.task.eval_summary(self.sums(params, self.batches()))

  def sums(self, params, batches) -> dict:
    """The task's `eval_sums` of `params` added up over `batches` (this process's rows)."""
    mesh, sums, pending = self.setup.mesh, None, None
    for batch in batches:
      with jax.set_mesh(mesh):  # the target platform for attention_impl=auto, as in aot.py
        out = self.setup.eval_step(params, self.global_batch(batch))
      if pending is not None:  # the previous batch's sums, fetched while this one runs
        sums = add_sums(sums, pending)
      pending = out
    if pending is not None:
      sums = add_sums(sums, pending)
    return sums


def add_sums(sums, out):
  """sums + one batch's `out`, on the host in float64 (int64 for integer counts): a float32 sum
  stops counting at 2**24 (16.8M tokens), and an int32 one wraps at 2**31."""

  def wide(x):
    x = np.asarray(x)
    return x.astype(np.int64 if np.issubdtype(x.dtype, np.integer) else np.float64)

  out = jax.tree.map(wide, jax.device_get(out))
  return out if sums is None else jax.tree.map(np.add, sums, out)


class Classification(TaskEval):
  """`dataset` and `split` default to the run's dataset and eval split."""

  def check_data(self):
    s, c = self.settings, self.config
    info = tasks.TASKS[c.task]
    if not info.reads_images:
      from vit_jax.data.text import checks  # pylint: disable=g-import-not-at-top

      checks.check_split(
          s.dataset,
          s.split,
          info.examples,
          key=self.config_key("split"),
          data_dir=c.data_dir,
          token_store=c.token_store if s.dataset == c.dataset else None,  # the run's store
          read_options=data.read_options(c),
      )
      return
    from vit_jax.data.image import sources  # pylint: disable=g-import-not-at-top

    num_classes = sources.check_split(c, s.dataset, s.split, key=self.config_key("split"))
    if num_classes != self.task.num_classes:
      raise errors.ConfigError(
          f"{self.key('dataset')}={s.dataset!r} has {num_classes} classes but the model has "
          f"{self.task.num_classes}; evaluate it on a dataset with the same classes."
      )
