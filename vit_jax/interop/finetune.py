"""Fitting pretrained params to a model: for conversion and for fine-tuning.

  params, notes = interop.finetune_params(params, config.init_from, **task.init_from_rules())

Every key and shape must match. The exceptions, each listed in the notes:
  * a task head that is missing or of another shape (e.g. another class count) is initialized
    fresh, and one the model lacks is dropped, when the caller allows it (`reinit_head`);
  * a param the model never uses for its outputs (the pooler of a masked-LM model) is filled in
    fresh; pretraining-only layers the caller names droppable are dropped;
  * a learned position table over a patch grid is resampled to the model's grid, when the caller
    says how many prefix (cls) slots it has.
Values are cast to the model's parameter dtypes. Both sides are per-layer (flat_params).

`fit` serves conversion (the model config decides heads and builds fresh values);
`finetune_params` serves fine-tuning: the caller's freshly initialized params decide, the source
is any format (our workdir or a step, an .npz, a Hugging Face directory) with scanned layers or
not, and any model of ours fine-tunes from our own workdirs and .npz files.
"""

import dataclasses
from typing import Callable, Optional

import jax
import numpy as np

from vit_jax import errors
from vit_jax import storage
from vit_jax.interop import flat_params
from vit_jax.interop import hf_format
from vit_jax.interop import models
from vit_jax.interop import npz_format
from vit_jax.interop import orbax_format
from vit_jax.models import position

_HINT = (
    "Task heads that are missing, extra or of another shape (e.g. another class count) "
    "are re-initialized or dropped only on request: pass reinit_head=True (--reinit-head), "
    "with the model config that has the new head (--model)."
)
_never = lambda key: False


@dataclasses.dataclass
class Fitted:
  params: dict  # the model's keys that took pretrained values (cast to the model's dtype)
  fresh: list  # the model's keys to initialize fresh
  notes: list
  problems: list
  head_problem: bool  # some problem concerns a task head (so reinit_head may be the fix)


def fit_params(
    pretrained: dict,
    target: dict,
    *,
    is_head: Callable[[str], bool],
    reinit_head: bool,
    is_droppable: Callable[[str], bool] = _never,
    is_unused: Callable[[str], bool] = _never,
    prefix_tokens: Optional[int] = None,
) -> Fitted:
  """Fits flat `pretrained` to `target` ({key: array or ShapeDtypeStruct}, the model's params).

  prefix_tokens: slots before the patch grid in a learned `pos_embedding` table (1 with a cls
    token); such a table of another size is resampled. None: a size mismatch is a problem.
  """
  fitted = Fitted({}, [], [], [], False)
  may_reinit = lambda key: is_unused(key) or (reinit_head and is_head(key))

  def problem(text, key):
    fitted.problems.append(text)
    fitted.head_problem |= is_head(key)

  for key, spec in target.items():
    want = tuple(spec.shape)
    if key not in pretrained:
      if may_reinit(key):
        fitted.fresh.append(key)
        fitted.notes.append(f"{key}: not in the checkpoint, initialized fresh")
      else:
        problem(f"missing in checkpoint: {key} {want}", key)
      continue
    value = np.asarray(pretrained[key])
    if value.shape == want:
      fitted.params[key] = value.astype(spec.dtype, copy=False)
    elif may_reinit(key):
      fitted.fresh.append(key)
      fitted.notes.append(f"{key}: checkpoint {value.shape} -> model {want}, re-initialized")
    elif prefix_tokens is not None and key.endswith("pos_embedding") and value.ndim == 3:
      try:
        fitted.params[key] = _resample(value, want, prefix_tokens).astype(spec.dtype)
        fitted.notes.append(f"{key}: resampled {value.shape} -> {want}")
      except ValueError as e:
        problem(f"cannot resample {key} {value.shape} -> {want}: {e}", key)
    else:
      problem(f"shape mismatch: {key} checkpoint {value.shape}, model {want}", key)
  for key in sorted(set(pretrained) - set(target)):
    if is_droppable(key) or (reinit_head and is_head(key)):
      fitted.notes.append(f"{key}: dropped (the model has no such layer)")
    else:
      problem(f"unexpected in checkpoint: {key} {flat_params.shape_of(pretrained[key])}", key)
  cast = sorted(
      {
          f"{np.asarray(pretrained[k]).dtype} -> {v.dtype}"
          for k, v in fitted.params.items()
          if np.asarray(pretrained[k]).dtype != v.dtype
      }
  )
  if cast:
    fitted.notes.append(f"cast parameters {', '.join(cast)}")
  return fitted


def _resample(table_1xLxD, want: tuple, prefix_tokens: int):
  side = int(round((want[1] - prefix_tokens) ** 0.5))
  if want[0] != 1 or want[2] != table_1xLxD.shape[2] or side * side != want[1] - prefix_tokens:
    raise ValueError("the model's table is not a square patch grid of the same width")
  return position.resample_grid_embedding(table_1xLxD, (side, side), prefix_tokens)


def fit(ckpt: models.Checkpoint, reinit_head: bool = False, seed: int = 0) -> models.Checkpoint:
  """A checkpoint whose params are exactly those of `ckpt.model`; raises listing problems."""
  name = models.check_supported(ckpt.model)
  flat = flat_params.unstack_layers(ckpt.params)
  expected = models.expected_params(ckpt.model, flat)
  fitted = fit_params(
      flat,
      expected,
      is_head=lambda k: models.is_head(name, k),
      reinit_head=reinit_head,
      is_unused=lambda k: models.is_unused(name, k),
  )
  flat_params.raise_problems(
      f"The parameters do not fit the model {_describe(ckpt.model)} (is it the same architecture "
      "and size?)",
      fitted.problems,
      _HINT if fitted.head_problem else "",
  )
  params = fitted.params
  if fitted.fresh:
    initialized = models.init_params(ckpt.model, flat, seed)
    params.update({k: initialized[k].astype(expected[k].dtype) for k in fitted.fresh})
  params = {k: params[k] for k in expected}
  return dataclasses.replace(
      ckpt, params=params, model=dict(ckpt.model), notes=list(ckpt.notes) + fitted.notes
  )


def _describe(config: dict) -> str:
  fields = ", ".join(f"{k}={v!r}" for k, v in config.items() if k != "name")
  return f"{config.get('name')!r} ({fields})"


# ---- Fine-tuning: pretrained params of any format, fitted to a fresh model -----------------------


def read_pretrained(path: str) -> tuple[dict, list]:
  """(flat params in our names with one entry per layer, notes) from any format."""
  if not path or not storage.exists(path):
    raise errors.MissingFileError(f"init_from={path!r} does not exist.")
  if hf_format.is_hf_dir(path):
    ckpt = hf_format.read(path)
    flat, notes = ckpt.params, ckpt.notes
  elif path.endswith(".npz"):
    flat, notes = npz_format.read(path)
  else:
    flat, notes = orbax_format.read_params(path), []
  return flat_params.unstack_layers(flat), notes


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
  target = {k: np.asarray(v) for k, v in flat_params.flatten(jax.device_get(init_params)).items()}
  per_layer = flat_params.unstack_layers(target)
  fitted = fit_params(
      pretrained,
      per_layer,
      is_head=lambda k: k.startswith(tuple(head_prefixes)),
      reinit_head=reinit_head,
      is_droppable=lambda k: k.startswith(tuple(droppable_prefixes)),
      prefix_tokens=prefix_tokens,
  )
  flat_params.raise_problems(
      f"The pretrained parameters in {path} do not fit this model (is it the same architecture "
      "and variant?)",
      fitted.problems,
  )
  params = {**fitted.params, **{k: per_layer[k] for k in fitted.fresh}}
  return flat_params.unflatten(flat_params.stack_layers(params, target)), notes + fitted.notes
