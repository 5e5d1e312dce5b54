"""Tasks plug a dataset, a loss and metrics into the one trainer (vit_jax/training/train.py).

Every task is a `Task` (below): the contract, with what each task must provide and the defaults
of the rest. Text tasks share `text_common.TextTask` (the workdir's tokenizer, batches by split),
and causal LM and seq2seq also `text_common.TokenLossTask` (loss per target token).

This registry is the one list of tasks and what each one reads: the trainer builds from it, the
config checks read its names and its examples, the evaluators its default kind, and generate
which tasks sample. The models a task trains are the rows of vit_jax/models MODELS
that name it.
"""

import abc
import dataclasses
import importlib

from vit_jax import errors
from vit_jax import models

# ---- The task contract ---------------------------------------------------------------------------
# The task contract: what the trainer (vit_jax/training/train.py) asks of every task, and the
# shared steps.
#
# A task owns its data, its model's inputs, its loss and its metrics; the trainer owns everything
# else. Subclasses must provide the abstract methods; the others have defaults that fit most tasks.


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


# ---- The tasks -----------------------------------------------------------------------------------

IMAGES = "images"  # the examples of an image task; text tasks read a data/text/datasets.py kind


@dataclasses.dataclass(frozen=True)
class TaskInfo:
  module: str  # under vit_jax/tasks
  cls: str
  examples: str  # what its batches read: IMAGES, or a text kind (documents, labeled, pairs)
  # The evaluator kind (vit_jax/evaluate/__init__.py) that reports its own metrics: the kind of
  # its default `eval` entry.
  eval_kind: str
  generates: bool = False  # `python -m vit_jax.generate` can sample from it
  streams: bool = False  # trains on `stream:` datasets (vit_jax/data/text/stream.py)
  mixes: bool = False  # trains on `dataset=mixture` (vit_jax/data/text/mixture.py)
  # Reads a dataset of pairs as rows of `source [SEP] target [EOS]` (decoder-only translation:
  # vit_jax/data/text/packed_pairs.py), where its `examples` are documents.
  packs_pairs: bool = False

  @property
  def reads_images(self) -> bool:
    """Image tasks open an image dataset and size their output by its classes; the others
    tokenize text and size it by the vocabulary."""
    return self.examples == IMAGES


TASKS = {
    "image_classification": TaskInfo(
        "classification", "ImageClassification", IMAGES, "classification"
    ),
    "causal_lm": TaskInfo(
        "causal_lm",
        "CausalLM",
        "documents",
        "causal_lm",
        generates=True,
        streams=True,
        mixes=True,
        packs_pairs=True,
    ),
    "masked_lm": TaskInfo("masked_lm", "MaskedLM", "documents", "masked_lm"),
    "text_classification": TaskInfo(
        "text_classification", "TextClassification", "labeled", "classification"
    ),
    "seq2seq": TaskInfo("seq2seq", "Seq2Seq", "pairs", "seq2seq", generates=True),
}
GENERATING = tuple(name for name, info in TASKS.items() if info.generates)


def examples_of(config) -> str:
  """What a run of `config` (a ConfigDict, or a saved config's dict) reads: its task's examples,
  or pairs where the task packs them and the dataset holds them (an imported checkpoint's
  config names no dataset: its examples are its task's)."""
  info = TASKS[config["task"]]
  if info.packs_pairs and "dataset" in config:
    # pylint: disable=g-import-not-at-top  (text runs only)
    from vit_jax import data
    from vit_jax.data.text import datasets

    if datasets.holds_pairs(config["dataset"], data.read_options(config)):
      return "pairs"
  return info.examples


def task_of_model(model_name: str) -> str:
  """The task a model runs with (an imported checkpoint names its model, not its task)."""
  if model_name not in models.MODELS:
    raise errors.ConfigError(
        f"No task runs model {model_name!r}; models with a task: {list(models.MODELS)}."
    )
  return models.MODELS[model_name].task


def _task_class(config):
  if config.task not in TASKS:
    raise errors.ConfigError(f"Unknown task {config.task!r}; choose one of {list(TASKS)}.")
  info = TASKS[config.task]
  return getattr(importlib.import_module(f"vit_jax.tasks.{info.module}"), info.cls)


def build_task(config, workdir: str) -> "Task":
  """The task named by `config.task` (imported on demand: image tasks never load tokenizers)."""
  return _task_class(config)(config, workdir)


def build_task_without_data(config) -> "Task":
  """The task with its output size from the config instead of the data: no dataset is opened
  and no tokenizer trained. It gives the model and the train step (`batch_spec`), not batches."""
  task_class = _task_class(config)
  if TASKS[config.task].reads_images:
    if not config.num_classes:
      raise errors.ConfigError(
          "Without data the class count must be in the config: set --config.num_classes."
      )
    return task_class(config, num_classes=config.num_classes)
  vocab_size = config.tokenizer.vocab_size
  if not vocab_size:
    raise errors.ConfigError(
        "Without data the vocabulary size must be in the config: set "
        "--config.tokenizer.vocab_size (e.g. 50257 for GPT-2's, 30522 for BERT's)."
    )
  return task_class(config, None, vocab_size=vocab_size)
