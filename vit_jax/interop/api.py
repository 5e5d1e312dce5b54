"""Load, save and convert checkpoints between our workdirs, `.npz` files and Hugging Face dirs."""

import jax
import numpy as np

from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.interop import finetune
from vit_jax.interop import flat_params
from vit_jax.interop import hf_format
from vit_jax.interop import models
from vit_jax.interop import npz_format
from vit_jax.interop import orbax_format

FORMATS = ("npz", "hf", "orbax")


def detect_format(path: str) -> str:
  """ "npz" for a file, "hf" for a directory with config.json, else "orbax" (our workdir)."""
  if not storage.exists(path):
    raise errors.MissingFileError(f"{path} does not exist.")
  if storage.isfile(path):
    return "npz"
  return "hf" if hf_format.is_hf_dir(path) else "orbax"


def _check_format(fmt: str) -> str:
  if fmt not in FORMATS:
    raise errors.ConversionError(f"Unknown checkpoint format {fmt!r}; choose one of {FORMATS}.")
  return fmt


def load(
    path: str,
    model: dict | None = None,
    *,
    reinit_head: bool = False,
    fmt: str | None = None,
    ema: bool = False,
) -> models.Checkpoint:
  """Reads a checkpoint into our names, checked against our model.

  Args:
    path: our workdir or step directory, an .npz, or a Hugging Face model directory.
    model: our model config, or overrides of the one read with the checkpoint (an .npz has
      none: it is inferred from the parameter names and shapes), e.g. {"num_classes": 10}.
    reinit_head: re-initialize (or drop) a task head that does not fit the model, instead of
      raising; each such change is listed in the returned notes.
    fmt: "npz", "hf" or "orbax"; detected from the path when None.
    ema: our workdir's EMA of the params (trained with `config.ema_decay`) instead of its params.
  """
  fmt = _check_format(fmt or detect_format(path))
  if ema and fmt != "orbax":
    raise errors.ConversionError(
        f"{path} is a {fmt} checkpoint: only our workdirs hold an EMA of the params (--ema)."
    )
  if fmt == "npz":
    flat, notes = npz_format.read(path)
    read = models.Checkpoint(flat, _infer(flat, notes, model), notes)
  else:
    read = hf_format.read(path) if fmt == "hf" else orbax_format.read(path, ema)
  config = models.configure(read.model, model)
  flat = models.rebase(read.params, read.model.get("name"), config.get("name"))
  return finetune.fit(
      models.Checkpoint(flat, config, read.notes, read.tokenizer), reinit_head=reinit_head
  )


def _infer(flat: dict, notes: list, model: dict | None) -> dict:
  try:
    return models.infer(flat, notes)
  except errors.ConversionError:
    if model and "name" in model:  # the caller says which model it is
      return {}
    raise


def from_tree(params, model: dict, tokenizer=None) -> models.Checkpoint:
  """A checkpoint of in-memory params (a nested tree, e.g. from `model.init` or training)."""
  flat = {k: np.asarray(v) for k, v in flat_params.flatten(jax.device_get(params)).items()}
  return finetune.fit(models.Checkpoint(flat, dict(model), tokenizer=tokenizer))


def save(
    ckpt: models.Checkpoint, path: str, to: str, *, layout: str = "vit", overwrite: bool = False
) -> list:
  """Writes `ckpt` as `to` ("npz", "hf" or "orbax"), completely or not at all; returns notes.

  `layout` is for .npz files: "vit" (the original ViT names, ours) or "big_vision". The
  tokenizer goes along into a workdir (any kind) or a Hugging Face directory (tokenizer.json);
  an .npz holds parameters only.
  """
  _check_format(to)
  ckpt = finetune.fit(ckpt)  # the params must be exactly the model's
  if to == "hf":
    return hf_format.write(ckpt, path, overwrite=overwrite)
  if to == "npz":
    npz_format.write(ckpt, path, layout=layout, overwrite=overwrite)
  else:
    orbax_format.write(ckpt, path, overwrite=overwrite)
  if ckpt.tokenizer is None:
    return []
  if to == "npz":
    return ["the tokenizer was not written: an .npz holds parameters only"]
  return [f"wrote the {ckpt.tokenizer.kind!r} tokenizer to {workdir_lib.tokenizer_dir(path)}"]


def convert(
    src: str,
    dst: str,
    to: str,
    *,
    model: dict | None = None,
    reinit_head: bool = False,
    layout: str = "vit",
    fmt: str | None = None,
    overwrite: bool = False,
    ema: bool = False,
) -> models.Checkpoint:
  """`save(load(src, ...), dst, to, ...)`; returns the checkpoint (with its notes)."""
  ckpt = load(src, model, reinit_head=reinit_head, fmt=fmt, ema=ema)
  ckpt.notes += save(ckpt, dst, to, layout=layout, overwrite=overwrite)
  return ckpt
