"""`.npz` parameter files: flat `/`-joined names, read with `allow_pickle=False`.

ViT files come in the original ViT layout (our own names) or big_vision's (see `vit_npz`), both
read; other models are written in our own names. A bare file carries no config: the model is
recognized from its names and shapes (`models.infer`), or given by the caller.
"""

import zipfile
import zlib

import numpy as np

from vit_jax import errors
from vit_jax import storage
from vit_jax.interop import models
from vit_jax.interop import vit_npz


def read(path: str) -> tuple[dict, list]:
  """(flat params in our names, notes)."""
  with storage.local_copy(path) as local:
    return _read(path, local)


def _read(path: str, local: str) -> tuple[dict, list]:
  if not zipfile.is_zipfile(local):  # np.load would try it as a pickle and say so
    raise errors.ConversionError(
        f"{path} is not an .npz file (not a zip archive); pass a file "
        "written by np.savez or vit_jax.convert."
    )
  try:
    with np.load(local, allow_pickle=False) as data:
      flat = {k: data[k] for k in data.files}
  except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
    # truncated or bit-flipped archives, and pickled object arrays, which are refused
    raise errors.ConversionError(
        f"Cannot read {path} as an .npz of parameters ({e}); the file "
        "is damaged or not ours: re-export or re-download it."
    ) from e
  notes = []
  flat, prefix = vit_npz.strip_prefix(flat)
  if vit_npz.is_big_vision(flat):
    flat = vit_npz.from_big_vision(flat)
    notes.append("read the big_vision layout")
  elif prefix:
    notes.append(f"removed the prefix {prefix!r}")
  return flat, notes


def write(ckpt: models.Checkpoint, path: str, layout: str = "vit", overwrite: bool = False):
  """Writes our names ("vit": the original ViT layout) or, for a ViT, the big_vision layout."""
  if layout not in vit_npz.LAYOUTS:
    raise errors.ConversionError(
        f"Unknown .npz layout {layout!r}; choose one of " f"{list(vit_npz.LAYOUTS)}."
    )
  flat = dict(ckpt.params)
  if layout == "big_vision":
    if ckpt.model.get("name") != "vit":
      raise errors.ConversionError("The big_vision layout is for ViT models only.")
    flat = vit_npz.to_big_vision(flat)
  # numpy has no bfloat16: such arrays would not load back without pickle.
  flat = {k: v.astype(np.float32) if v.dtype.kind == "V" else v for k, v in flat.items()}
  with storage.output_path(path, overwrite) as staged:
    with open(staged, "wb") as f:
      np.savez(f, **flat)
