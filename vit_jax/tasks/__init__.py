"""Tasks plug a dataset, a loss and metrics into the one trainer (vit_jax/training/train.py).

Every task is a `base.Task`: the contract, with what each task must provide and the defaults of
the rest. Text tasks share `text_common.TextTask` (the workdir's tokenizer, batches by split),
and causal LM and seq2seq also `text_common.TokenLossTask` (loss per target token).

This registry is the one list of tasks: the trainer builds from it, the config checks read its
names and the kind of text examples each reads, and convert, predict and generate read which task
runs a model and which tasks generate.
"""

import dataclasses
import importlib

from vit_jax import errors
from vit_jax.tasks import base


@dataclasses.dataclass(frozen=True)
class TaskInfo:
  module: str  # under vit_jax/tasks
  cls: str
  models: tuple[str, ...]  # the model names (vit_jax/models/registry.py) this task runs
  examples: str | None = None  # what its text batches read (data/text/datasets.py kinds)
  generates: bool = False  # `python -m vit_jax.generate` can sample from it


TASKS = {
    "image_classification": TaskInfo(
        "classification", "ImageClassification", ("vit", "resnet", "mixer", "fnet", "local_cnn")
    ),
    "causal_lm": TaskInfo("causal_lm", "CausalLM", ("gpt",), "documents", generates=True),
    "masked_lm": TaskInfo("masked_lm", "MaskedLM", ("bert", "bert_mlm"), "documents"),
    "text_classification": TaskInfo(
        "text_classification", "TextClassification", ("bert_classifier",), "labeled"
    ),
    "seq2seq": TaskInfo("seq2seq", "Seq2Seq", ("seq2seq",), "pairs", generates=True),
}
GENERATING = tuple(name for name, info in TASKS.items() if info.generates)


def task_of_model(model_name: str) -> str:
  """The task a model runs with (an imported checkpoint names its model, not its task)."""
  for name, info in TASKS.items():
    if model_name in info.models:
      return name
  raise errors.ConfigError(
      f"No task runs model {model_name!r}; models with a task: "
      f"{[m for info in TASKS.values() for m in info.models]}."
  )


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
  if config.task == "image_classification":
    if not config.get("num_classes"):
      raise errors.ConfigError(
          "Without data the class count must be in the config: set --config.num_classes."
      )
    return _task_class(config)(config, num_classes=config.num_classes)
  vocab_size = config.tokenizer.vocab_size
  if not vocab_size:
    raise errors.ConfigError(
        "Without data the vocabulary size must be in the config: set "
        "--config.tokenizer.vocab_size (e.g. 50257 for GPT-2's, 30522 for BERT's)."
    )
  return _task_class(config)(config, None, vocab_size=vocab_size)
