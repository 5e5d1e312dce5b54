"""What every text task shares: the tokenizer kept with the workdir, and masked sums."""

import abc

import jax
import jax.numpy as jnp
import numpy as np

from vit_jax import data
from vit_jax import storage
from vit_jax import tasks
from vit_jax import workdir as workdir_lib
from vit_jax.data import tokenizers
from vit_jax.data.text import datasets
from vit_jax.data.text import stream
from vit_jax.tasks import token_cross_entropy


def tokenizer_for(config, workdir: str):
  """The workdir's saved tokenizer, the token store's, or a new one trained/loaded as the config
  says.

  A saved tokenizer of another kind or vocabulary size than the config asks for, or other than
  the token store's, is an error: a checkpoint trained with one vocabulary must never be resumed
  with another, nor read token ids of another.
  """
  tc = config.tokenizer
  directory = workdir_lib.tokenizer_dir(workdir)
  store_path = config.token_store
  if config.dataset == datasets.MIXTURE:  # its stores share one tokenizer (data/text/checks.py)
    from vit_jax.data.text import mixture  # pylint: disable=g-import-not-at-top  (mixtures only)

    store_path = next(iter(mixture.from_config(config).stores.values()))
  store = datasets.open_store(store_path) if store_path else None
  if storage.exists(storage.join(directory, tokenizers.META_FILE)):
    saved = tokenizers.load_tokenizer(directory)
    if tc.path is None and (
        saved.kind != tokenizers.saved_kind(tc.kind)
        or (tc.vocab_size and saved.vocab_size != tc.vocab_size)
    ):
      raise tokenizers.TokenizerMismatchError(
          f"The workdir's tokenizer ({directory}: kind {saved.kind!r}, vocab {saved.vocab_size}) "
          f"differs from the config (kind {tc.kind!r}, vocab {tc.vocab_size}). Use a new "
          "--workdir, or the tokenizer settings that wrote it."
      )
    if store is not None:
      tokenizers.check_fingerprint(
          saved, store.tokenizer_fingerprint, context=f"the token store {store.path}"
      )
    return saved
  init_dir = workdir_lib.tokenizer_dir(config.init_from or "")
  pretrained = config.init_from and storage.exists(storage.join(init_dir, tokenizers.META_FILE))
  if store is not None:  # the tokenizer the store's ids are of (checks.py compared the settings)
    tokenizer = tokenizers.load_tokenizer(store.tokenizer_dir())
    context = f"the token store {store.path}"
    tokenizers.check_fingerprint(tokenizer, store.tokenizer_fingerprint, context=context)
    if pretrained:  # fine-tuning on a store: the pretrained vocabulary must be the store's
      pretrained_tokenizer = tokenizers.load_tokenizer(init_dir)
      tokenizers.check_fingerprint(
          pretrained_tokenizer, store.tokenizer_fingerprint, context=context
      )
    return tokenizer
  if not tc.path and pretrained:
    return tokenizers.load_tokenizer(init_dir)  # fine-tuning keeps the pretrained vocabulary

  def texts():
    if stream.is_stream(config.dataset):  # the training text only: the tail stays unseen
      return stream.tokenizer_texts(config.dataset, config.stream.holdout)[: tc.max_train_texts]
    return datasets.dataset_texts(
        config.dataset,
        "train",
        max_texts=tc.max_train_texts,
        data_dir=config.data_dir,
        read_options=data.read_options(config),
    )

  return tokenizers.from_settings(tc, texts)


def batch_spec(int_keys, float_keys, shape) -> dict:
  """ShapeDtypeStructs of `shape`: int32 for `int_keys`, float32 for `float_keys`."""
  spec = {k: jax.ShapeDtypeStruct(shape, jnp.int32) for k in int_keys}
  return {**spec, **{k: jax.ShapeDtypeStruct(shape, jnp.float32) for k in float_keys}}


class TextTask(tasks.Task):
  """What text tasks share: the workdir's tokenizer and the plumbing around their batches.

  Subclasses implement `_batches(**batch_args)`, `model_inputs(batch)` and the loss and metric
  methods of the contract (`vit_jax.tasks.Task`).
  """

  def __init__(self, config, workdir: str | None, *, vocab_size: int | None = None):
    """`vocab_size` given: no tokenizer is built and no data read; such a task gives the model
    and the train step (to compile them ahead of time), not batches or eval metrics."""
    super().__init__(config, workdir)
    self.tokenizer = None if vocab_size else tokenizer_for(config, workdir)
    self.vocab_size = vocab_size or self.tokenizer.vocab_size

  def model_overrides(self) -> dict:
    return {"vocab_size": self.vocab_size}

  def record(self) -> dict:
    return {"tokenizer": self.tokenizer.fingerprint}

  def save_assets(self, workdir: str) -> None:
    save_tokenizer(self.tokenizer, workdir)

  def init_inputs(self, batch_size: int = 1):
    return (jnp.zeros((batch_size, self.config.seq_len), jnp.int32),)

  def train_batches(self, start_step, shard, shard_count):
    split = self.config.train_split
    return self._batches(**self._batch_args(split, True, start_step, shard, shard_count))

  def eval_batches(self, shard, shard_count, *, dataset=None, split=None):
    split = split or self.config.eval_split
    args = self._batch_args(split, False, 0, shard, shard_count)
    if dataset and dataset != self.config.dataset:  # another dataset: not the run's store's
      args.update(dataset=dataset, token_store=None)
    return self._batches(**args)

  def _batch_args(self, split, train, start_step, shard, shard_count) -> dict:
    """The arguments every text batch function takes (vit_jax/data/text/batches.py)."""
    c = self.config
    return dict(
        dataset=c.dataset,
        tokenizer=self.tokenizer,
        batch_size=c.batch_size // shard_count,  # the config's batch is the global one
        split=split,
        train=train,
        seed=c.seed,
        start_step=start_step,
        token_store=c.token_store,
        data_dir=c.data_dir,
        read_options=data.read_options(c),
        shard=shard,  # the data functions read input shard `shard` of `shard_count`
        shard_count=shard_count,
    )

  @abc.abstractmethod
  def _batches(self, **batch_args):
    """One input shard's batches: a batch function called with `batch_args` and the task's own
    options (endless and shuffled when `batch_args["train"]`)."""


class TokenLossTask(TextTask):
  """Cross-entropy per weighted target token: causal LM and seq2seq."""

  def totals(self, batch):
    return {"tokens": jnp.maximum(jnp.sum(batch["weights"]), 1.0)}

  def loss(self, logits_BxLxV, batch, totals):
    nll, correct = token_cross_entropy.weighted_cross_entropy(
        logits_BxLxV, batch["targets"], batch["weights"]
    )
    return nll / totals["tokens"], {"train_accuracy": correct / totals["tokens"]}


def save_tokenizer(tokenizer, workdir: str) -> None:
  directory = workdir_lib.tokenizer_dir(workdir)
  if not storage.exists(storage.join(directory, tokenizers.META_FILE)):
    tokenizer.save(directory)


def token_char_counts(tokenizer) -> np.ndarray:
  """Characters each token stands for (0 for special tokens): the bits-per-character unit."""
  special = tokenizer.special_id_set()
  return np.array(
      [0 if i in special else len(tokenizer.decode([i])) for i in range(tokenizer.vocab_size)],
      np.float32,
  )
