"""An exponential moving average (EMA) of the parameters, kept in the train state as
"ema_params" (checkpoint.EMA_PARAMS) when `config.ema_decay` is set.

After each applied update, ema = d * ema + (1 - d) * params, with the decay warmed up as in
TensorFlow's `ExponentialMovingAverage(num_updates=t)`:

    d(t) = min(ema_decay, (1 + t) / (10 + t))      t: the step before this update (0 first)

so the average forgets the initialization within the first steps instead of the first
1 / (1 - ema_decay) of them; d(t) reaches 0.99 near step 900, 0.999 near 9,000 and 0.9999 near
90,000. The average is kept in float32 whatever the params' dtype, and starts from the params
(fresh, fine-tuned or, on a resume whose checkpoint has none, restored).
"""

import jax
import jax.numpy as jnp

from vit_jax import checkpoint


def decay_at(step, ema_decay: float):
  """The decay of the update after `step` steps (a scalar array or int)."""
  step = jnp.asarray(step, jnp.float32)
  return jnp.minimum(ema_decay, (1.0 + step) / (10.0 + step))


def start(params):
  """A new average: a float32 copy of `params` (a copy: the train state's buffers are donated
  one by one, so the two must not share one)."""
  return jax.tree.map(lambda p: jnp.array(p, jnp.float32, copy=True), params)


def start_placed(params, state_shardings: dict):
  """`start(params)` placed where the train state keeps its average."""
  return jax.jit(start, out_shardings=state_shardings[checkpoint.EMA_PARAMS])(params)


def update(ema_params, params, decay):
  """ema * decay + params * (1 - decay), leaf by leaf, in float32."""
  return jax.tree.map(
      lambda e, p: decay * e + (1.0 - decay) * p.astype(jnp.float32), ema_params, params
  )


def like_params(ema_params, params):
  """The average in the params' dtypes, to run the model with (a no-op for float32 params)."""
  return jax.tree.map(lambda e, p: e.astype(p.dtype), ema_params, params)
