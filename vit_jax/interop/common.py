"""What every converter shares: the error type, flat names and problem listings."""

import flax.traverse_util
import numpy as np

from vit_jax import errors


class ConversionError(errors.UserError, ValueError):
  """Pretrained parameters do not fit a model, or a checkpoint cannot be converted: missing,
  unexpected or wrongly shaped keys, another architecture, or an option the target format cannot
  express."""


def flatten(params) -> dict:
  """Nested params -> {"a/b/c": leaf}."""
  return {"/".join(k): v for k, v in flax.traverse_util.flatten_dict(params).items()}


def unflatten(flat: dict) -> dict:
  return flax.traverse_util.unflatten_dict({tuple(k.split("/")): v for k, v in flat.items()})


def shape_of(value) -> tuple:
  return tuple(np.shape(value))


def raise_problems(title: str, problems: list, hint: str = "") -> None:
  """One ConversionError listing every problem (the first 40), or nothing if there are none."""
  if not problems:
    return
  shown = problems[:40] + ([f"... and {len(problems) - 40} more"] if len(problems) > 40 else [])
  raise ConversionError(f"{title}:\n  " + "\n  ".join(shown) + (f"\n{hint}" if hint else ""))
