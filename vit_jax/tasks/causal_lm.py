"""Causal language modeling (GPT): next-token loss on packed documents, or on windows of one text
(`stream:` datasets, vit_jax/data/text/stream.py), or on a weighted mixture of token stores
(`dataset=mixture`, vit_jax/data/text/mixture.py), or on packed pairs, `source [SEP] target [EOS]`
(a dataset of pairs: decoder-only translation, vit_jax/data/text/packed_pairs.py); perplexity and
bits per character."""

import math

import jax.numpy as jnp

from vit_jax import tasks
from vit_jax.data.text import batches
from vit_jax.data.text import corpus
from vit_jax.data.text import datasets
from vit_jax.data.text import stream
from vit_jax.tasks import text_common
from vit_jax.tasks import token_cross_entropy


class CausalLM(text_common.TokenLossTask):
  """Packed rows with segment ids and positions; attention never crosses documents."""

  def __init__(self, config, workdir: str | None, *, vocab_size: int | None = None):
    super().__init__(config, workdir, vocab_size=vocab_size)
    if self.tokenizer is not None:  # eval only
      self.token_chars_V = jnp.asarray(text_common.token_char_counts(self.tokenizer))
    self.mixture, self._progress = None, None  # dataset=mixture: its sources and weights
    self.pairs = tasks.examples_of(config) == "pairs"  # rows of source [SEP] target [EOS]
    if self.pairs and self.tokenizer is not None:
      from vit_jax.data.text import packed_pairs  # pylint: disable=g-import-not-at-top  (pairs only)

      packed_pairs.require_tokens(self.tokenizer)
    if config.dataset == datasets.MIXTURE:
      from vit_jax.data.text import mixture  # pylint: disable=g-import-not-at-top  (mixtures only)

      self.mixture = mixture.from_config(config)
    # The bar a character model must beat: entropy of the validation text's character frequencies.
    self.unigram_bits = None
    if config.dataset == "embedded":
      self.unigram_bits = corpus.validation_char_entropy()
    elif stream.is_stream(config.dataset):
      text = stream.split_text(stream.whole_text(config.dataset), "validation", self.holdout)
      self.unigram_bits = corpus.unigram_char_entropy([text])

  @property
  def holdout(self) -> float:
    return self.config.stream.holdout

  def eval_batches(self, shard, shard_count, *, dataset=None, split=None, stride=None, source=None):
    """As every task's; `stride`: a `stream:` dataset's sliding-window step (None: seq_len);
    `source`: which source of the run's mixture (`dataset=mixture`), read from its store."""
    dataset, split = dataset or self.config.dataset, split or self.config.eval_split
    if dataset == datasets.MIXTURE:
      args = self._batch_args(split, False, 0, shard, shard_count)
      args.update(dataset=source, token_store=self.mixture.stores[source])
      return self._batches(**args)
    if not stream.is_stream(dataset):
      return super().eval_batches(shard, shard_count, dataset=dataset, split=split)
    train_N, held_out_M = stream.stream_tokens(dataset, self.tokenizer, self.holdout)
    if split == "train":  # the training text scored from its second token on
      train_N, held_out_M = train_N[:1], train_N[1:]
    return stream.eval_batches(
        train_N,
        held_out_M,
        batch_size=self.config.batch_size // shard_count,
        seq_len=self.config.seq_len,
        stride=stride,
        process_index=shard,
        process_count=shard_count,
    )

  def _batches(self, **batch_args):
    if stream.is_stream(batch_args["dataset"]):  # training windows (eval: eval_batches)
      train_N, _ = stream.stream_tokens(batch_args["dataset"], self.tokenizer, self.holdout)
      return stream.train_batches(
          train_N,
          batch_size=batch_args["batch_size"],
          seq_len=self.config.seq_len,
          seed=batch_args["seed"],
          start_step=batch_args["start_step"],
          windows=self.config.stream.windows,
          process_index=batch_args["shard"],
          process_count=batch_args["shard_count"],
      )
    if self.pairs and batch_args["dataset"] == self.config.dataset:
      from vit_jax.data.text import packed_pairs  # pylint: disable=g-import-not-at-top  (pairs only)

      return packed_pairs.pair_batches(
          seq_len=self.config.seq_len, loss_on=self.config.loss_on, **batch_args
      )
    if batch_args["dataset"] == datasets.MIXTURE:  # training rows (eval: a source's own store)
      for key in ("dataset", "train", "token_store", "data_dir", "read_options"):
        del batch_args[key]
      return batches.mixed_clm_batches(self.mixture, seq_len=self.config.seq_len, **batch_args)
    return batches.clm_batches(seq_len=self.config.seq_len, **batch_args)

  def data_progress(self, step):
    """A mixture's tokens of each source in the first `step` steps: `tokens/NAME`."""
    if self.mixture is None:
      return {}
    if self._progress is None:
      self._progress = self.mixture.schedule(self.config.batch_size, self.config.seed)
    rows = self._progress.rows_before(step * self.config.batch_size)
    return {f"tokens/{n}": float(r * self.config.seq_len) for n, r in zip(self.mixture.names, rows)}

  def batch_spec(self, batch_size):
    """As `batches.clm_batches` yields them: every key (B, L)."""
    keys = ("inputs", "targets", "segment_ids", "positions")
    return text_common.batch_spec(keys, ("weights",), (batch_size, self.config.seq_len))

  def model_inputs(self, batch):
    return batch["inputs"], batch["positions"], batch["segment_ids"]

  def eval_sums(self, logits_BxLxV, batch):
    nll, correct = token_cross_entropy.weighted_cross_entropy(
        logits_BxLxV, batch["targets"], batch["weights"]
    )
    chars = jnp.sum(self.token_chars_V[batch["targets"]] * batch["weights"])
    return {"nll": nll, "correct": correct, "tokens": jnp.sum(batch["weights"]), "chars": chars}

  def eval_summary(self, sums: dict) -> dict:
    tokens = max(float(sums["tokens"]), 1.0)
    nll = float(sums["nll"])
    extra = {} if self.unigram_bits is None else {"unigram_bits_per_char": self.unigram_bits}
    return {
        **extra,
        "loss": nll / tokens,
        "perplexity": math.exp(min(nll / tokens, 50.0)),
        "accuracy": float(sums["correct"]) / tokens,
        "bits_per_token": nll / tokens / math.log(2),
        "bits_per_char": nll / max(float(sums["chars"]), 1.0) / math.log(2),
        "tokens": tokens,
    }
