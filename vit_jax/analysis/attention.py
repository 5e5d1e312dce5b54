"""Attention weights of every layer, attention rollout, and mean attention distance.

The weights come from the models' own path: an `Encoder` stack called with
`return_attention=True` makes each of its blocks sow them into "intermediates". ViT passes that
flag down; BERT and GPT do not, so an interceptor switches it on for every encoder stack of any
model, one path for all of them.

Shape letters: B batch, H heads, T queries, S keys, N patches, L layers.
"""

import re

import flax.linen as nn
import jax
import numpy as np

from vit_jax import errors
from vit_jax.models import transformer

_RETURN_ATTENTION_ARG = 4  # Encoder(x, mask, deterministic, positions, return_attention)


def _return_attention(next_fun, args, kwargs, context):
  if isinstance(context.module, transformer.Encoder) and context.method_name == "__call__":
    if len(args) > _RETURN_ATTENTION_ARG:
      args = args[:_RETURN_ATTENTION_ARG] + (True,) + args[_RETURN_ATTENTION_ARG + 1 :]
    else:
      kwargs = {**kwargs, "return_attention": True}
  return next_fun(*args, **kwargs)


def attention_weights(module, params, *inputs, **kwargs):
  """(outputs, [weights_BxHxTxS per layer, first layer first]) of `module.apply(params, ...)`.

  The module must not scan or rematerialize its layers (build it with scan_layers=False,
  remat="none"; the parameters are the same).
  """

  def apply(params, *inputs):
    with nn.intercept_methods(_return_attention):  # active while jit traces
      return module.apply({"params": params}, *inputs, mutable=["intermediates"], **kwargs)

  outputs, state = jax.jit(apply)(params, *inputs)  # one compile, not one per op
  found = []

  def collect(tree, path):
    for key, value in tree.items():
      if key == "attention_weights":
        found.append((path, np.asarray(value[0], np.float32)))
      elif isinstance(value, dict):
        collect(value, path + (key,))

  collect(state.get("intermediates", {}), ())
  if not found:
    raise errors.ConfigError(
        f"{type(module).__name__} sowed no attention weights; visualize needs a model "
        "built from transformer encoder blocks (ViT, BERT, GPT)."
    )
  found.sort(key=lambda item: [int(n) for n in re.findall(r"\d+", "/".join(item[0]))])
  return outputs, [weights for _, weights in found]


def rollout(weights_per_layer):
  """Attention rollout (Abnar & Zuidema 2020): average the heads, add the identity for the
  residual path, renormalize rows, and multiply through the layers (last layer on the left).

  Args:
    weights_per_layer: [weights_BxHxTxT], first layer first (self-attention, T = S).
  Returns:
    rollout_BxTxT: how much each output token draws on each input token.
  """
  result_BxTxT = None
  for weights_BxHxTxT in weights_per_layer:
    mixed_BxTxT = np.mean(weights_BxHxTxT, axis=1) + np.eye(weights_BxHxTxT.shape[-1])
    mixed_BxTxT = mixed_BxTxT / mixed_BxTxT.sum(-1, keepdims=True)
    result_BxTxT = mixed_BxTxT if result_BxTxT is None else mixed_BxTxT @ result_BxTxT
  return result_BxTxT


def patch_distances(grid, patch) -> np.ndarray:
  """distance_NxN: pixel distance between the centres of the patches of a row-major grid."""
  rows, cols = grid
  ph, pw = patch
  y_N, x_N = [a.reshape(-1).astype(np.float64) for a in np.mgrid[:rows, :cols]]
  dy_NxN = (y_N[:, None] - y_N[None, :]) * ph
  dx_NxN = (x_N[:, None] - x_N[None, :]) * pw
  return np.sqrt(dy_NxN**2 + dx_NxN**2)


def mean_attention_distance(weights_BxHxTxT, grid, patch, prefix_tokens: int = 0):
  """distance_H: pixel distance between a patch and the patches it attends to, weighted by
  attention and averaged over the patch queries and the batch (the ViT paper's Figure 7).

  Only patch-to-patch attention counts: prefix tokens (cls) have no place in the image, so each
  query's weights over the patches are renormalized to sum to one.
  """
  p = prefix_tokens
  patches_BxHxNxN = np.asarray(weights_BxHxTxT, np.float64)[:, :, p:, p:]
  patches_BxHxNxN = patches_BxHxNxN / patches_BxHxNxN.sum(-1, keepdims=True)
  per_query_BxHxN = np.einsum("bhqk,qk->bhq", patches_BxHxNxN, patch_distances(grid, patch))
  return per_query_BxHxN.mean(axis=(0, 2))


def query_attention(weights_BxHxTxT, query: str, prefix_tokens: int = 0):
  """weights_BxHxN: the attention of one query over the patches: "cls" (token 0) or "mean"
  (the mean over the patch queries, what a GAP head pools)."""
  p = prefix_tokens
  if query == "cls":
    if not p:
      raise errors.ConfigError("This model has no cls token; use the mean query (--query=mean).")
    return weights_BxHxTxT[..., 0, p:]
  if query == "mean":
    return weights_BxHxTxT[..., p:, p:].mean(axis=-2)
  raise errors.ConfigError(f"Unknown query {query!r}; choose 'cls' or 'mean'.")
