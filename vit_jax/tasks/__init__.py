"""Tasks plug a dataset, a loss and metrics into the one trainer (vit_jax/training/train.py).

Every task is a `base.Task`: the contract, with what each task must provide and the defaults of
the rest. Text tasks share `text_common.TextTask` (the workdir's tokenizer, batches by split),
and causal LM and seq2seq also `text_common.TokenLossTask` (loss per target token).
"""

import importlib

from vit_jax import errors
from vit_jax.tasks import base

# task name -> (module, class)
TASKS = {
    "image_classification": ("vit_jax.tasks.classification", "ImageClassification"),
    "causal_lm": ("vit_jax.tasks.causal_lm", "CausalLM"),
    "masked_lm": ("vit_jax.tasks.masked_lm", "MaskedLM"),
    "text_classification": ("vit_jax.tasks.text_classification", "TextClassification"),
    "seq2seq": ("vit_jax.tasks.seq2seq", "Seq2Seq"),
}


def _task_class(config):
  if config.task not in TASKS:
    raise errors.ConfigError(f"Unknown task {config.task!r}; choose one of {list(TASKS)}.")
  module, cls = TASKS[config.task]
  return getattr(importlib.import_module(module), cls)


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
