"""Checks converted params against the model their config builds, and adapts heads on request.

Every key and shape must match. The exceptions: a task head (ViT `head`, BERT `classifier`,
`mlm`, `nsp`, `pooler`) that is missing, extra or of another class count is re-initialized or
dropped when the caller passes `reinit_head=True`; a param the model never uses (the pooler of a
masked-LM model) is filled in fresh. Values are cast to the model's parameter dtype.
"""

import numpy as np

from vit_jax.interop import common
from vit_jax.interop import models

_HINT = ("Task heads that are missing, extra or of another shape (e.g. another class count) "
         "are re-initialized or dropped only on request: pass reinit_head=True (--reinit-head), "
         "with the model config that has the new head (--model).")


def fit(ckpt: common.Checkpoint, reinit_head: bool = False, seed: int = 0) -> common.Checkpoint:
  """Returns a checkpoint whose params are exactly those of `ckpt.model`; raises listing problems."""
  name = models.check_supported(ckpt.model)
  ckpt = common.Checkpoint(models.unstack_layers(ckpt.params), ckpt.model, ckpt.notes)
  expected = models.expected_params(ckpt.model, ckpt.params)
  params, notes, problems, fresh = {}, list(ckpt.notes), [], []
  head_problem = False

  def may_reinit(key):
    return models.is_unused(name, key) or (reinit_head and models.is_head(name, key))

  for key, spec in expected.items():
    value = ckpt.params.get(key)
    if value is None:
      if may_reinit(key):
        fresh.append(key)
        notes.append(f"{key}: not in the checkpoint, initialized fresh")
      else:
        problems.append(f"missing in checkpoint: {key} {tuple(spec.shape)}")
        head_problem |= models.is_head(name, key)
    elif common.shape_of(value) != tuple(spec.shape):
      if may_reinit(key):
        fresh.append(key)
        notes.append(f"{key}: checkpoint {common.shape_of(value)} -> model {tuple(spec.shape)}, "
                     "re-initialized")
      else:
        problems.append(f"shape mismatch: {key} checkpoint {common.shape_of(value)}, model "
                        f"{tuple(spec.shape)}")
        head_problem |= models.is_head(name, key)
    else:
      params[key] = np.asarray(value)
  for key in sorted(set(ckpt.params) - set(expected)):
    if reinit_head and models.is_head(name, key):
      notes.append(f"{key}: dropped (this model has no such head)")
    else:
      problems.append(f"unexpected in checkpoint: {key} {common.shape_of(ckpt.params[key])}")
      head_problem |= models.is_head(name, key)
  common.raise_problems(
      f"The parameters do not fit the model {_describe(ckpt.model)} (is it the same architecture "
      "and size?)", problems, _HINT if head_problem else "")

  if fresh:
    initialized = models.init_params(ckpt.model, ckpt.params, seed)
    params.update({k: initialized[k] for k in fresh})
  cast = sorted({f"{params[k].dtype} -> {np.dtype(s.dtype)}" for k, s in expected.items()
                 if params[k].dtype != s.dtype})
  if cast:
    notes.append(f"cast parameters {', '.join(cast)}")
  params = {k: params[k].astype(s.dtype, copy=False) for k, s in expected.items()}
  return common.Checkpoint(params, dict(ckpt.model), notes)


def _describe(config: dict) -> str:
  fields = ", ".join(f"{k}={v!r}" for k, v in config.items() if k != "name")
  return f"{config.get('name')!r} ({fields})"
