"""Classification on any split of any dataset: top-1 and top-5 accuracy and loss (the task's own
eval metrics), e.g. the test split, a minival slice of the training split, or another dataset
with the same classes (ImageNet-V2 for an ImageNet model)."""

from vit_jax import errors
from vit_jax import tasks
from vit_jax.evaluate import base


class Classification(base.TaskEval):
  """`dataset` and `split` default to the run's dataset and eval split."""

  def check_data(self):
    s, c = self.settings, self.config
    info = tasks.TASKS[c.task]
    if not info.reads_images:
      from vit_jax.data.text import checks  # pylint: disable=g-import-not-at-top

      checks.check_split(
          s.dataset, s.split, info.examples, key=self.key("split"), data_dir=c.data_dir
      )
      return
    from vit_jax.data.image import sources  # pylint: disable=g-import-not-at-top

    num_classes = sources.check_split(c, s.dataset, s.split, key=self.key("split"))
    if num_classes != self.task.num_classes:
      raise errors.ConfigError(
          f"{self.key('dataset')}={s.dataset!r} has {num_classes} classes but the model has "
          f"{self.task.num_classes}; evaluate it on a dataset with the same classes."
      )
