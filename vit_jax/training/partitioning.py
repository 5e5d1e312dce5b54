"""Parameter sharding rules: logical axis names per parameter, mapped onto the mesh axes.

Rules are data. Each rule matches a parameter path (a regex over "a/b/c") and names the logical
axis of every dimension; `LOGICAL_TO_MESH` says which mesh axis shards each logical axis:
FSDP shards the model width ("embed") over `fsdp`, tensor parallelism splits attention heads
and the MLP hidden dimension over `model`. Small tensors, and dimensions a mesh axis does not
divide, stay replicated. Optimizer state follows the parameter it belongs to (its path ends
with the parameter's path).
"""

import re

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

# (path regex, logical axis per dimension). First match wins; no match means replicated.
RULES = (
    (r"(query|key|value)/kernel$", ("embed", "heads", "head_dim")),  # D x H x K
    (r"(query|key|value)/bias$", ("heads", "head_dim")),
    (r"out/kernel$", ("heads", "head_dim", "embed")),  # H x K x D
    (r"(MlpBlock_\d+|mlp|token_mixing|channel_mixing)/Dense_0/kernel$", ("embed", "mlp")),
    (r"(MlpBlock_\d+|mlp|token_mixing|channel_mixing)/Dense_0/bias$", ("mlp",)),
    (r"(MlpBlock_\d+|mlp|token_mixing|channel_mixing)/Dense_1/kernel$", ("mlp", "embed")),
    (r"(wte|word_embeddings|token_embed)/embedding$", ("vocab", "embed")),
    (r"(wpe|position_embeddings|token_type_embeddings)/embedding$", (None, "embed")),
    (r"pos_embedding$", (None, None, "embed")),
    (r"(^|/)(embedding|stem)/kernel$", (None, None, None, "embed")),  # patch conv, HWIO
    (r"(head|classifier|pre_logits|pooler|transform)/kernel$", ("embed", None)),
)
LOGICAL_TO_MESH = {
    "embed": "fsdp",
    "heads": "model",
    "mlp": "model",
    "vocab": "model",
    "head_dim": None,
}
MIN_SHARDED_SIZE = 2**12  # smaller tensors are cheaper replicated than gathered


def path_string(path) -> str:
  parts = []
  for key in path:
    for attr in ("key", "name", "idx"):
      if hasattr(key, attr):
        parts.append(str(getattr(key, attr)))
        break
  return "/".join(parts)


def logical_axes(path: str, ndim: int):
  """The logical axis names of a parameter's dimensions (None: not sharded)."""
  for pattern, axes in RULES:
    if re.search(pattern, path):
      if len(axes) == ndim:
        return axes
      if len(axes) + 1 == ndim:  # scanned layers stack params on a leading layer axis
        return (None,) + axes
  return (None,) * ndim


def spec_for(path: str, shape, mesh) -> P:
  if int(np.prod(shape)) < MIN_SHARDED_SIZE:
    return P()
  spec = []
  for dim, logical in zip(shape, logical_axes(path, len(shape))):
    axis = LOGICAL_TO_MESH.get(logical) if logical else None
    if axis is not None and mesh.shape[axis] > 1 and dim % mesh.shape[axis] == 0:
      spec.append(axis)
    else:
      spec.append(None)
  return P(*spec)


def tree_shardings(tree, mesh):
  """NamedSharding for every leaf of a (possibly abstract) params or train-state tree."""

  def one(path, leaf):
    return NamedSharding(mesh, spec_for(path_string(path), np.shape(leaf), mesh))

  return jax.tree_util.tree_map_with_path(one, tree)
