"""Checkpoint interop: our workdirs, original ViT / big_vision `.npz` files and Hugging Face
directories (BERT, GPT-2, ViT), each read into and written from our parameter names exactly, and
fitting pretrained params to a model for fine-tuning. Nothing here imports the trainer.

  from vit_jax import interop
  ckpt = interop.load("hf_gpt2_dir")             # or an .npz, or our workdir
  logits = ckpt.module().apply({"params": ckpt.tree()}, tokens)
  interop.save(ckpt, "gpt.npz", to="npz")         # "npz", "hf" or "orbax"
  interop.convert("workdir", "vit.npz", to="npz", layout="big_vision")
  params, notes = interop.finetune_params(params, "vit.npz", prefix_tokens=1)

The command line is `python -m vit_jax.convert` (see vit_jax/convert.py).
"""

from vit_jax.errors import ConversionError
from vit_jax.interop.api import convert
from vit_jax.interop.api import detect_format
from vit_jax.interop.api import FORMATS
from vit_jax.interop.api import from_tree
from vit_jax.interop.api import load
from vit_jax.interop.api import save
from vit_jax.interop.finetune import finetune_params
from vit_jax.interop.finetune import read_pretrained
from vit_jax.interop.flat_params import flatten
from vit_jax.interop.flat_params import unflatten
from vit_jax.interop.models import Checkpoint
from vit_jax.interop.orbax_format import read_params
from vit_jax.interop.vit_npz import LAYOUTS

__all__ = [
    "convert",
    "detect_format",
    "FORMATS",
    "from_tree",
    "load",
    "save",
    "ConversionError",
    "flatten",
    "unflatten",
    "Checkpoint",
    "finetune_params",
    "read_pretrained",
    "read_params",
    "LAYOUTS",
]
