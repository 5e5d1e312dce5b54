"""Our side of each workload: a step callable that runs one timed unit and waits for it.

Training steps are the trainer's own: `train.update_step` (gradient accumulation off, the
non-finite guard on) with the task's real `apply`, `totals` and `loss`, optax AdamW, jit-compiled
with the state donated, exactly as `vit_jax/training/train.py` builds it. The tasks are built
without data (no dataset is opened and no tokenizer trained): the batches are random tensors of
the real shapes.
"""

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from vit_jax import tasks
from vit_jax.models import build_model
from vit_jax.models import sampling
from vit_jax.tasks import causal_lm
from vit_jax.tasks import classification
from vit_jax.tasks import masked_lm
from vit_jax.tasks import seq2seq
from vit_jax.training import train


class _CausalLM(causal_lm.CausalLM):
  """The causal-LM task's step code without its tokenizer (nothing here reads text)."""

  def __init__(self):  # pylint: disable=super-init-not-called
    tasks.Task.__init__(self, ml_collections.ConfigDict())


class _MaskedLM(masked_lm.MaskedLM):
  """The MLM task's step code (no next-sentence head) without its tokenizer."""

  def __init__(self):  # pylint: disable=super-init-not-called
    tasks.Task.__init__(self, ml_collections.ConfigDict())
    self.nsp = False


def _runner(task, model, batch, **step_options):
  """One jitted trainer step on `batch`, repeated; returns the callable that times one step.

  `step_options` go to `train.update_step` (the guard's cost is measured through it).
  """
  params = jax.jit(lambda: model.init(jax.random.PRNGKey(0), *task.model_inputs(batch))["params"])()
  schedule = optax.constant_schedule(1e-4)
  tx = optax.adamw(schedule, weight_decay=0.01)
  step = jax.jit(
      functools.partial(
          train.update_step,
          task=task,
          model=model,
          tx=tx,
          schedule=schedule,
          step_rng=jax.random.PRNGKey(1),
          **step_options,
      ),
      donate_argnums=(0,),
  )
  holder = {"state": {"params": params, "opt_state": tx.init(params), "step": jnp.int32(0)}}

  def run():
    holder["state"], metrics = step(holder["state"], batch)
    metrics["train_loss"].block_until_ready()

  return run


def vit_train(config, batch_size, image_size, **step_options):
  task = classification.ImageClassification(
      ml_collections.ConfigDict({"image_size": image_size, "loss": "softmax_xent"}),
      num_classes=config["num_classes"],
  )
  rng = np.random.default_rng(0)
  label_B = rng.integers(0, config["num_classes"], batch_size)
  batch = {
      "image": rng.standard_normal((batch_size, image_size, image_size, 3)).astype(np.float32),
      "label": label_B.astype(np.int32),
      "labels": np.eye(config["num_classes"], dtype=np.float32)[label_B],  # one-hot soft labels
  }
  return _runner(task, build_model(config), jax.tree.map(jnp.asarray, batch), **step_options)


def gpt_train(config, batch_size, seq_len, **step_options):
  tokens_BxT = np.random.default_rng(0).integers(0, config["vocab_size"], (batch_size, seq_len + 1))
  batch = {
      "inputs": tokens_BxT[:, :-1],
      "targets": tokens_BxT[:, 1:],
      "positions": np.tile(np.arange(seq_len), (batch_size, 1)),
      "segment_ids": np.ones((batch_size, seq_len), np.int32),  # one document per row
      "weights": np.ones((batch_size, seq_len), np.float32),
  }
  batch = {
      k: jnp.asarray(v, jnp.float32 if k == "weights" else jnp.int32) for k, v in batch.items()
  }
  return _runner(_CausalLM(), build_model(config), batch, **step_options)


def bert_mlm_train(config, batch_size, seq_len, masked):
  rng = np.random.default_rng(0)
  batch = {
      "tokens": rng.integers(0, config["vocab_size"], (batch_size, seq_len)),
      "token_type_ids": np.zeros((batch_size, seq_len)),
      "input_mask": np.ones((batch_size, seq_len)),
      "positions": np.tile(np.arange(seq_len), (batch_size, 1)),
      "masked_positions": np.sort(
          rng.permuted(np.tile(np.arange(seq_len), (batch_size, 1)), axis=1)[:, :masked], axis=1
      ),
      "masked_targets": rng.integers(0, config["vocab_size"], (batch_size, masked)),
      "masked_weights": np.ones((batch_size, masked)),
  }
  batch = {
      k: jnp.asarray(v, jnp.float32 if k == "masked_weights" else jnp.int32)
      for k, v in batch.items()
  }
  return _runner(_MaskedLM(), build_model(config), batch)


def gpt_decode(config, batch_size, prompt_len, new_tokens):
  model = build_model(config)
  params = jax.jit(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32)))()
  params = params["params"]
  prompts = np.random.default_rng(0).integers(0, config["vocab_size"], (batch_size, prompt_len))

  def run():  # everything a user's call costs, compile excepted (warm-up compiles)
    sampling.generate(config, params, prompts.tolist(), max_new_tokens=new_tokens)

  return run


def matmul(size):
  a = jnp.asarray(np.random.default_rng(0).standard_normal((size, size)), jnp.float32)
  dot = jax.jit(jnp.dot)
  return lambda: dot(a, a).block_until_ready()


def seq2seq_train(config, batch_size, input_len, target_len):
  """The seq2seq task's step: teacher-forced targets, every token real (no padding)."""
  task = seq2seq.Seq2Seq(
      ml_collections.ConfigDict(
          {"input_len": input_len, "target_len": target_len, "label_smoothing": 0.0}
      ),
      None,
      vocab_size=config["vocab_size"],
  )
  rng = np.random.default_rng(0)
  targets_BxT = rng.integers(0, config["vocab_size"], (batch_size, target_len + 1))
  batch = {
      "inputs": rng.integers(0, config["vocab_size"], (batch_size, input_len)),
      "input_mask": np.ones((batch_size, input_len)),
      "decoder_inputs": targets_BxT[:, :-1],
      "targets": targets_BxT[:, 1:],
      "weights": np.ones((batch_size, target_len)),
  }
  batch = {
      k: jnp.asarray(v, jnp.float32 if k == "weights" else jnp.int32) for k, v in batch.items()
  }
  return _runner(task, build_model(config), batch)


def seq2seq_beam(config, batch_size, input_len, new_tokens, beam_size):
  """Beam search over a batch of sources, as `vit_jax.translate` calls it: every row decodes
  `new_tokens` tokens (no EOS), as the peer is held to `min_new_tokens`."""
  model = build_model(config)
  inputs_BxS = jnp.zeros((1, input_len), jnp.int32)
  params = jax.jit(lambda: model.init(jax.random.PRNGKey(0), inputs_BxS, inputs_BxS[:, :8]))()
  params = params["params"]
  sources_BxS = np.random.default_rng(0).integers(3, config["vocab_size"], (batch_size, input_len))
  mask_BxS = np.ones_like(sources_BxS)

  def run():
    sampling.seq2seq_decode(
        config,
        params,
        sources_BxS,
        mask_BxS,
        max_new_tokens=new_tokens,
        start_id=0,
        eos_id=None,
        beam_size=beam_size,
    )

  return run
