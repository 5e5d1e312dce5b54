"""Evaluators: what a run measures on its own cadence besides the training loss, and the command
that runs them once on any checkpoint.

    config.evals = {NAME: {kind, every, ...}}   ->   NAME/metric in metrics.jsonl and TensorBoard

  registry        the kinds, their keys and defaults, validation, building a run's evaluators
  base            the evaluator contract; the task's own metrics on any dataset and split, and
                  classification's top-1 / top-5 accuracy and loss
  fewshot         linear probes on frozen features, k examples per class (ridge regression)
  lm              causal-LM, masked-LM and seq2seq losses, bits per character

The command line is `python -m vit_jax.evaluate` (see vit_jax/evaluate/__main__.py).
"""
