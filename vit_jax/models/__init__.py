"""Model library: attention, blocks, and the ViT, BiT ResNet, Mixer/FNet, BERT, GPT and seq2seq
families, and a local-window CNN; and the one table of models (MODELS): each name with its class
and the task that trains it, and building a model from its config by name.

A model config is a mapping with `name` plus the keyword arguments of that model's class,
e.g. {"name": "vit", "variant": "S/16", "num_classes": 10}. Keys a class does not have are an
error, never silently dropped.

A new model is one row of MODELS; the task (vit_jax/tasks) that trains it and the classes that
`vit_jax.models` exports follow from the row. The model classes load on first use
(`vit_jax.models.Gpt` imports models/gpt.py then), so a run imports only the family its config
names.
"""

import dataclasses
import importlib
from typing import Any, Mapping

from vit_jax import errors


@dataclasses.dataclass(frozen=True)
class Model:
  cls: str  # "module.Class" under vit_jax/models, imported on first use (a ViT run loads no BERT)
  task: str  # the task (vit_jax/tasks) that trains it
  # A task model around the BERT encoder: the keys its head takes; the others build the encoder
  # (ENCODER), which the head wraps. None: the class takes every key.
  head: tuple[str, ...] | None = None


ENCODER = "bert.Bert"
# Grouped by task, in the order of vit_jax/tasks TASKS.
MODELS = {
    "vit": Model("vit.ViT", "image_classification"),
    "resnet": Model("resnet.ResNetV2", "image_classification"),
    "mixer": Model("mixer.MlpMixer", "image_classification"),
    "fnet": Model("mixer.FNet", "image_classification"),
    "local_cnn": Model("local_cnn.LocalCNN", "image_classification"),
    "gpt": Model("gpt.Gpt", "causal_lm"),
    "bert": Model("bert.BertForPreTraining", "masked_lm", head=("next_sentence",)),
    "bert_mlm": Model("bert.BertForMaskedLM", "masked_lm", head=()),
    "bert_classifier": Model(
        "bert.BertForSequenceClassification", "text_classification", head=("num_classes",)
    ),
    "seq2seq": Model("seq2seq.EncoderDecoder", "seq2seq"),
}


def class_paths() -> tuple[str, ...]:
  """Every model class, "module.Class": the rows' and the encoder they wrap."""
  return tuple(dict.fromkeys([*(row.cls for row in MODELS.values()), ENCODER]))


def load_class(path: str):
  """ "bert.Bert" -> vit_jax.models.bert.Bert, importing that module now."""
  module, name = path.split(".")
  return getattr(importlib.import_module(f"vit_jax.models.{module}"), name)


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


def build_model(config: Mapping[str, Any], **overrides):
  """The (unbound) Flax module named by config["name"], built from the other keys."""
  kwargs = dict(config.to_dict() if hasattr(config, "to_dict") else config)
  kwargs.update(overrides)
  name = kwargs.pop("name", None)
  if name not in MODELS:
    raise errors.ConfigError(f"Unknown model {name!r}; choose one of {list(MODELS)}.")
  row = MODELS[name]
  if row.head is None:
    return _make(load_class(row.cls), kwargs, name)
  head = {k: v for k, v in kwargs.items() if k in row.head}
  encoder_kwargs = {k: v for k, v in kwargs.items() if k not in row.head}
  return load_class(row.cls)(bert=_make(load_class(ENCODER), encoder_kwargs, name), **head)


# class name -> "module.Class" under vit_jax/models
_CLASSES = {path.split(".")[1]: path for path in class_paths()}

__all__ = [  # noqa: PLE0604 -- the names of _CLASSES, loaded by __getattr__
    "build_model",
    "MODELS",
    *_CLASSES,
]


def __getattr__(name: str):
  if name in _CLASSES:
    return load_class(_CLASSES[name])
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
