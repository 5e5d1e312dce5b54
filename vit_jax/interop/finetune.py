"""Fine-tuning: pretrained params of any format, fitted to a freshly initialized model.

  params, notes = interop.finetune_params(params, config.init_from, **task.init_from_rules())

The source is our workdir (or a checkpoint step), an .npz (original ViT, big_vision or our
names) or a Hugging Face directory; its layers may be scanned or not, and so may the model's.
Any model of ours fine-tunes from our own workdirs and .npz files, not only those that convert.
"""

import os

import jax
import numpy as np

from vit_jax import errors
from vit_jax.interop import common
from vit_jax.interop import fit
from vit_jax.interop import hf_format
from vit_jax.interop import npz_format
from vit_jax.interop import orbax_format
from vit_jax.interop import scan


def read_pretrained(path: str) -> tuple[dict, list]:
  """(flat params in our names with one entry per layer, notes) from any format."""
  if not path or not os.path.exists(path):
    raise errors.MissingFileError(f"init_from={path!r} does not exist.")
  if hf_format.is_hf_dir(path):
    ckpt = hf_format.read(path)
    flat, notes = ckpt.params, ckpt.notes
  elif path.endswith(".npz"):
    flat, notes = npz_format.read(path)
  else:
    flat, notes = orbax_format.read_params(path), []
  return scan.unstack_layers(flat), notes


def finetune_params(
    init_params,
    path: str,
    *,
    prefix_tokens: int = 1,
    head_prefixes=("head/",),
    droppable_prefixes=("pre_logits/",),
    reinit_head: bool = True,
):
  """Returns (params shaped like `init_params` with the pretrained values of `path`, notes).

  Args:
    init_params: the new model's freshly initialized params (a nested tree); they give the
      target keys, shapes and dtypes, and the values of whatever is initialized fresh.
    path: our workdir or checkpoint step, an .npz, or a Hugging Face model directory.
    prefix_tokens: slots before the patch grid in a learned position table (1 for a cls
      token), for resampling it to another image size.
    head_prefixes: the task's new head, initialized fresh when missing or of another shape (if
      reinit_head), dropped when the new model has none.
    droppable_prefixes: pretraining-only layers the new model does not have (ViT's pre-logits,
      BERT's MLM and NSP heads), dropped with a note.
    reinit_head: allow the head changes above; otherwise they are errors.
  """
  pretrained, notes = read_pretrained(path)
  target = {k: np.asarray(v) for k, v in common.flatten(jax.device_get(init_params)).items()}
  per_layer = scan.unstack_layers(target)
  fitted = fit.fit_params(
      pretrained,
      per_layer,
      is_head=lambda k: k.startswith(tuple(head_prefixes)),
      reinit_head=reinit_head,
      is_droppable=lambda k: k.startswith(tuple(droppable_prefixes)),
      prefix_tokens=prefix_tokens,
  )
  common.raise_problems(
      f"The pretrained parameters in {path} do not fit this model (is it the same architecture "
      "and variant?)",
      fitted.problems,
  )
  params = {**fitted.params, **{k: per_layer[k] for k in fitted.fresh}}
  return common.unflatten(scan.stack_layers(params, target)), notes + fitted.notes
