"""Model library: attention, blocks, and the ViT, BiT ResNet, Mixer/FNet, BERT, GPT and seq2seq
families, and a local-window CNN.

The model classes load on first use (`vit_jax.models.Gpt` imports models/gpt.py then), so a run
imports only the family its config names.
"""

import importlib

from vit_jax.models.registry import build_model
from vit_jax.models.registry import MODELS

# class name -> module under vit_jax/models
_CLASSES = {
    "Bert": "bert",
    "BertForMaskedLM": "bert",
    "BertForPreTraining": "bert",
    "BertForSequenceClassification": "bert",
    "Gpt": "gpt",
    "FNet": "mixer",
    "LocalCNN": "local_cnn",
    "MlpMixer": "mixer",
    "EncoderDecoder": "seq2seq",
    "ResNetV2": "resnet",
    "ViT": "vit",
}

__all__ = [  # noqa: PLE0604 -- the names of _CLASSES, loaded by __getattr__
    "build_model",
    "MODELS",
    *_CLASSES,
]


def __getattr__(name: str):
  if name in _CLASSES:
    return getattr(importlib.import_module(f"vit_jax.models.{_CLASSES[name]}"), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
