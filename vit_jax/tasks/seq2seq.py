"""Sequence-to-sequence (encoder-decoder) training with teacher forcing."""

import jax
import jax.numpy as jnp

from vit_jax.data.text import seq2seq_batches
from vit_jax.tasks import text_common
from vit_jax.tasks import token_cross_entropy


class Seq2Seq(text_common.TokenLossTask):
  """Token loss on the targets; eval adds exact-match of whole (teacher-forced) sequences."""

  def init_inputs(self, batch_size: int = 1):
    c = self.config
    return (
        jnp.zeros((batch_size, c.input_len), jnp.int32),
        jnp.zeros((batch_size, c.target_len), jnp.int32),
    )

  def _batches(self, **batch_args):
    c = self.config
    return seq2seq_batches.seq2seq_batches(
        input_len=c.input_len, target_len=c.target_len, **batch_args
    )

  def batch_spec(self, batch_size):
    """As `seq2seq_batches` yields them: (B, input_len) inputs, (B, target_len) targets."""
    c = self.config
    return {
        **text_common.batch_spec(("inputs", "input_mask"), (), (batch_size, c.input_len)),
        **text_common.batch_spec(
            ("decoder_inputs", "targets"), ("weights",), (batch_size, c.target_len)
        ),
    }

  def model_inputs(self, batch):
    return batch["inputs"], batch["decoder_inputs"], batch["input_mask"]

  def loss(self, logits_BxTxV, batch, totals):
    """The targets' mean cross-entropy against labels smoothed by `label_smoothing` e (Szegedy
    et al. 2016, section 7, as Vaswani et al. 2017 section 5.4 use it): the target's probability
    1 - e plus e spread uniformly over the vocabulary, i.e. (1 - e) x NLL plus e x the mean of
    -log p over the vocabulary. Evaluation's loss stays the plain NLL."""
    nll, correct = token_cross_entropy.weighted_cross_entropy(
        logits_BxTxV, batch["targets"], batch["weights"]
    )
    e = self.config.label_smoothing
    if e:
      logits_BxTxV = logits_BxTxV.astype(jnp.float32)
      uniform_BxT = jax.nn.logsumexp(logits_BxTxV, axis=-1) - jnp.mean(logits_BxTxV, axis=-1)
      nll = (1 - e) * nll + e * jnp.sum(uniform_BxT * batch["weights"])
    return nll / totals["tokens"], {"train_accuracy": correct / totals["tokens"]}

  @staticmethod
  def eval_sums(logits_BxTxV, batch):
    weights_BxT = batch["weights"]
    nll, correct = token_cross_entropy.weighted_cross_entropy(
        logits_BxTxV, batch["targets"], weights_BxT
    )
    wrong_BxT = (jnp.argmax(logits_BxTxV, -1) != batch["targets"]) & (weights_BxT > 0)
    real_B = jnp.any(weights_BxT > 0, axis=-1)
    exact_B = real_B & ~jnp.any(wrong_BxT, axis=-1)
    return {
        "nll": nll,
        "correct": correct,
        "tokens": jnp.sum(weights_BxT),
        "exact": jnp.sum(exact_B.astype(jnp.float32)),
        "rows": jnp.sum(real_B.astype(jnp.float32)),
    }

  @staticmethod
  def eval_summary(sums: dict) -> dict:
    tokens = max(float(sums["tokens"]), 1.0)
    return {
        "loss": float(sums["nll"]) / tokens,
        "accuracy": float(sums["correct"]) / tokens,
        "exact_match": float(sums["exact"]) / max(float(sums["rows"]), 1.0),
    }
