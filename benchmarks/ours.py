"""Our side of each workload: a step callable that runs one timed unit and waits for it.

Training steps are built the way `vit_jax/train.py` builds its step: `build_model`, a jit-compiled
value_and_grad + optax AdamW update with donated state and the trainer's non-finite guard (a
non-finite step keeps the old params and optimizer state).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vit_jax import sampling
from vit_jax.models import build_model


def _train_step(model, loss_fn, params):
  tx = optax.adamw(1e-4, weight_decay=0.01)
  state = {"params": params, "opt_state": tx.init(params)}

  def step(state, batch):
    loss, grads = jax.value_and_grad(lambda p: loss_fn(model, p, batch))(state["params"])
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    new_params = optax.apply_updates(state["params"], updates)
    finite = jnp.isfinite(loss) & jnp.isfinite(optax.global_norm(grads))
    keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)
    return {
        "params": keep(new_params, state["params"]),
        "opt_state": keep(opt_state, state["opt_state"]),
    }, loss

  return jax.jit(step, donate_argnums=(0,)), state


def _runner(step, state, batch):
  holder = {"state": state}

  def run():
    holder["state"], loss = step(holder["state"], batch)
    loss.block_until_ready()

  return run


def _init(model, *inputs):
  return jax.jit(lambda: model.init(jax.random.PRNGKey(0), *inputs)["params"])()


def vit_train(config, batch_size, image_size):
  model = build_model(config)
  rng = np.random.default_rng(0)
  batch = {
      "image": jnp.asarray(
          rng.standard_normal((batch_size, image_size, image_size, 3)), jnp.float32
      ),
      "label": jnp.asarray(rng.integers(0, config["num_classes"], batch_size), jnp.int32),
  }

  def loss_fn(model, params, batch):
    logits_BxC = model.apply({"params": params}, batch["image"], train=True)
    return optax.softmax_cross_entropy_with_integer_labels(logits_BxC, batch["label"]).mean()

  return _runner(*_train_step(model, loss_fn, _init(model, batch["image"][:1])), batch)


def gpt_train(config, batch_size, seq_len):
  model = build_model(config)
  tokens_BxT = jnp.asarray(
      np.random.default_rng(0).integers(0, config["vocab_size"], (batch_size, seq_len + 1)),
      jnp.int32,
  )

  def loss_fn(model, params, tokens_BxT):
    logits_BxTxV = model.apply({"params": params}, tokens_BxT[:, :-1], train=True)
    return optax.softmax_cross_entropy_with_integer_labels(logits_BxTxV, tokens_BxT[:, 1:]).mean()

  return _runner(*_train_step(model, loss_fn, _init(model, tokens_BxT[:1, :-1])), tokens_BxT)


def bert_mlm_train(config, batch_size, seq_len, masked):
  model = build_model(config)
  rng = np.random.default_rng(0)
  batch = {
      "tokens": rng.integers(0, config["vocab_size"], (batch_size, seq_len)),
      "positions": np.sort(
          rng.permuted(np.tile(np.arange(seq_len), (batch_size, 1)), axis=1)[:, :masked], axis=1
      ),
      "targets": rng.integers(0, config["vocab_size"], (batch_size, masked)),
  }
  batch = {k: jnp.asarray(v, jnp.int32) for k, v in batch.items()}
  ones_BxL = jnp.ones((batch_size, seq_len), jnp.int32)

  def loss_fn(model, params, batch):
    out = model.apply(
        {"params": params},
        batch["tokens"],
        jnp.zeros_like(ones_BxL),
        ones_BxL,
        None,
        None,
        batch["positions"],
        train=True,
        rngs={"dropout": jax.random.PRNGKey(0)},
    )
    return optax.softmax_cross_entropy_with_integer_labels(
        out["mlm_logits"], batch["targets"]
    ).mean()

  params = _init(model, batch["tokens"][:1], None, None, None, None, batch["positions"][:1])
  return _runner(*_train_step(model, loss_fn, params), batch)


def gpt_decode(config, batch_size, prompt_len, new_tokens):
  model = build_model(config)
  params = _init(model, jnp.zeros((1, 8), jnp.int32))
  prompts = np.random.default_rng(0).integers(0, config["vocab_size"], (batch_size, prompt_len))

  def run():  # everything a user's call costs, compile excepted (warm-up compiles)
    sampling.generate(config, params, prompts.tolist(), max_new_tokens=new_tokens)

  return run


def matmul(size):
  a = jnp.asarray(np.random.default_rng(0).standard_normal((size, size)), jnp.float32)
  dot = jax.jit(jnp.dot)
  return lambda: dot(a, a).block_until_ready()
