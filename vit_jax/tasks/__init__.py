"""Tasks plug a dataset, a loss and metrics into the one trainer (vit_jax/train.py).

A task provides: model_overrides(), init_inputs(), train_batches(start_step, process_index,
process_count), eval_batches(process_index, process_count), apply(model, params, batch, train,
rng), weight(batch), loss_sum(outputs, batch), eval_sums(outputs, batch), eval_summary(sums).
"""


def build_task(config):
  """The task named by `config.task`."""
  # pylint: disable=g-import-not-at-top
  if config.task == "image_classification":
    from vit_jax.tasks import classification
    return classification.ImageClassification(config)
  raise ValueError(f"Unknown task {config.task!r}; choose one of ['image_classification'].")
