"""Scanned layers (`scan_layers=True`): one stacked entry for all the layers of a stack.

Checkpoints in every format hold one entry per layer, `<stack>/<block>_{i}/...`; a scanned
model holds `<stack>/<block>/layers/block/...` with a leading layer axis. These two functions
move between the two, for any model built on our transformer stack.
"""

import re

import numpy as np

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
