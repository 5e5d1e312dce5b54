"""Parameter counts: the total, and a per-module table. (FLOP counts: vit_jax/training/flops.py.)"""

import jax
import numpy as np


def count_params(params) -> int:
  """Total number of parameters in a pytree (works on jax.eval_shape results too)."""
  return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))


def param_table(params, depth: int = 2) -> list[tuple[str, int]]:
  """(module path, parameter count) per module, grouped `depth` levels deep, in tree order."""
  rows: dict[str, int] = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    keys = [getattr(k, "key", str(k)) for k in path]
    group = "/".join(keys[:depth])
    rows[group] = rows.get(group, 0) + int(np.prod(leaf.shape))
  return list(rows.items())
