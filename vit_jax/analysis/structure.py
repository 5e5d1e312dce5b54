"""What a ViT's parameters show without any input: position-embedding similarity across the patch
grid (the ViT paper's Figure 7, centre) and the principal components of the patch-embedding
filters (Figure 7, left)."""

import numpy as np

from vit_jax import errors
from vit_jax.models import position

POSEMB_KEY = "Transformer/posembed_input/pos_embedding"
EMBEDDING_KEY = "embedding/kernel"


def position_table(model: dict, flat_params: dict, grid) -> np.ndarray:
  """table_NxD: the position embedding of each patch (row-major), learned or 2-D sin-cos."""
  kind = model.get("posemb", "learn")
  prefix = 1 if model.get("classifier", "token") == "token" else 0
  if kind == "learn":
    table_1xLxD = np.asarray(flat_params[POSEMB_KEY], np.float32)
    return table_1xLxD[0, prefix:]
  if kind == "sincos2d":
    width = np.shape(flat_params[EMBEDDING_KEY])[-1]
    return position.sincos_2d(grid[0], grid[1], width)
  raise errors.ConfigError(
      f"The model has position embeddings {kind!r}; the similarity plot needs "
      "'learn' or 'sincos2d'."
  )


def position_similarity(table_NxD) -> np.ndarray:
  """similarity_NxN: cosine similarity of every patch's position embedding with every other."""
  table_NxD = np.asarray(table_NxD, np.float64)
  unit_NxD = table_NxD / np.maximum(np.linalg.norm(table_NxD, axis=-1, keepdims=True), 1e-12)
  return unit_NxD @ unit_NxD.T


def filter_pca(kernel_PxQxCxD, num_components: int):
  """(components_KxPxQxC, explained variance ratio_K) of the D patch-embedding filters.

  Each filter (a P x Q x C kernel, one per embedding channel) is a point; the components are the
  directions of largest variance among them, unit-norm, sign fixed so the largest entry is
  positive (PCA leaves the sign free).
  """
  kernel_PxQxCxD = np.asarray(kernel_PxQxCxD, np.float64)
  shape = kernel_PxQxCxD.shape[:3]
  filters_DxF = kernel_PxQxCxD.reshape(-1, kernel_PxQxCxD.shape[-1]).T
  num_components = min(num_components, *filters_DxF.shape)
  centred_DxF = filters_DxF - filters_DxF.mean(axis=0, keepdims=True)
  _, singular_F, components_FxF = np.linalg.svd(centred_DxF, full_matrices=False)
  variance_F = singular_F**2
  components_KxF = components_FxF[:num_components]
  flip_K = np.sign(
      components_KxF[np.arange(num_components), np.argmax(np.abs(components_KxF), axis=1)]
  )
  components_KxF = components_KxF * flip_K[:, None]
  ratio_K = variance_F[:num_components] / max(variance_F.sum(), 1e-30)
  return components_KxF.reshape(num_components, *shape), ratio_K
