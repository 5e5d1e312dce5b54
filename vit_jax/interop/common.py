"""What every converter shares: the converted checkpoint, the error type, flat names and problem
listings."""

import dataclasses
from typing import Any

import flax.traverse_util
import numpy as np

from vit_jax.interop import scan


class ConversionError(ValueError):
  """Pretrained parameters do not fit a model, or a checkpoint cannot be converted: missing,
  unexpected or wrongly shaped keys, another architecture, or an option the target format cannot
  express."""


def flatten(params) -> dict:
  """Nested params -> {"a/b/c": leaf}."""
  return {"/".join(k): v for k, v in flax.traverse_util.flatten_dict(params).items()}


def unflatten(flat: dict) -> dict:
  return flax.traverse_util.unflatten_dict({tuple(k.split("/")): v for k, v in flat.items()})


@dataclasses.dataclass
class Checkpoint:
  """Parameters in our names and layouts, with the config of the model they belong to.

  Attributes:
    params: flat {"a/b/c": np.ndarray}, the leaves of our model's "params" tree, with one entry
      per layer also for a model that scans its layers (`scan_layers`; see `tree()`).
    model: our model config, {"name": ..., **module kwargs} as `build_model` takes it.
    notes: what the conversion adapted or assumed, for the user to read.
    tokenizer: the tokenizer that came with the checkpoint (a `vit_jax.data.tokenizers`
      Tokenizer: a workdir's, or a Hugging Face `tokenizer.json`), or None.
  """
  params: dict
  model: dict
  notes: list = dataclasses.field(default_factory=list)
  tokenizer: Any = None

  def tree(self) -> dict:
    """The nested params, ready for `ckpt.module().apply({"params": ckpt.tree()}, ...)` (stacked
    when the model config scans its layers)."""
    from vit_jax.interop import models  # pylint: disable=g-import-not-at-top
    if models.is_scanned(self.model):
      stacked = models.expected_params(self.model, self.params, per_layer=False)
      return unflatten(scan.stack_layers(self.params, stacked))
    return unflatten(self.params)

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
