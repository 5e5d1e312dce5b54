"""Peak memory of a compiled train step, as XLA plans it (no run, no timing)."""

import jax
import jax.numpy as jnp
import optax

from vit_jax.models import build_model


def train_step_temp_bytes(model_config: dict, batch_size: int, image_size: int = 224) -> int:
  """Bytes of temporaries (activations kept for the backward pass, workspaces) of one ViT step."""
  model = build_model(model_config)
  images = jax.ShapeDtypeStruct((batch_size, image_size, image_size, 3), jnp.float32)
  labels = jax.ShapeDtypeStruct((batch_size,), jnp.int32)
  params = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0),
                                             jnp.zeros((1, image_size, image_size, 3))))["params"]
  tx = optax.adam(1e-3)
  opt_state = jax.eval_shape(tx.init, params)

  def step(params, opt_state, images, labels):
    def loss_fn(p):
      logits = model.apply({"params": p}, images, train=True,
                           rngs={"dropout": jax.random.PRNGKey(0)})
      return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    grads = jax.grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  compiled = jax.jit(step, donate_argnums=(0, 1)).lower(params, opt_state, images,
                                                        labels).compile()
  return int(compiled.memory_analysis().temp_size_in_bytes)
