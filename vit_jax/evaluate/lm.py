"""Language-model losses on any split of any text dataset: causal LM (loss, perplexity, bits per
token and per character), masked LM (loss, accuracy and bits per character of the masked
tokens) and seq2seq (token loss, accuracy, exact match), with the run's tokenizer.

On a `stream:` dataset (vit_jax/data/text/stream.py) the causal-LM evaluator scores every token of
the held-out text exactly once with a sliding window of `stride` tokens (None: seq_len). On the
run's mixture (`dataset=mixture`, vit_jax/data/text/mixture.py) it scores each source's split, from
the source's store, as `NAME/metric` (`eval/web/loss`), and all of them together as `metric`."""

import jax
import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax import tasks
from vit_jax.data.text import datasets
from vit_jax.data.text import stream
from vit_jax.evaluate import base
from vit_jax.training import host_input


class TextTaskEval(base.TaskEval):
  """The task's eval metrics on `split` of `dataset` (default: the run's dataset and eval split),
  which must hold the examples the task reads (documents or pairs)."""

  def check_data(self):
    from vit_jax.data.text import checks  # pylint: disable=g-import-not-at-top

    s, c = self.settings, self.config
    examples = tasks.examples_of(c)
    checks.check_split(
        s.dataset,
        s.split,
        examples,
        key=self.config_key("split"),
        data_dir=c.data_dir,
        token_store=c.token_store if s.dataset == c.dataset else None,  # the run's store
        read_options=data.read_options(c),
    )


class CausalLMLoss(TextTaskEval):
  """Next-token loss over packed documents of the split, or over a stream's held-out text."""

  def check_data(self):
    s, seq_len = self.settings, self.config.seq_len
    if s.dataset == datasets.MIXTURE:
      self._check_mixture()
    else:
      super().check_data()
    if s.stride is not None and not stream.is_stream(s.dataset):
      raise errors.ConfigError(
          f"{self.key('stride')}={s.stride}: a stride applies to stream: datasets only, not "
          f"{s.dataset!r}; leave it None."
      )
    if s.stride is not None and s.stride > seq_len:
      raise errors.ConfigError(
          f"{self.key('stride')}={s.stride} must be at most --config.seq_len={seq_len}, so "
          "that every held-out token is scored once."
      )

  def _check_mixture(self):
    """The run trains on a mixture, and each of its stores holds the split, whole."""
    if self.config.dataset != datasets.MIXTURE:
      raise errors.ConfigError(
          f"{self.key('dataset')}=mixture scores the sources of the run's mixture, and "
          f"--config.dataset={self.config.dataset!r} is none; name a dataset."
      )
    from vit_jax.data.text import checks  # pylint: disable=g-import-not-at-top

    for name, path in self.task.mixture.stores.items():  # each store holds the split, with tokens
      checks.check_mixture_split(name, path, self.settings.split)

  def batches(self, source=None):
    """`source`: one source of the run's mixture."""
    s = self.settings
    return host_input.eval_batches(
        lambda shard, count: self.task.eval_batches(
            shard, count, dataset=s.dataset, split=s.split, stride=s.stride, source=source
        ),
        self.input_plan,
        s.max_batches,
        self.config.prefetch_batches,
    )

  def run(self, params, step=None, name=None) -> dict:
    del step, name  # writes no files
    if self.settings.dataset != datasets.MIXTURE:
      return super().run(params)
    by_source, every = {}, None
    for name in self.task.mixture.names:
      sums = self.sums(params, self.batches(source=name))
      by_source.update({f"{name}/{k}": v for k, v in self.task.eval_summary(sums).items()})
      every = sums if every is None else jax.tree.map(np.add, every, sums)
    return {**self.task.eval_summary(every), **by_source}


class MaskedLMLoss(TextTaskEval):
  """Masked-token loss, with the masking drawn as in training (fixed per eval pass)."""


class Seq2SeqLoss(TextTaskEval):
  """Teacher-forced target-token loss and exact match of the greedy next-token predictions."""
