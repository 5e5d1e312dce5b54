"""Language-model losses on any split of any text dataset: causal LM (loss, perplexity, bits per
token and per character), masked LM (loss, accuracy and bits per character of the masked
tokens) and seq2seq (token loss, accuracy, exact match), with the run's tokenizer."""

from vit_jax import tasks
from vit_jax.evaluate import base


class TextTaskEval(base.TaskEval):
  """The task's eval metrics on `split` of `dataset` (default: the run's dataset and eval split),
  which must hold the examples the task reads (documents or pairs)."""

  def check_data(self):
    from vit_jax.data.text import checks  # pylint: disable=g-import-not-at-top

    s = self.settings
    examples = tasks.TASKS[self.config.task].examples
    checks.check_split(
        s.dataset, s.split, examples, key=self.key("split"), data_dir=self.config.data_dir
    )


class CausalLMLoss(TextTaskEval):
  """Next-token loss over packed documents of the split."""


class MaskedLMLoss(TextTaskEval):
  """Masked-token loss, with the masking drawn as in training (fixed per eval pass)."""


class Seq2SeqLoss(TextTaskEval):
  """Teacher-forced target-token loss and exact match of the greedy next-token predictions."""
