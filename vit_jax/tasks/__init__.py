"""Tasks plug a dataset, a loss and metrics into the one trainer (vit_jax/training/train.py).

Every task is a `base.Task`: the contract, with what each task must provide and the defaults of
the rest. Text tasks share `text_common.TextTask` (the workdir's tokenizer, batches by split),
and causal LM and seq2seq also `text_common.TokenLossTask` (loss per target token).

This registry is the one list of tasks and what each one reads: the trainer builds from it, the
config checks read its names and its examples, the evaluators its default kind, and generate
which tasks sample. The models a task trains are the rows of vit_jax/models MODELS
that name it.
"""

import dataclasses
import importlib

from vit_jax import errors
from vit_jax import models
from vit_jax.tasks import base

IMAGES = "images"  # the examples of an image task; text tasks read a data/text/datasets.py kind


@dataclasses.dataclass(frozen=True)
class TaskInfo:
  module: str  # under vit_jax/tasks
  cls: str
  examples: str  # what its batches read: IMAGES, or a text kind (documents, labeled, pairs)
  # The evaluator kind (vit_jax/evaluate/registry.py) that reports its own metrics: the kind of
  # its default `eval` entry.
  eval_kind: str
  generates: bool = False  # `python -m vit_jax.generate` can sample from it
  streams: bool = False  # trains on `stream:` datasets (vit_jax/data/text/stream.py)
  mixes: bool = False  # trains on `dataset=mixture` (vit_jax/data/text/mixture.py)
  # Reads a dataset of pairs as rows of `source [SEP] target [EOS]` (decoder-only translation:
  # vit_jax/data/text/packed_pairs.py), where its `examples` are documents.
  packs_pairs: bool = False

  @property
  def reads_images(self) -> bool:
    """Image tasks open an image dataset and size their output by its classes; the others
    tokenize text and size it by the vocabulary."""
    return self.examples == IMAGES


TASKS = {
    "image_classification": TaskInfo(
        "classification", "ImageClassification", IMAGES, "classification"
    ),
    "causal_lm": TaskInfo(
        "causal_lm",
        "CausalLM",
        "documents",
        "causal_lm",
        generates=True,
        streams=True,
        mixes=True,
        packs_pairs=True,
    ),
    "masked_lm": TaskInfo("masked_lm", "MaskedLM", "documents", "masked_lm"),
    "text_classification": TaskInfo(
        "text_classification", "TextClassification", "labeled", "classification"
    ),
    "seq2seq": TaskInfo("seq2seq", "Seq2Seq", "pairs", "seq2seq", generates=True),
}
GENERATING = tuple(name for name, info in TASKS.items() if info.generates)


def examples_of(config) -> str:
  """What a run of `config` (a ConfigDict, or a saved config's dict) reads: its task's examples,
  or pairs where the task packs them and the dataset holds them."""
  info = TASKS[config["task"]]
  if info.packs_pairs:
    # pylint: disable=g-import-not-at-top  (text runs only)
    from vit_jax import data
    from vit_jax.data.text import datasets

    if datasets.holds_pairs(config["dataset"], data.read_options(config)):
      return "pairs"
  return info.examples


def task_of_model(model_name: str) -> str:
  """The task a model runs with (an imported checkpoint names its model, not its task)."""
  if model_name not in models.MODELS:
    raise errors.ConfigError(
        f"No task runs model {model_name!r}; models with a task: {list(models.MODELS)}."
    )
  return models.MODELS[model_name].task


def _task_class(config):
  if config.task not in TASKS:
    raise errors.ConfigError(f"Unknown task {config.task!r}; choose one of {list(TASKS)}.")
  info = TASKS[config.task]
  return getattr(importlib.import_module(f"vit_jax.tasks.{info.module}"), info.cls)


def build_task(config, workdir: str) -> base.Task:
  """The task named by `config.task` (imported on demand: image tasks never load tokenizers)."""
  return _task_class(config)(config, workdir)


def build_task_without_data(config) -> base.Task:
  """The task with its output size from the config instead of the data: no dataset is opened
  and no tokenizer trained. It gives the model and the train step (`batch_spec`), not batches."""
  task_class = _task_class(config)
  if TASKS[config.task].reads_images:
    if not config.num_classes:
      raise errors.ConfigError(
          "Without data the class count must be in the config: set --config.num_classes."
      )
    return task_class(config, num_classes=config.num_classes)
  vocab_size = config.tokenizer.vocab_size
  if not vocab_size:
    raise errors.ConfigError(
        "Without data the vocabulary size must be in the config: set "
        "--config.tokenizer.vocab_size (e.g. 50257 for GPT-2's, 30522 for BERT's)."
    )
  return task_class(config, None, vocab_size=vocab_size)
