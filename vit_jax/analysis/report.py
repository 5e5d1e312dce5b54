"""Runs the analyses on a loaded model and writes the PNGs plus `summary.json` (the numbers behind
each plot). Everything is computed and checked before the first file is written."""

import json
import os

import numpy as np

from vit_jax import errors
from vit_jax import storage
from vit_jax.analysis import attention
from vit_jax.analysis import images as images_lib
from vit_jax.analysis import loading
from vit_jax.analysis import plots
from vit_jax.analysis import structure

SUMMARY = "summary.json"


def select(requested, count: int, what: str, default) -> list:
  """Validated indices: `requested` (None: `default`), each in [0, count)."""
  chosen = sorted(set(default if requested is None else requested))
  bad = [i for i in chosen if not 0 <= i < count]
  if bad:
    raise errors.ConfigError(
        f"{what} {bad} out of range: the model has {count} {what}s (0..{count - 1})."
    )
  return chosen


def _rounded(array, digits: int = 4):
  return np.round(np.asarray(array, np.float64), digits).tolist()


def _query_label(model: dict, query: str) -> str:
  if query == "cls":
    return "cls token"
  head = model.get("classifier", "token")
  if head == "map":
    return "mean of the patch queries (MAP head: its probe's own attention is not included)"
  return (
      f"mean of the patch queries ({head.upper()} head)"
      if head != "token"
      else "mean of the patch queries"
  )


def visualize_images(
    loaded, paths, *, layers=None, heads=None, query=None, image_size=None, components: int = 28
):
  """(summary dict, {png name: writer}) for a ViT and image files."""
  loading.require_image_model(loaded)
  files = images_lib.expand(paths)
  size = loading.image_size(loaded, image_size)
  patch = loading.patch_size(loaded)
  if size % patch[0] or size % patch[1]:
    raise errors.ConfigError(f"--image_size {size} is not a multiple of the patch size {patch}.")
  grid = (size // patch[0], size // patch[1])
  prefix = loading.prefix_tokens(loaded)
  query = query or ("cls" if prefix else "mean")
  crops, inputs = images_lib.load_images(files, size, images_lib.crop_fraction(loaded))
  _, weights = attention.attention_weights(loaded.module, loaded.params, inputs)
  num_layers, num_heads = len(weights), weights[0].shape[1]
  layers = select(layers, num_layers, "layer", {0, num_layers - 1})
  heads = select(heads, num_heads, "head", range(num_heads))
  label = _query_label(loaded.model, query)

  maps_LxBxHxN = np.stack(
      [attention.query_attention(weights[layer], query, prefix) for layer in layers]
  )
  maps_BxLxHxRxC = (
      maps_LxBxHxN[:, :, heads]
      .transpose(1, 0, 2, 3)
      .reshape(len(files), len(layers), len(heads), *grid)
  )
  rolled_BxTxT = attention.rollout(weights)
  rollout_BxN = (
      rolled_BxTxT[:, 0, prefix:]
      if query == "cls"
      else rolled_BxTxT[:, prefix:, prefix:].mean(axis=1)
  )
  distances_LxH = np.stack(
      [attention.mean_attention_distance(w, grid, patch, prefix) for w in weights]
  )
  components_KxPxQxC, ratios_K = structure.filter_pca(
      loaded.flat[structure.EMBEDDING_KEY], components
  )
  # "class/file.jpg": files of a folder dataset often repeat their names across classes.
  names = [os.path.join(storage.name(storage.parent(f)), storage.name(f)) for f in files]
  summary = {
      "model": loaded.model,
      "images": files,
      "image_size": size,
      "grid": list(grid),
      "attention": {
          "query": label,
          "layers": layers,
          "heads": heads,
          "maps": {n: _rounded(m) for n, m in zip(names, maps_BxLxHxRxC)},
      },
      "rollout": {
          "query": label,
          "maps": {n: _rounded(m.reshape(grid)) for n, m in zip(names, rollout_BxN)},
      },
      "attention_distance": {
          "unit": "pixels",
          "images": len(files),
          "per_layer_per_head": _rounded(distances_LxH, 3),
      },
      "filter_pca": {
          "explained_variance_ratio": _rounded(ratios_K),
          "components": _rounded(components_KxPxQxC),
      },
  }
  writers = {}
  for i, name in enumerate(names):
    stem = f"attention_{i:02d}_{os.path.splitext(name)[0].replace(os.sep, '_')}.png"
    writers[stem] = lambda p, i=i: plots.image_attention(
        p, crops[i], maps_BxLxHxRxC[i], layers, heads, label
    )
  writers["rollout.png"] = lambda p: plots.rollout(
      p, crops, rollout_BxN.reshape(-1, *grid), names, label
  )
  writers["attention_distance.png"] = lambda p: plots.attention_distance(p, distances_LxH, patch[0])
  writers["filters_pca.png"] = lambda p: plots.filter_components(p, components_KxPxQxC, ratios_K)
  if loaded.model.get("posemb", "learn") in ("learn", "sincos2d"):
    table_NxD = structure.position_table(loaded.model, loaded.flat, grid)
    if table_NxD.shape[0] == grid[0] * grid[1]:
      similarity_NxN = structure.position_similarity(table_NxD)
      summary["position_similarity"] = {"grid": list(grid), "matrix": _rounded(similarity_NxN)}
      writers["position_similarity.png"] = lambda p: plots.position_similarity(
          p, similarity_NxN, grid
      )
  return summary, writers


def text_tokens(loaded, tokenizer, text: str) -> list:
  """Token ids as the model was trained on them: BERT rows are `[CLS] text [SEP]`."""
  ids = tokenizer.encode(text)
  if loaded.name != "gpt" and tokenizer.cls_id is not None and tokenizer.sep_id is not None:
    ids = [tokenizer.cls_id] + ids + [tokenizer.sep_id]
  max_len = loaded.flat.get(
      "wpe/embedding",
      loaded.flat.get(
          "bert/position_embeddings/embedding", loaded.flat.get("position_embeddings/embedding")
      ),
  )
  if not ids:
    raise errors.ConfigError("The --text is empty after tokenization; pass some text.")
  if max_len is not None and len(ids) > max_len.shape[0]:
    raise errors.ConfigError(
        f"The text has {len(ids)} tokens but the model takes at most "
        f"{max_len.shape[0]}; pass a shorter --text."
    )
  return ids


def visualize_text(loaded, text: str, *, layers=None, heads=None):
  """(summary dict, {png name: writer}) for a BERT or GPT model and a string."""
  loading.require_text_model(loaded)
  tokenizer = loading.tokenizer(loaded)
  ids = text_tokens(loaded, tokenizer, text)
  _, weights = attention.attention_weights(
      loaded.module, loaded.params, np.asarray([ids], np.int32)
  )
  num_layers, num_heads = len(weights), weights[0].shape[1]
  layers = select(layers, num_layers, "layer", {0, num_layers - 1})
  heads = select(heads, num_heads, "head", range(num_heads))
  tokens = [tokenizer.id_to_piece(i) for i in ids]
  matrices_LxHxTxT = np.stack([weights[layer][0, heads] for layer in layers])
  summary = {
      "model": loaded.model,
      "text": text,
      "tokens": tokens,
      "layers": layers,
      "heads": heads,
      "attention": _rounded(matrices_LxHxTxT),
  }
  writers = {
      "text_attention.png": lambda p: plots.text_attention(
          p, matrices_LxHxTxT, tokens, layers, heads, loaded.name
      )
  }
  return summary, writers


def check_output_dir(output_dir: str) -> None:
  """Nothing already saved is overwritten: the output directory must be new or empty."""
  if storage.exists(output_dir) and not (
      storage.isdir(output_dir) and not storage.listdir(output_dir)
  ):
    raise errors.ConfigError(
        f"--output_dir {output_dir} exists and is not an empty directory; choose a "
        "new one (nothing was written)."
    )


def write(output_dir: str, summary: dict, writers: dict) -> list:
  """Writes every PNG and summary.json into a new (or empty) `output_dir`; returns the paths."""
  check_output_dir(output_dir)
  storage.makedirs(output_dir)
  written = [writer(storage.join(output_dir, name)) for name, writer in writers.items()]
  summary = {**summary, "files": sorted(writers)}
  path = storage.join(output_dir, SUMMARY)
  storage.write_text(path, json.dumps(summary, indent=1, default=str))
  return written + [path]
