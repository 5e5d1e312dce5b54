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


def build_task(config, workdir: str) -> base.Task:
  """The task named by `config.task` (imported on demand: image tasks never load tokenizers)."""
  if config.task not in TASKS:
    raise errors.ConfigError(f"Unknown task {config.task!r}; choose one of {list(TASKS)}.")
  module, cls = TASKS[config.task]
  return getattr(importlib.import_module(module), cls)(config, workdir)
