"""What every converter shares: the converted checkpoint, the error type and problem listings."""

import dataclasses

import numpy as np

from vit_jax import init_from


class ConversionError(init_from.PretrainedMismatchError):
  """A checkpoint cannot be converted: missing, unexpected or wrongly shaped keys, another
  architecture, or an option the target format cannot express."""


@dataclasses.dataclass
class Checkpoint:
  """Parameters in our names and layouts, with the config of the model they belong to.

  Attributes:
    params: flat {"a/b/c": np.ndarray}, the leaves of our model's "params" tree, with one entry
      per layer also for a model that scans its layers (`scan_layers`; see `tree()`).
    model: our model config, {"name": ..., **module kwargs} as `build_model` takes it.
    notes: what the conversion adapted or assumed, for the user to read.
  """
  params: dict
  model: dict
  notes: list = dataclasses.field(default_factory=list)

  def tree(self) -> dict:
    """The nested params, ready for `ckpt.module().apply({"params": ckpt.tree()}, ...)` (stacked
    when the model config scans its layers)."""
    from vit_jax.interop import models  # pylint: disable=g-import-not-at-top
    if models.is_scanned(self.model):
      return init_from.unflatten(models.stack_layers(self.params, self.model))
    return init_from.unflatten(self.params)

  def module(self, **overrides):
    """The (unbound) Flax module these parameters belong to."""
    from vit_jax.interop import models  # pylint: disable=g-import-not-at-top
    return models.build({**self.model, **overrides})


def shape_of(value) -> tuple:
  return tuple(np.shape(value))


def raise_problems(title: str, problems: list, hint: str = "") -> None:
  """One ConversionError listing every problem (the first 40), or nothing if there are none."""
  if not problems:
    return
  shown = problems[:40] + ([f"... and {len(problems) - 40} more"] if len(problems) > 40 else [])
  raise ConversionError(f"{title}:\n  " + "\n  ".join(shown) + (f"\n{hint}" if hint else ""))
