"""Tiny in-process configs from the real config files, for tests that call the trainer directly."""

import os

import jax
import numpy as np

from tests import helpers
from vit_jax.interop import orbax_format


def load(name: str, arg: str = ""):
  """`configs/<name>.py` with `arg`, logging every step as lines and reading input inline."""
  config = helpers.repo_file(f"configs/{name}.py").get_config(arg)
  config.progress = "lines"
  config.prefetch_batches = 0
  config.log_every = 1
  config.eval_max_batches = 1
  return config


def tiny_vit(digits_dir, steps: int):
  """A 1-layer ViT on the embedded digits: compiles in seconds."""
  c = load("vit")
  c.data_dir = digits_dir
  c.model.update(width=32, depth=1, num_heads=2, mlp_dim=64, dropout_rate=0.0)
  c.augment.update(randaugment_layers=0, mixup_alpha=0.0, label_smoothing=0.0)
  c.batch_size, c.total_steps = 16, steps
  c.eval_every = c.checkpoint_every = steps
  return c


def tiny_seq2seq(steps: int, arg: str = ""):
  """A 1-layer encoder-decoder on the embedded string-reversal task (targets of 1-12 letters), or
  the toy task `arg` names (`dataset=toy_number_words`)."""
  c = load("seq2seq", arg)
  c.model.update(width=32, num_layers=1, num_heads=2, mlp_dim=64)
  c.input_len = c.target_len = 16
  c.batch_size, c.total_steps = 8, steps
  c.eval_every = c.checkpoint_every = steps
  return c


def sgd(config, lr: float = 0.5):
  """Plain SGD: the update is lr * gradient, so any error in the gradient's scale shows."""
  config.optimizer.update(
      name="sgd",
      lr=lr,
      momentum=0.0,
      weight_decay=0.0,
      grad_clip_norm=0.0,
      warmup_steps=0,
      schedule="constant",
  )
  return config


def read_state(workdir, step: int) -> dict:
  """Flat {path: array} of a checkpoint's whole train state: params, optimizer state and step."""
  state_dir = os.path.join(str(workdir), "checkpoints", str(step), "state")
  state = orbax_format.read_state_dir(state_dir)
  flat = jax.tree_util.tree_flatten_with_path(state)[0]
  return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in flat}
