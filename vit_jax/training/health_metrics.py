"""Training health (`config.log_internals`): the RMS of the parameters, the gradients and the
updates of each block group, as nanodo logs them (nanodo/metrics.py), to see a layer whose weights
or gradients grow, vanish or stop changing.

A group is the parameter path up to its first numbered module (`Transformer/encoderblock_3`,
`MixerBlock_0`, a ResNet's `block2`), or the top-level module for the rest (`embedding`, `head`,
`Transformer` for its final norm). Logged as `params_rms/GROUP`, `grads_rms/GROUP` (the gradient
before clipping) and `updates_rms/GROUP` (the change the step applied), averaged over the steps
since the last log like the other training metrics.
"""

import re

import jax
import jax.numpy as jnp

_NUMBERED = re.compile(r"\d+$")


def group_of(path) -> str:
  """The block group of one parameter, from its tree path."""
  keys = [str(getattr(entry, "key", entry)) for entry in path]
  for i, key in enumerate(keys[:-1]):  # the last key is the parameter's own name
    if _NUMBERED.search(key):
      return "/".join(keys[: i + 1])
  return keys[0]


def rms_by_group(tree) -> dict:
  """{group: root mean square of all of the group's entries} (float32)."""
  squares, counts = {}, {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    group = group_of(path)
    total = jnp.sum(jnp.square(leaf.astype(jnp.float32)))
    squares[group] = squares.get(group, 0.0) + total
    counts[group] = counts.get(group, 0) + leaf.size
  return {group: jnp.sqrt(squares[group] / counts[group]) for group in squares}


def metrics(params, grads, updates) -> dict:
  """`params_rms/GROUP`, `grads_rms/GROUP` and `updates_rms/GROUP` of one step."""
  out = {}
  for name, tree in (("params", params), ("grads", grads), ("updates", updates)):
    out.update({f"{name}_rms/{group}": v for group, v in rms_by_group(tree).items()})
  return out
