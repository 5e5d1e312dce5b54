"""Builds any model of the project from its config by name.

A model config is a mapping with `name` plus the keyword arguments of that model's module,
e.g. {"name": "vit", "variant": "S/16", "num_classes": 10}. Keys a module does not have are an
error, never silently dropped.
"""

import dataclasses
import importlib
from typing import Any, Mapping

import flax.linen as nn

from vit_jax import errors


def _fields(module_cls) -> set[str]:
  return {f.name for f in dataclasses.fields(module_cls) if f.name not in ("parent", "name")}


def _make(module_cls, kwargs: Mapping[str, Any], model_name: str, extra=()):
  unknown = set(kwargs) - _fields(module_cls) - set(extra)
  if unknown:
    raise errors.ConfigError(
        f"Unknown option(s) {sorted(unknown)} for model {model_name!r}; "
        f"valid ones are {sorted(_fields(module_cls) | set(extra))}."
    )
  return module_cls(**{k: v for k, v in kwargs.items() if k not in extra})


def _class(path: str):
  """ "bert.Bert" -> vit_jax.models.bert.Bert, imported on first use (a ViT run loads no BERT)."""
  module, name = path.split(".")
  return getattr(importlib.import_module(f"vit_jax.models.{module}"), name)


def _plain(path: str):
  return lambda kwargs, model_name: _make(_class(path), kwargs, model_name)


def _bert_task(path: str, head_fields):
  def build(kwargs, model_name):
    head = {k: v for k, v in kwargs.items() if k in head_fields}
    encoder = _make(
        _class("bert.Bert"), {k: v for k, v in kwargs.items() if k not in head_fields}, model_name
    )
    return _class(path)(bert=encoder, **head)

  return build


_BUILDERS = {
    "vit": _plain("vit.ViT"),
    "mixer": _plain("mixer.MlpMixer"),
    "fnet": _plain("mixer.FNet"),
    "resnet": _plain("resnet.ResNetV2"),
    "local_cnn": _plain("local_cnn.LocalCNN"),
    "gpt": _plain("gpt.Gpt"),
    "seq2seq": _plain("seq2seq.EncoderDecoder"),
    "bert": _bert_task("bert.BertForPreTraining", {"next_sentence"}),
    "bert_mlm": _bert_task("bert.BertForMaskedLM", set()),
    "bert_classifier": _bert_task("bert.BertForSequenceClassification", {"num_classes"}),
}
MODELS = tuple(_BUILDERS)


def build_model(config: Mapping[str, Any], **overrides) -> nn.Module:
  """Returns the (unbound) Flax module named by config["name"], built from the other keys."""
  kwargs = dict(config.to_dict() if hasattr(config, "to_dict") else config)
  kwargs.update(overrides)
  name = kwargs.pop("name", None)
  if name not in _BUILDERS:
    raise errors.ConfigError(f"Unknown model {name!r}; choose one of {list(MODELS)}.")
  return _BUILDERS[name](kwargs, name)
