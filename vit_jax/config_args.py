"""Parses the `k=v,k=v` argument of `--config=configs/X.py:ARGS` against a config's defaults."""

import ast

from vit_jax import errors


def parse(arg: str | None, defaults: dict) -> dict:
  """Returns `defaults` updated from "k=v,k2=v2", values converted to the default's type.

  A key that is not in `defaults` is a ValueError listing the valid ones, so a typo never
  silently trains the wrong thing.
  """
  values = dict(defaults)
  for item in filter(None, (arg or "").split(",")):
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep:  # a bare word switches a boolean on, e.g. ":runlocal"
      raw = "True"
    if key not in defaults:
      raise errors.ConfigError(f"Unknown config argument {key!r} in {arg!r}; valid arguments are "
                               f"{sorted(defaults)}.")
    values[key] = _convert(raw.strip(), defaults[key], key)
  return values


def _convert(raw: str, default, key: str):
  if isinstance(default, bool):
    if raw.lower() in ("1", "true", "yes"):
      return True
    if raw.lower() in ("0", "false", "no"):
      return False
    raise errors.ConfigError(f"Config argument {key}={raw!r} must be a boolean (true/false).")
  if isinstance(default, (int, float)) and not isinstance(default, bool):
    try:
      return type(default)(ast.literal_eval(raw))
    except (ValueError, SyntaxError) as e:
      raise errors.ConfigError(
          f"Config argument {key}={raw!r} must be a {type(default).__name__}.") from e
  return raw


def training_defaults():
  """Keys every training config shares: optimizer, schedule, logging, checkpoints, mesh."""
  # pylint: disable=g-import-not-at-top
  import ml_collections
  from ml_collections.config_dict import placeholder
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.batch_size = 64
  c.total_steps = 1000
  c.grad_accum_steps = 1  # microbatches per step; the batch is split, gradients averaged
  c.optimizer = ml_collections.ConfigDict(dict(
      name="adamw",  # "adamw" or "sgd"
      lr=1e-3,
      b1=0.9,
      b2=0.999,
      momentum=0.9,  # sgd only
      weight_decay=1e-4,
      # True: decay scaled by the schedule only, not by the peak lr (big_vision's "decoupled").
      decoupled_weight_decay=False,
      grad_clip_norm=1.0,  # 0 disables clipping
      schedule="cosine",  # "cosine", "linear" or "constant" after warmup
      warmup_steps=100,
      end_lr_ratio=0.0,
      mu_dtype=placeholder(str),  # optimizer-state dtype of the first moment; None: params' dtype
  ))
  c.log_every = 50
  c.eval_every = 500
  c.eval_max_batches = placeholder(int)  # None: the whole eval split
  c.checkpoint_every = 500
  c.keep_checkpoints = 2
  # Async saves overlap training but raced under heavy CPU load in orbax 0.12 (seen in tests).
  c.async_checkpoints = False
  c.init_from = placeholder(str)  # our workdir/checkpoint or an .npz to fine-tune from
  c.input_shards = placeholder(int)  # None: one per process; fix it to make data topology-free
  c.nonfinite = "stop"  # non-finite loss/grads: "stop" (naming the step) or "skip" the update
  c.debug_nan_at_step = placeholder(int)  # fault injection: a NaN loss at this step
  c.prefetch_batches = 2  # batches prepared ahead on a background thread (0: none)
  c.mesh = "data:-1"  # axis sizes; -1 takes the remaining devices
  c.progress = "auto"  # "bar", "lines" or "auto" (a bar on a terminal)
  c.allow_data_change = False  # resume a workdir on other data (continued pretraining)
  return c


def shrink_for_runlocal(c):
  """`runlocal`: a few steps and two eval batches, to check the wiring rather than learn."""
  c.total_steps, c.batch_size, c.log_every, c.eval_every, c.checkpoint_every = 4, 8, 1, 4, 2
  c.eval_max_batches = 2
  c.optimizer.warmup_steps = 1
  return c
