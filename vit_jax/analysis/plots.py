"""The figures: attention overlays, token-by-token attention, attention distance vs depth, the
position-embedding similarity grid and patch-embedding filter components. Each writes one PNG."""

import matplotlib

matplotlib.use("Agg")  # files only, no display
# pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.pyplot as plt
import numpy as np

from vit_jax import storage

_DPI = 100


def _save(fig, path: str) -> str:
  with storage.open(path, "wb") as f:
    fig.savefig(f, format="png", dpi=_DPI, bbox_inches="tight")
  plt.close(fig)
  return path


def _overlay(ax, image_SxSx3, map_RxC, title: str):
  """The image with the attention map stretched over it (bilinear), brighter = more attention."""
  size = image_SxSx3.shape[0]
  ax.imshow(image_SxSx3, extent=(0, size, size, 0), interpolation="nearest")
  ax.imshow(
      map_RxC / max(float(map_RxC.max()), 1e-12),
      extent=(0, size, size, 0),
      cmap="inferno",
      alpha=0.6,
      interpolation="bilinear",
      vmin=0.0,
      vmax=1.0,
  )
  ax.set_title(title, fontsize=9)
  ax.set_xticks([])
  ax.set_yticks([])


def image_attention(path, image_SxSx3, maps_LxHxRxC, layers, heads, query_label: str):
  """Rows: layers, columns: heads; each cell the query's attention over the patches."""
  fig, axes = plt.subplots(
      len(layers),
      len(heads) + 1,
      squeeze=False,
      figsize=(1.9 * (len(heads) + 1), 2.0 * len(layers) + 0.4),
  )
  for row, layer in enumerate(layers):
    axes[row, 0].imshow(image_SxSx3, interpolation="nearest")
    axes[row, 0].set_xticks([])
    axes[row, 0].set_yticks([])
    axes[row, 0].set_ylabel(f"layer {layer}", fontsize=10)
    axes[row, 0].set_title("input" if row == 0 else "", fontsize=9)
    for col, head in enumerate(heads):
      _overlay(axes[row, col + 1], image_SxSx3, maps_LxHxRxC[row, col], f"head {head}")
  fig.suptitle(f"Attention of the {query_label} over the patches (brighter = more)", fontsize=10)
  return _save(fig, path)


def rollout(path, images_BxSxSx3, maps_BxRxC, names, query_label: str):
  """Each image beside its attention rollout."""
  count = len(images_BxSxSx3)
  fig, axes = plt.subplots(2, count, squeeze=False, figsize=(2.2 * count, 4.6))
  for i in range(count):
    axes[0, i].imshow(images_BxSxSx3[i], interpolation="nearest")
    axes[0, i].set_title(names[i][:24], fontsize=8)
    axes[0, i].set_xticks([])
    axes[0, i].set_yticks([])
    _overlay(axes[1, i], images_BxSxSx3[i], maps_BxRxC[i], "rollout")
  axes[0, 0].set_ylabel("input", fontsize=10)
  axes[1, 0].set_ylabel("all layers", fontsize=10)
  fig.suptitle(f"Attention rollout (Abnar & Zuidema 2020) from the {query_label}", fontsize=10)
  return _save(fig, path)


def text_attention(path, matrices_LxHxTxT, tokens, layers, heads, model_name: str):
  """Token-by-token attention per layer and head, queries down, keys across."""
  length = len(tokens)
  cell = max(2.2, 0.16 * length)
  fig, axes = plt.subplots(
      len(layers),
      len(heads),
      squeeze=False,
      figsize=(cell * len(heads) + 0.8, cell * len(layers) + 0.6),
  )
  labels = [repr(t)[1:-1] or " " for t in tokens]
  for row, layer in enumerate(layers):
    for col, head in enumerate(heads):
      ax = axes[row, col]
      image = ax.imshow(matrices_LxHxTxT[row, col], cmap="viridis", vmin=0.0, vmax=1.0)
      ax.set_title(f"layer {layer}, head {head}", fontsize=9)
      ax.set_xticks(range(length), labels, rotation=90, fontsize=7)
      ax.set_yticks(range(length), labels, fontsize=7)
      ax.set_xlabel("key token", fontsize=8)
      ax.set_ylabel("query token", fontsize=8)
  fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
  fig.suptitle(f"{model_name}: attention weights", fontsize=10)
  return _save(fig, path)


def attention_distance(path, distances_LxH, patch_pixels: int):
  """Mean attention distance of every head against depth (ViT paper, Figure 7 right)."""
  layers, heads = distances_LxH.shape
  fig, ax = plt.subplots(figsize=(4.8, 3.6))
  for head in range(heads):
    ax.scatter(np.arange(layers), distances_LxH[:, head], s=18, label=f"head {head}")
  ax.set_xlabel("network depth (layer)")
  ax.set_ylabel("mean attention distance (pixels)")
  ax.set_xticks(range(layers))
  ax.set_ylim(bottom=0)
  ax.grid(alpha=0.3)
  if heads <= 8:
    ax.legend(fontsize=7, loc="lower right")
  ax.set_title(f"Attention distance per head ({patch_pixels} px patches)", fontsize=10)
  return _save(fig, path)


def position_similarity(path, similarity_NxN, grid):
  """For each patch (a small map at its place in the grid): cosine similarity of its position
  embedding with every patch's (ViT paper, Figure 7 centre)."""
  rows, cols = grid
  size = max(3.5, min(0.55 * max(rows, cols), 9.0))  # small grids still get readable labels
  fig, axes = plt.subplots(rows, cols, squeeze=False, figsize=(size + 1.0, size * rows / cols))
  for r in range(rows):
    for c in range(cols):
      ax = axes[r, c]
      image = ax.imshow(
          similarity_NxN[r * cols + c].reshape(rows, cols),
          cmap="viridis",
          vmin=-1.0,
          vmax=1.0,
          interpolation="nearest",
      )
      ax.set_xticks([])
      ax.set_yticks([])
      if c == 0:
        ax.set_ylabel(str(r + 1), fontsize=7, rotation=0, labelpad=6)
      if r == rows - 1:
        ax.set_xlabel(str(c + 1), fontsize=7)
  fig.supxlabel("input patch column", fontsize=9)
  fig.supylabel("input patch row", fontsize=9)
  fig.colorbar(image, ax=axes, shrink=0.7, label="cosine similarity")
  fig.suptitle("Position embedding similarity", fontsize=10)
  return _save(fig, path)


def filter_components(path, components_KxPxQxC, ratios_K):
  """The top principal components of the patch-embedding filters, each scaled to [0, 1]."""
  count = len(components_KxPxQxC)
  cols = min(count, 7)
  rows = -(-count // cols)
  fig, axes = plt.subplots(rows, cols, squeeze=False, figsize=(1.4 * cols, 1.6 * rows + 0.4))
  for ax in axes.flat:
    ax.axis("off")
  for k, (component, ratio) in enumerate(zip(components_KxPxQxC, ratios_K)):
    low, high = component.min(), component.max()
    scaled = (component - low) / max(high - low, 1e-12)
    ax = axes.flat[k]
    ax.imshow(
        scaled if scaled.shape[-1] == 3 else scaled[..., 0], cmap="gray", interpolation="nearest"
    )
    ax.set_title(f"PC {k + 1}: {100 * ratio:.1f}%", fontsize=8)
  fig.suptitle("Patch-embedding filters: top principal components (% of variance)", fontsize=10)
  return _save(fig, path)
