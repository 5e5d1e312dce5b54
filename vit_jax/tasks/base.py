"""The task contract: what the trainer (vit_jax/training/train.py) asks of every task, and the
shared steps.

A task owns its data, its model's inputs, its loss and its metrics; the trainer owns everything
else. Subclasses must provide the abstract methods; the others have defaults that fit most tasks.
"""

import abc


class Task(abc.ABC):
  """Base class of every task; `vit_jax.tasks.build_task` builds one from the config."""

  def __init__(self, config, workdir: str | None = None):
    del workdir  # subclasses that keep assets beside the checkpoints use it
    self.config = config

  # ---- Model ----------------------------------------------------------------------------------
  def model_overrides(self) -> dict:
    """Model config entries the task decides (e.g. the class count or vocabulary size)."""
    return {}

  @abc.abstractmethod
  def init_inputs(self, batch_size: int = 1) -> tuple:
    """Dummy positional inputs for `model.init` (shapes and dtypes of a real batch's)."""

  @abc.abstractmethod
  def batch_spec(self, batch_size: int) -> dict:
    """{key: jax.ShapeDtypeStruct} of a training batch of `batch_size` rows, as `train_batches`
    yields them: what compiling the step ahead of time needs instead of data."""

  @abc.abstractmethod
  def model_inputs(self, batch: dict) -> tuple:
    """The positional inputs of `model.apply` taken from a batch."""

  def apply(self, model, params, batch: dict, train: bool, rng=None):
    """The model's outputs on `batch`; in training, `rng` drives dropout."""
    rngs = {"dropout": rng} if train else {}
    return model.apply({"params": params}, *self.model_inputs(batch), train=train, rngs=rngs)

  # ---- Data -----------------------------------------------------------------------------------
  @abc.abstractmethod
  def train_batches(self, start_step: int, shard: int, shard_count: int):
    """Endless training batches of input shard `shard` of `shard_count` (batch_size /
    shard_count rows each), from batch `start_step` on. A shard's batches depend only on the
    config, the shard and the step, so processes that read the same shard get the same rows
    (vit_jax/training/host_input.py)."""

  @abc.abstractmethod
  def eval_batches(self, shard: int, shard_count: int, *, dataset: str | None = None, split=None):
    """One pass over input shard `shard` of `shard_count` of `split` of `dataset` (None: the
    config's dataset and eval split), padded rows weighing nothing; the shards together hold
    every example once. Evaluators (vit_jax/evaluate) read other datasets and splits through
    it."""

  def data_progress(self, step: int) -> dict:
    """{metric: float} of what the first `step` training steps read, logged with each train
    record (a mixture's tokens per source, `tokens/NAME`): computed from the step, so a resumed
    run logs what an uninterrupted one does."""
    del step
    return {}

  def train_size(self) -> int | None:
    """Examples in the training split, for scaling studies; None where it is not counted (e.g.
    streamed text)."""
    return None

  # ---- Loss and metrics -----------------------------------------------------------------------
  @abc.abstractmethod
  def totals(self, batch: dict) -> dict:
    """Full-batch normalizers of the loss (e.g. example or token counts).

    Each microbatch's loss is divided by the full batch's totals, so with gradient accumulation
    the microbatch losses and gradients add up to the full batch's.
    """

  @abc.abstractmethod
  def loss(self, outputs, batch: dict, totals: dict) -> tuple:
    """(scalar loss, dict of scalar train metrics), both already divided by `totals`."""

  @abc.abstractmethod
  def eval_sums(self, outputs, batch: dict) -> dict:
    """Scalar sums over one eval batch; the trainer adds them up over batches and devices."""

  @abc.abstractmethod
  def eval_summary(self, sums: dict) -> dict:
    """The reported eval metrics (floats) from the summed `eval_sums`, named without a prefix:
    evaluators log them as `NAME/metric` (e.g. `eval/accuracy`)."""

  # ---- Checkpoint identity, assets and fine-tuning --------------------------------------------
  def record(self) -> dict:
    """Extra identity stored with each checkpoint (e.g. the tokenizer's fingerprint)."""
    return {}

  def save_assets(self, workdir: str) -> None:
    """Writes what a checkpoint needs beside it (e.g. the tokenizer); main process only."""
    del workdir

  def init_from_rules(self) -> dict:
    """Keyword rules for fitting pretrained params to this task's model
    (`interop.finetune_params`)."""
    return {}


def per_example_summary(loss_sum, correct_sum, examples, top5_sum=None) -> dict:
  """Classification eval metrics from summed per-example loss and hits (and hits among the five
  highest logits); no examples reads 0."""
  denominator = max(float(examples), 1.0)
  top5 = {} if top5_sum is None else {"top5_accuracy": float(top5_sum) / denominator}
  return {
      "accuracy": float(correct_sum) / denominator,
      **top5,
      "loss": float(loss_sum) / denominator,
      "examples": float(examples),
  }
