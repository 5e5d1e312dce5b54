"""Sequence classification with BERT (e.g. glue/sst2, imdb_reviews), usually from an MLM run."""

import jax.numpy as jnp
import optax

from vit_jax import tasks
from vit_jax.data.text import batches
from vit_jax.tasks import text_common


class TextClassification(text_common.TextTask):
  """Cross-entropy on the pooled first token; all-pad eval rows count nowhere."""

  def init_from_rules(self) -> dict:
    """Fine-tuning from a masked-LM run: a fresh classifier, the pretraining heads dropped."""
    return {"head_prefixes": ("classifier/",), "droppable_prefixes": ("mlm/", "nsp/")}

  def model_overrides(self) -> dict:
    return {**super().model_overrides(), "num_classes": self.config.num_classes}

  def _batches(self, **batch_args):
    return batches.cls_batches(seq_len=self.config.seq_len, **batch_args)

  def batch_spec(self, batch_size):
    """As `batches.cls_batches` yields them: (B, L) token rows and a (B,) label."""
    tokens = ("tokens", "token_type_ids", "input_mask")
    return {
        **text_common.batch_spec(tokens, (), (batch_size, self.config.seq_len)),
        **text_common.batch_spec(("label",), (), (batch_size,)),
    }

  def model_inputs(self, batch):
    return batch["tokens"], batch["token_type_ids"], batch["input_mask"]

  @staticmethod
  def _sums(logits_BxC, batch):
    real_B = batch["input_mask"][:, 0].astype(jnp.float32)  # eval padding rows are all-pad
    ce_B = optax.softmax_cross_entropy_with_integer_labels(logits_BxC, batch["label"])
    correct_B = (jnp.argmax(logits_BxC, -1) == batch["label"]).astype(jnp.float32)
    return jnp.sum(ce_B * real_B), jnp.sum(correct_B * real_B), jnp.sum(real_B)

  @staticmethod
  def totals(batch):
    return {"rows": jnp.maximum(jnp.sum(batch["input_mask"][:, 0]).astype(jnp.float32), 1.0)}

  def loss(self, logits_BxC, batch, totals):
    ce, correct, _ = self._sums(logits_BxC, batch)
    return ce / totals["rows"], {"train_accuracy": correct / totals["rows"]}

  def eval_sums(self, logits_BxC, batch):
    ce, correct, rows = self._sums(logits_BxC, batch)
    return {"loss": ce, "correct": correct, "rows": rows}

  @staticmethod
  def eval_summary(sums: dict) -> dict:
    return tasks.per_example_summary(sums["loss"], sums["correct"], sums["rows"])
