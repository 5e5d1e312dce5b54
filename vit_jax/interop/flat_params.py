"""Parameters as flat names ("a/b/c": array): to and from nested trees, between one entry per
layer and scanned stacks, and the error that lists every key that does not fit.

Checkpoints in every format hold one entry per layer, `<stack>/<block>_{i}/...`; a model that
scans its layers (`scan_layers=True`) holds `<stack>/<block>/layers/block/...` with a leading
layer axis. `unstack_layers` and `stack_layers` move between the two, for any model built on our
transformer stack.
"""

import re

import flax.traverse_util
import numpy as np

from vit_jax import errors


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
  raise errors.ConversionError(f"{title}:\n  " + "\n  ".join(shown) + (f"\n{hint}" if hint else ""))


_STACKED = re.compile(r"(.+)/layers/block/(.+)")


def is_stacked(key: str) -> bool:
  return _STACKED.fullmatch(key) is not None


def _layer_keys(key: str, depth: int) -> list:
  match = _STACKED.fullmatch(key)
  return [f"{match.group(1)}_{i}/{match.group(2)}" for i in range(depth)]


def unstack_layers(flat: dict) -> dict:
  """Stacked entries -> one entry per layer; other entries are kept as they are."""
  out = {}
  for key, value in flat.items():
    if is_stacked(key):
      out.update(zip(_layer_keys(key, len(value)), value))
    else:
      out[key] = value
  return out


def stack_layers(flat: dict, target: dict) -> dict:
  """Per-layer entries -> the stacked ones of `target` ({key: array or ShapeDtypeStruct} of a
  scanned model: its stacked keys and their depths say what to stack)."""
  out = dict(flat)
  for key, spec in target.items():
    if is_stacked(key):
      out[key] = np.stack([out.pop(name) for name in _layer_keys(key, spec.shape[0])])
  return out
