"""Model library: attention, blocks, and the ViT, BiT ResNet, Mixer/FNet, BERT, GPT and seq2seq
families, and a local-window CNN.

The model classes load on first use (`vit_jax.models.Gpt` imports models/gpt.py then), so a run
imports only the family its config names. Which classes there are comes from the model table
(registry.py MODELS).
"""

from vit_jax.models import registry
from vit_jax.models.registry import build_model
from vit_jax.models.registry import MODELS

# class name -> "module.Class" under vit_jax/models
_CLASSES = {path.split(".")[1]: path for path in registry.class_paths()}

__all__ = [  # noqa: PLE0604 -- the names of _CLASSES, loaded by __getattr__
    "build_model",
    "MODELS",
    *_CLASSES,
]


def __getattr__(name: str):
  if name in _CLASSES:
    return registry.load_class(_CLASSES[name])
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
