"""Top-k predictions: class names for image files (ViT), token fills for `[MASK]` (masked LM)."""

import jax
import numpy as np

from vit_jax import errors
from vit_jax import storage
from vit_jax.analysis import images as images_lib
from vit_jax.analysis import loading
from vit_jax.tasks import classification

MASK = "[MASK]"


def _top_k(logits_NxC, k: int, probabilities=jax.nn.softmax):
  """(indices_NxK, probabilities_NxK), most likely first."""
  probs_NxC = np.asarray(probabilities(np.asarray(logits_NxC, np.float32)))
  k = min(k, probs_NxC.shape[-1])
  order_NxK = np.argsort(-probs_NxC, axis=-1, kind="stable")[:, :k]
  return order_NxK, np.take_along_axis(probs_NxC, order_NxK, axis=-1)


def classify_images(
    loaded,
    paths,
    *,
    top_k: int = 5,
    batch_size: int = 64,
    image_size: int | None = None,
    labels_file: str | None = None,
) -> list:
  """[{"file", "top_k": [{"label", "name", "probability"}]}] for every image file (folders too).

  Probabilities as the model was trained: a sigmoid per class for a workdir trained with
  `loss=sigmoid_xent` (they need not sum to 1), else a softmax over the classes (an imported
  checkpoint, whose loss is not recorded, too)."""
  loading.require_image_model(loaded)
  if not loaded.model.get("num_classes"):
    raise errors.ConfigError(f"{loaded.path} has no classification head; predict needs one.")
  files = images_lib.expand(paths)
  names = images_lib.class_names(loaded, loaded.model["num_classes"], labels_file)
  size = loading.image_size(loaded, image_size)
  loss = classification.loss_name(loaded.workdir_config)
  probabilities = classification.PROBABILITIES[classification.LOSSES[loss]]
  apply = jax.jit(lambda params, x: loaded.module.apply({"params": params}, x))
  results = []
  for start in range(0, len(files), batch_size):
    batch = files[start : start + batch_size]
    _, images_BxSxSx3 = images_lib.load_images(batch, size, images_lib.crop_fraction(loaded))
    order_BxK, probs_BxK = _top_k(apply(loaded.params, images_BxSxSx3), top_k, probabilities)
    for path, order_K, probs_K in zip(batch, order_BxK, probs_BxK):
      results.append(
          {
              "file": path,
              "top_k": [
                  {"label": int(c), "name": names[c], "probability": round(float(p), 5)}
                  for c, p in zip(order_K, probs_K)
              ],
          }
      )
  return results


def fill_masks(loaded, text: str, *, top_k: int = 5) -> dict:
  """{"text", "masks": [{"position", "top_k": [{"token", "piece", "probability"}]}]}."""
  if loaded.name not in ("bert", "bert_mlm"):
    hint = " (for a GPT use python -m vit_jax.generate)" if loaded.name == "gpt" else ""
    raise errors.ConfigError(
        f"{loaded.path} is a {loaded.name!r} model; filling in {MASK} needs a "
        f"masked-LM (BERT) model{hint}."
    )
  if MASK not in text:
    raise errors.ConfigError(
        f"The text has no {MASK} token to fill in, e.g. --text='The {MASK} sat'."
    )
  tokenizer = loading.tokenizer(loaded)
  tokenizer.require("mask", "cls", "sep")
  ids = [tokenizer.cls_id]
  for i, part in enumerate(text.split(MASK)):  # encode the text around each [MASK] on its own
    if i:
      ids.append(tokenizer.mask_id)
    ids.extend(tokenizer.encode(part) if part else [])
  ids.append(tokenizer.sep_id)
  max_len = loaded.model.get("max_len", 512)
  if len(ids) > max_len:
    raise errors.ConfigError(f"The text has {len(ids)} tokens; the model takes at most {max_len}.")
  positions = [p for p, t in enumerate(ids) if t == tokenizer.mask_id]
  tokens_1xL = np.asarray([ids], np.int32)
  outputs = jax.jit(lambda params, t: loaded.module.apply({"params": params}, t))(
      loaded.params, tokens_1xL
  )
  order_PxK, probs_PxK = _top_k(np.asarray(outputs["mlm_logits"])[0, positions], top_k)
  masks = [
      {
          "position": p,
          "top_k": [
              {
                  "token": int(t),
                  "piece": tokenizer.id_to_piece(int(t)),
                  "probability": round(float(q), 5),
              }
              for t, q in zip(order_K, probs_K)
          ],
      }
      for p, order_K, probs_K in zip(positions, order_PxK, probs_PxK)
  ]
  return {"text": text, "masks": masks}


def describe_image(result: dict) -> str:
  best = ", ".join(f"{t['name']} {100 * t['probability']:.1f}%" for t in result["top_k"])
  return f"{storage.name(result['file'])}: {best}"


def describe_masks(result: dict) -> list:
  return [
      f"{MASK} at token {m['position']}: "
      + ", ".join(f"{t['piece']!r} {100 * t['probability']:.1f}%" for t in m["top_k"])
      for m in result["masks"]
  ]
