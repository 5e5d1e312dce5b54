"""Tasks plug a dataset, a loss and metrics into the one trainer (vit_jax/train.py).

A task provides: model_overrides(), init_inputs(), train_batches(start_step, process_index,
process_count), eval_batches(process_index, process_count), apply(model, params, batch, train,
rng), totals(batch) (full-batch loss normalizers), loss(outputs, batch, totals) -> (loss, metrics),
eval_sums(outputs, batch), eval_summary(sums), and optionally record() (extra identity stored
with each checkpoint, e.g. the tokenizer's fingerprint).
"""


import importlib

from vit_jax import errors

# task name -> (module, class)
TASKS = {
    "image_classification": ("vit_jax.tasks.classification", "ImageClassification"),
    "causal_lm": ("vit_jax.tasks.causal_lm", "CausalLM"),
    "masked_lm": ("vit_jax.tasks.masked_lm", "MaskedLM"),
    "text_classification": ("vit_jax.tasks.text_classification", "TextClassification"),
    "seq2seq": ("vit_jax.tasks.seq2seq", "Seq2Seq"),
}


def build_task(config, workdir: str):
  """The task named by `config.task` (imported on demand: image tasks never load tokenizers)."""
  if config.task not in TASKS:
    raise errors.ConfigError(f"Unknown task {config.task!r}; choose one of {list(TASKS)}.")
  module, cls = TASKS[config.task]
  return getattr(importlib.import_module(module), cls)(config, workdir)
