"""Masked language modeling (BERT), with optional next-sentence prediction.

Masking is dynamic (redrawn every step by the data pipeline); the MLM head runs only at the
masked positions. Reported: MLM loss and accuracy, NSP accuracy, and the accuracy of always
predicting the most frequent token, the baseline MLM accuracy must beat.
"""

import math

import jax.numpy as jnp
import numpy as np
import optax

from vit_jax import data
from vit_jax.data.text import batches
from vit_jax.data.text import datasets
from vit_jax.data.text import masking
from vit_jax.tasks import text_common
from vit_jax.tasks import token_cross_entropy


class MaskedLM(text_common.TextTask):
  """MLM loss per masked token, plus NSP loss per row when next-sentence pairs are on."""

  def __init__(self, config, workdir: str | None, *, vocab_size: int | None = None):
    super().__init__(config, workdir, vocab_size=vocab_size)
    self.nsp = config.nsp
    if self.tokenizer is not None:  # eval only
      self.most_frequent_id = self._most_frequent_token()
      self.token_chars_V = jnp.asarray(text_common.token_char_counts(self.tokenizer))

  def _most_frequent_token(self) -> int:
    """The most frequent non-special token of the training split's first 200 documents."""
    c = self.config
    split = datasets.open_split(
        c.dataset,
        c.train_split,
        kind="documents",
        tokenizer=self.tokenizer,
        token_store_path=c.token_store,
        data_dir=c.data_dir,
        read_options=data.read_options(c),
    )
    documents = split.examples("text", np.arange(min(200, split.num_examples)))
    counts = np.bincount(
        np.concatenate([np.zeros(0, np.int64), *documents]).astype(np.int64),
        minlength=self.tokenizer.vocab_size,
    )
    counts[list(self.tokenizer.special_id_set())] = 0
    return int(np.argmax(counts)) if counts.any() else 0

  def _masking_config(self):
    m = self.config.masking
    return masking.MaskingConfig(rate=m.rate, whole_word=m.whole_word, span=m.span)

  def _batches(self, **batch_args):
    return batches.mlm_batches(
        seq_len=self.config.seq_len,
        masking_config=self._masking_config(),
        nsp=self.nsp,
        **batch_args,
    )

  def batch_spec(self, batch_size):
    """As `batches.mlm_batches` yields them: (B, L) tokens, (B, P) predictions, (B,) NSP."""
    seq_len = self.config.seq_len
    tokens = ("tokens", "token_type_ids", "input_mask", "positions")
    spec = text_common.batch_spec(tokens, (), (batch_size, seq_len))
    predictions = (batch_size, self._masking_config().predictions(seq_len))
    spec.update(
        text_common.batch_spec(
            ("masked_positions", "masked_targets"), ("masked_weights",), predictions
        )
    )
    if self.nsp:
      spec.update(text_common.batch_spec(("nsp_label",), (), (batch_size,)))
    return spec

  def model_inputs(self, batch):
    # No segment ids: a sentence pair is one sequence, its halves told apart by token types.
    return (
        batch["tokens"],
        batch["token_type_ids"],
        batch["input_mask"],
        batch["positions"],
        None,
        batch["masked_positions"],
    )

  @staticmethod
  def totals(batch):
    return {
        "masked": jnp.maximum(jnp.sum(batch["masked_weights"]), 1.0),
        "rows": jnp.maximum(jnp.sum(batch["input_mask"][:, 0]).astype(jnp.float32), 1.0),
    }

  def loss(self, outputs, batch, totals):
    nll, correct = token_cross_entropy.weighted_cross_entropy(
        outputs["mlm_logits"], batch["masked_targets"], batch["masked_weights"]
    )
    loss = nll / totals["masked"]
    metrics = {"train_mlm_accuracy": correct / totals["masked"]}
    if self.nsp:
      nsp_loss, nsp_correct = self._nsp_sums(outputs, batch)
      loss = loss + nsp_loss / totals["rows"]
      metrics["train_nsp_accuracy"] = nsp_correct / totals["rows"]
    return loss, metrics

  @staticmethod
  def _nsp_sums(outputs, batch):
    real_B = batch["input_mask"][:, 0].astype(jnp.float32)  # eval padding rows are all-pad
    logits_Bx2 = outputs["nsp_logits"]
    ce_B = optax.softmax_cross_entropy_with_integer_labels(logits_Bx2, batch["nsp_label"])
    correct_B = (jnp.argmax(logits_Bx2, -1) == batch["nsp_label"]).astype(jnp.float32)
    return jnp.sum(ce_B * real_B), jnp.sum(correct_B * real_B)

  def eval_sums(self, outputs, batch):
    weights = batch["masked_weights"]
    nll, correct = token_cross_entropy.weighted_cross_entropy(
        outputs["mlm_logits"], batch["masked_targets"], weights
    )
    majority = jnp.sum((batch["masked_targets"] == self.most_frequent_id) * weights)
    chars = jnp.sum(self.token_chars_V[batch["masked_targets"]] * weights)
    sums = {
        "nll": nll,
        "correct": correct,
        "masked": jnp.sum(weights),
        "majority": majority,
        "chars": chars,
    }
    if self.nsp:
      _, sums["nsp_correct"] = self._nsp_sums(outputs, batch)
      sums["rows"] = jnp.sum(batch["input_mask"][:, 0]).astype(jnp.float32)
    return sums

  def eval_summary(self, sums: dict) -> dict:
    masked = max(float(sums["masked"]), 1.0)  # no masked tokens reads 0, not NaN
    out = {
        "mlm_loss": float(sums["nll"]) / masked,
        "mlm_accuracy": float(sums["correct"]) / masked,
        # Of the masked tokens' characters: what a masked LM's loss means per character.
        "mlm_bits_per_char": float(sums["nll"]) / max(float(sums["chars"]), 1.0) / math.log(2),
        "majority_accuracy": float(sums["majority"]) / masked,
        "masked_tokens": float(sums["masked"]),
    }
    if self.nsp:
      out["nsp_accuracy"] = float(sums["nsp_correct"]) / max(float(sums["rows"]), 1.0)
    return out
