"""Defaults the configs share: the training keys and their allowed values (the schema that
vit_jax/config/checks.py enforces), data and tokenizer blocks, and `runlocal`.

Configs are loaded by file path (`--config=configs/gpt.py`), so what they share lives in the
package, where every config can import it (big_vision keeps the same in configs/common.py).
The `k=v` arguments after the colon are parsed by vit_jax/config/args.py.
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax import evaluate as evaluators
from vit_jax import tasks
from vit_jax.storage import outages


def follows(c: ml_collections.ConfigDict, key: str):
  """A value that tracks `c[key]`, so `--config.<key>=...` reaches it, until it is set itself.

  E.g. `max_len=follows(c, "seq_len")`: a copy (`max_len=c.seq_len`) would freeze the default
  when the config is built, before command-line overrides are applied.
  """
  return c.get_ref(key).identity()


# ---- Schema: the values each key allows ------------------------------------------------------
# Each choice is listed once: here, or where a module defines the names it reads, which
# config/checks.py adds (so that loading a config file imports neither optax nor TensorFlow):
# optimizer.name, optimizer.schedule and optimizer.cooldown_shape (training/optimizer.py
# OPTIMIZERS, SCHEDULES and COOLDOWN_SHAPES) and the
# image classification loss (tasks/classification.py LOSSES). The tokenizer kinds are
# data/tokenizers TRAINABLE_KINDS.
# A model's compute and parameter dtypes (model.dtype, model.param_dtype). Not float16: its
# gradients underflow without loss scaling, which this trainer does not do.
MODEL_DTYPES = ("float32", "bfloat16")
CHOICES = {
    # a non-finite loss or gradient: stop (naming the step), or skip that update
    "nonfinite": ("stop", "skip"),
    "progress": ("auto", "bar", "lines"),  # auto: a bar on a terminal, else lines
    # a folder: dataset's undecodable files: skipped (warned, counted), or an error
    "bad_images": ("skip", "error"),
    # a files: dataset's bad documents (a line that is not JSON, a record without the text
    # field, a null row, text with a control character; a pair with an empty side, of hf: too):
    # an error naming it, or skipped (warned, counted); a file that cannot be read whole is an
    # error either way
    "bad_documents": ("error", "skip"),
    # which targets a causal LM's loss is on in rows of pairs (data/text/packed_pairs.py): the
    # target side's (and its EOS), or every token's
    "loss_on": ("target", "all"),
    # how training reads a stream: dataset (data/text/stream.py): windows at random, or in order
    "stream.windows": ("random", "sequential"),
    # the image eval view (data/image/pipeline.py eval_crop_fraction): the training view (an
    # 87.5% central crop after Inception crops, else the whole image), or the whole image
    # squeezed to image_size x image_size
    "eval_view": ("crop", "resize"),
}
# key -> (lowest allowed value, whether None is allowed)
AT_LEAST = {
    "batch_size": (1, False),
    "total_steps": (0, False),
    "grad_accum_steps": (1, False),
    "log_every": (1, False),
    "eval_every": (1, False),
    "checkpoint_every": (1, False),
    "keep_checkpoints": (1, False),
    "eval_max_batches": (1, True),
    "prefetch_batches": (0, False),
    "input_shards": (1, True),
    "seq_len": (1, False),
    "image_size": (1, False),
    "shuffle_buffer": (1, False),
    "optimizer.lr": (0, False),
    "optimizer.warmup_steps": (0, False),
    "optimizer.weight_decay": (0, False),
    "optimizer.head_weight_decay_mult": (0, False),
    "optimizer.grad_clip_norm": (0, False),
    "optimizer.end_lr_ratio": (0, False),
    "optimizer.eps": (0, False),
    "optimizer.cooldown_steps": (0, False),
    "optimizer.rsqrt_timescale": (1, False),
    "tokenizer.vocab_size": (1, True),
    "tokenizer.max_train_texts": (1, False),
    "hf_holdout": (2, True),
}
BELOW_ONE = (
    "optimizer.b1",
    "optimizer.b2",
    "optimizer.momentum",
    "hbm_headroom",
    "label_smoothing",
)  # [0, 1)
# key -> whether None is allowed; otherwise in (0, 1)
BETWEEN_ZERO_AND_ONE = {"stream.holdout": False, "ema_decay": True}
# augment.randaugment_magnitude's range, inclusive: big_vision's recipes use 0, 10, 15 and 20
# (vit_i1k.py's RANDAUG_DEF), and above 20 Posterize would keep more than 8 bits
# (vit_jax/data/image/randaugment.py); 10 is each op's full strength.
RANDAUGMENT_MAGNITUDES = (0, 20)


def training_defaults() -> ml_collections.ConfigDict:
  """Keys every training config shares: optimizer, schedule, logging, checkpoints, mesh."""
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.batch_size = 64
  c.total_steps = 1000
  c.grad_accum_steps = 1  # microbatches per step; the batch is split, gradients averaged
  c.optimizer = ml_collections.ConfigDict(
      dict(
          name="adamw",  # training/optimizer.py OPTIMIZERS
          lr=1e-3,
          b1=0.9,
          b2=0.999,
          eps=1e-8,  # Adam's epsilon (optax's default)
          bias_correction=True,  # Adam's 1 / (1 - b^t) (False: BERT's AdamWeightDecayOptimizer)
          momentum=0.9,  # sgd and adafactor (adafactor: an EMA of its updates; 0: none)
          weight_decay=1e-4,
          # The classifier head's weights decay at weight_decay x this (big_vision's wd_mults).
          head_weight_decay_mult=1.0,
          # True: decay scaled by the schedule only, not by the peak lr (big_vision's "decoupled").
          decoupled_weight_decay=False,
          grad_clip_norm=1.0,  # 0 disables clipping
          schedule="cosine",  # after warmup: training/optimizer.py SCHEDULES
          warmup_steps=100,
          end_lr_ratio=0.0,  # cosine and linear end at lr * end_lr_ratio
          rsqrt_timescale=10_000,  # rsqrt: lr / sqrt(1 + (step - warmup) / timescale)
          # > 0: the rate goes to 0 over the last cooldown_steps steps (wsd's decay), shaped by
          # cooldown_shape (training/optimizer.py COOLDOWN_SHAPES)
          cooldown_steps=0,
          cooldown_shape="linear",
          # dtype of the first moment (adamw) or momentum (sgd, adafactor); None: the params'
          mu_dtype=placeholder(str),
      )
  )
  # An exponential moving average of the params, trained, saved, evaluated (NAME_ema/metric) and
  # exported (convert --ema) beside them; its decay warms up as min(ema_decay, (1+t) / (10+t))
  # at step t (training/optimizer.py). None: no EMA.
  c.ema_decay = placeholder(float)
  c.log_every = 50
  # Also log the RMS of params, gradients and updates per block group (training/health_metrics.py).
  c.log_internals = False
  c.eval_every = 500
  c.eval_max_batches = placeholder(int)  # None: the whole eval split
  c.checkpoint_every = 500
  c.keep_checkpoints = 2
  # Steps also saved and never deleted (e.g. where cooldowns branch off: branch_from).
  c.keep_checkpoint_steps = ()
  # "WORKDIR:STEP": start from that run's checkpoint at STEP (parameters, optimizer state, data
  # position) in this workdir, and cool down to total_steps (training/branch.py).
  c.branch_from = placeholder(str)
  # None: asynchronous on accelerators (saves overlap training), synchronous on CPU, where
  # async saves raced under heavy load in orbax 0.12 (seen in tests).
  c.async_checkpoints = placeholder(bool)
  c.init_from = placeholder(str)  # our workdir/checkpoint or an .npz to fine-tune from
  c.input_shards = placeholder(int)  # None: one per process; fix it to make data topology-free
  c.nonfinite = "stop"  # a non-finite loss or gradient (CHOICES)
  c.debug_nan_at_step = placeholder(int)  # fault injection: a NaN loss at this step
  c.prefetch_batches = 2  # batches prepared ahead on a background thread (0: none)
  # JAX's persistent compilation cache, so a restart loads the compiled step instead of compiling
  # it again. None: $JAX_COMPILATION_CACHE_DIR if set, else WORKDIR/compilation_cache; "": none.
  c.compilation_cache_dir = placeholder(str)
  c.mesh = "data:-1"  # axis sizes (dcn, data, fsdp, model); -1 takes the remaining devices
  # The share of each device's memory a compiled step must leave free to count as fitting
  # (vit_jax.compile, check_memory): XLA's runtime and fragmentation take some beside the program.
  c.hbm_headroom = 0.1
  # The slice the config is sized for (e.g. "v5p-64"): `vit_jax.compile`'s default --topology.
  c.target_topology = placeholder(str)
  c.check_memory = False  # compile the step before step 1 and stop if it cannot fit (exit 2)
  # Seconds a run rides out a bucket that does not answer (vit_jax/storage/outages.py ride_out): it
  # trains on, its records wait in memory, a checkpoint due is saved at the next interval; past it,
  # one line and exit code 75, nothing saved lost. At most workdir.MAX_OUTAGE_S (420), so the
  # workdir's lock is never taken over from a run that waits.
  c.storage_outage_s = outages.OUTAGE_S
  c.progress = "auto"  # how the progress shows (CHOICES)
  # "START:STOP": a jax.profiler trace of steps START..STOP-1 (numbered as in metrics.jsonl) in
  # W/tensorboard/plugins/profile (training/profiling.py); "" traces nothing. Process 0 only,
  # unless profile_all_processes.
  c.profile_steps = ""
  c.profile_all_processes = False
  c.allow_data_change = False  # resume a workdir on other data (continued pretraining)
  return c


def dataset_defaults(task: str, dataset: str, eval_split: str | None) -> ml_collections.ConfigDict:
  """`training_defaults()` plus the task, where its data comes from, and its evaluators.
  `eval_split` None: the dataset's own (an image source names it)."""
  c = training_defaults()
  c.task = task
  c.dataset = dataset
  c.data_dir = placeholder(str)  # TFDS data_dir; None: TFDS's default (~/tensorflow_datasets)
  c.train_split = "train"
  c.eval_split = placeholder(str) if eval_split is None else eval_split
  # An hf: dataset's (data/hub.py): its subset (the config name `datasets.load_dataset` takes),
  # and, for one without a validation split of its own, N: about one in N training examples is
  # held out as "validation" (None: none is).
  c.hf_subset = placeholder(str)
  c.hf_holdout = placeholder(int)
  # {name: {kind, every, ...}}, each logged as name/metric (kinds: vit_jax/evaluate/__init__.py).
  # "eval": the task's own metrics on eval_split every eval_every steps.
  c.evals = evaluators.default_evals(c)
  return c


def text_defaults(
    task: str, dataset: str, eval_split: str = "validation"
) -> ml_collections.ConfigDict:
  """A text task's config: `dataset_defaults`, a tokenizer, and the text configs' cadence.

  Every text config defaults to the same character tokenizer, so a fine-tuning config resumes
  with the tokenizer its pretraining workdir saved (a checkpoint never changes vocabulary).
  """
  c = dataset_defaults(task, dataset, eval_split)
  # A token store of the dataset made by `python -m vit_jax.prepare` (local or gs://): training
  # reads it by index (vit_jax/data/text/token_store.py). Streamed TFDS datasets (c4, lm1b,
  # wikipedia, wmt14) need one; None: the dataset is tokenized in memory when the run starts.
  c.token_store = placeholder(str)
  # `dataset=mixture` (configs/gpt.py:dataset=mixture): a causal LM reads several token stores at
  # stated weights (vit_jax/data/text/mixture.py). stores: "NAME=STORE,..."; weights:
  # "NAME=WEIGHT,..." for every store (>= 0, normalized; 0 evaluates a source without training
  # on it), then stages ";STEP:NAME=WEIGHT,..." that take over at STEP (an annealing mixture).
  c.mixture = ml_collections.ConfigDict(dict(stores=placeholder(str), weights=placeholder(str)))
  # The field or column holding a document's text (files: jsonl and parquet, hf:), and what a
  # files: document that is not text is (CHOICES: refused, or skipped with a count).
  c.text_key = "text"
  c.bad_documents = "error"
  # A files: or hf: dataset read as pairs (docs/pairs.md): the fields of each record's source and
  # target (a dotted path into a struct, or a language of a `translation` struct). None: the
  # dataset is read as documents.
  c.source_key = placeholder(str)
  c.target_key = placeholder(str)
  c.tokenizer = ml_collections.ConfigDict(
      dict(
          # Characters: the offline defaults learn within minutes on a CPU. Real runs use
          # spm_unigram / byte_bpe with a vocab_size (see the configs' accelerator commands).
          kind="char",  # trained on the training split; data/tokenizers TRAINABLE_KINDS
          vocab_size=placeholder(int),  # None: every character (char kind only)
          # Loaded instead of trained: a token store's or workdir's DIR/tokenizer (or a file in
          # it), a SentencePiece .model or a tokenizer.json, of `kind` (data/tokenizers from_path)
          path=placeholder(str),
          max_train_texts=20_000,  # documents the tokenizer is trained on
      )
  )
  c.log_every = 100
  c.eval_every = 1_000
  c.checkpoint_every = 1_000
  return c


def text_model(c: ml_collections.ConfigDict, name: str, variant: str, **settings):
  """A text model's config: its preset, `max_len` following `c.seq_len`, and `settings`.

  The defaults suit the short CPU runs: no dropout (it underfits them, and attention dropout's
  random masks cost more than the matmuls on a CPU), attention by platform (XLA on a CPU),
  float32. Width, depth and heads of None keep the preset's shape.
  """
  defaults = dict(
      name=name,
      variant=variant,
      max_len=follows(c, "seq_len"),  # `--config.seq_len=512` reaches the position table too
      dropout_rate=0.0,
      attention_dropout_rate=0.0,
      attention_impl="auto",
      dtype="float32",
      width=placeholder(int),
      depth=placeholder(int),
      num_heads=placeholder(int),
  )
  return ml_collections.ConfigDict({**defaults, **settings})


# What image and text runs saved before these keys existed trained with.
_IMAGE_KEYS_ADDED_LATER = {"loss": "softmax_xent", "eval_view": "crop", "bad_images": "skip"}
_TEXT_KEYS_ADDED_LATER = {
    "mixture": {"stores": None, "weights": None},
    "text_key": "text",
    "bad_documents": "error",
    "source_key": None,
    "target_key": None,
}


def from_saved(saved: dict) -> dict:
  """A workdir's config.json, each key added since it was saved set to what that run did
  without it (a training key's default; an image run's loss and eval view, a text run's
  mixture, above), so that every key is read as `config[key]`."""

  def filled(default: dict, given: dict) -> dict:
    nested = {
        k: filled(default[k], v) for k, v in given.items() if isinstance(default.get(k), dict)
    }
    return {**default, **given, **nested}

  added = training_defaults().to_dict()
  added.update(
      _IMAGE_KEYS_ADDED_LATER if tasks.TASKS[saved["task"]].reads_images else _TEXT_KEYS_ADDED_LATER
  )
  return filled(added, saved)


def shrink_for_runlocal(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """`runlocal`: a few steps and two eval batches, to check the wiring rather than learn."""
  c.total_steps, c.batch_size, c.log_every, c.eval_every, c.checkpoint_every = 4, 8, 1, 4, 2
  c.eval_max_batches = 2
  c.optimizer.warmup_steps = 1
  return c
