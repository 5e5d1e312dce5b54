"""optax optimizers from a config: AdamW, SGD or Adafactor, warmup + decay schedule, clipping,
decay mask; and the exponential moving average of the parameters they update (`ema_*`)."""

import flax.traverse_util
import jax
import jax.numpy as jnp
import optax

from vit_jax import checkpoint
from vit_jax import errors

OPTIMIZERS = ("adamw", "sgd", "adafactor")
SCHEDULES = ("cosine", "linear", "constant", "rsqrt", "wsd")  # after the linear warmup
COOLDOWN_SHAPES = ("linear", "cosine", "1-sqrt")
# The schedules whose rate before the cooldown does not depend on total_steps: a run of one can
# be cooled down from any of its checkpoints to a budget of its own (config.branch_from).
BRANCHABLE_SCHEDULES = ("constant", "rsqrt", "wsd")
# Parameters that weight decay leaves alone: biases, norm scales, position embeddings, tokens.
NO_DECAY_NAMES = ("bias", "scale", "pos_embedding", "cls", "probe", "output_bias")
# The classifier's module in the image models (ViT, ResNet, Mixer): optimizer.head_weight_decay_mult
# scales its decay.
HEAD = "head"

# big_vision optax.py:187-192, scale_by_adafactor's defaults (train_vit_g.py:70 keeps them): the
# second moment of every matrix whose two largest dimensions are both >= 32 is factored into row
# and column means; its decay rate at step t (from 0) is min(0.999, 1 - (t + 1)^-0.8).
ADAFACTOR_MIN_DIM_TO_FACTOR = 32
ADAFACTOR_DECAY_EXPONENT = 0.8
ADAFACTOR_BETA2_CAP = 0.999
ADAFACTOR_EPS = 1e-30  # added to the squared gradients


def _decay(opt_cfg, decay_steps: int):
  """The schedule after warmup, as a function of the steps since warmup ended."""
  lr, end = opt_cfg.lr, opt_cfg.lr * opt_cfg.end_lr_ratio
  if opt_cfg.schedule == "cosine":
    return optax.cosine_decay_schedule(lr, decay_steps, alpha=opt_cfg.end_lr_ratio)
  if opt_cfg.schedule == "linear":
    return optax.linear_schedule(lr, end, decay_steps)
  if opt_cfg.schedule in ("constant", "wsd"):  # wsd: stable until its cooldown
    return optax.constant_schedule(lr)
  if opt_cfg.schedule == "rsqrt":
    # big_vision utils.py create_learning_rate_schedule, decay_type "rsqrt" with shift 0:
    # lr / sqrt(1 + (step - warmup) / timescale).
    timescale = opt_cfg.rsqrt_timescale
    return lambda count: lr / jnp.sqrt(1.0 + count / timescale)
  raise errors.ConfigError(
      f"Unknown schedule {opt_cfg.schedule!r}; choose one of {', '.join(SCHEDULES)}."
  )


def cooldown_factor(shape: str, cooldown_steps: int, total_steps: int):
  """step -> the factor the cooldown multiplies the rate by: 1 until the last `cooldown_steps`
  steps, then down to 0 at `total_steps` along `shape` of the fraction p of the cooldown done:
  linear 1 - p (big_vision's cooldown_steps: min(1, (total - step) / cooldown)), cosine
  (1 + cos(pi p)) / 2, or 1-sqrt 1 - sqrt(p) (Hägele et al. 2024, section 3)."""
  if shape not in COOLDOWN_SHAPES:
    raise errors.ConfigError(
        f"Unknown cooldown shape {shape!r}; choose one of {', '.join(COOLDOWN_SHAPES)}."
    )

  def factor(step):
    done = jnp.clip((step - (total_steps - cooldown_steps)) / cooldown_steps, 0.0, 1.0)
    if shape == "linear":
      return 1.0 - done
    if shape == "cosine":
      return 0.5 * (1.0 + jnp.cos(jnp.pi * done))
    return 1.0 - jnp.sqrt(done)

  return factor


def learning_rate_schedule(opt_cfg, total_steps: int):
  """Linear warmup from 0 to lr, then the schedule, times the cooldown's factor.

  cosine and linear end at lr * end_lr_ratio at total_steps; constant stays at lr; rsqrt is
  big_vision's lr / sqrt(1 + (step - warmup) / rsqrt_timescale); wsd (warmup-stable-decay) is
  constant until its cooldown. A cooldown (`cooldown_steps` > 0, which wsd needs) takes the rate
  to 0 over the last cooldown_steps steps, shaped by `cooldown_shape` (`cooldown_factor`).
  """
  lr, warmup = opt_cfg.lr, opt_cfg.warmup_steps
  schedule = _decay(opt_cfg, max(total_steps - warmup, 1))
  if warmup > 0:
    schedule = optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), schedule], [warmup])
  if opt_cfg.cooldown_steps:
    factor = cooldown_factor(opt_cfg.cooldown_shape, opt_cfg.cooldown_steps, total_steps)
    return lambda step, base=schedule: base(step) * factor(step)
  return schedule


def schedule_problems(opt_cfg, total_steps: int) -> list[str]:
  """What the schedule's keys cannot mean together, each naming its --config key."""
  problems = []
  cooldown = opt_cfg.cooldown_steps
  if opt_cfg.schedule == "wsd" and not cooldown:
    problems.append(
        "--config.optimizer.schedule=wsd decays over its cooldown: set "
        "--config.optimizer.cooldown_steps to its length (e.g. 20% of total_steps)"
    )
  if isinstance(cooldown, int) and isinstance(total_steps, int) and cooldown > total_steps > 0:
    problems.append(
        f"--config.optimizer.cooldown_steps={cooldown} must be <= --config.total_steps="
        f"{total_steps}"
    )
  return problems


def decay_mask(params, in_head: bool | None = None):
  """True for the weights that get weight decay (kernels and embeddings); `in_head` True or False:
  only those inside, or outside, the classifier head (module HEAD)."""
  flat = flax.traverse_util.flatten_dict(params)
  if in_head is not None and not any(path[0] == HEAD for path in flat):
    raise errors.ConfigError(
        f"--config.optimizer.head_weight_decay_mult scales the decay of the {HEAD!r} module's "
        f"weights, and this model has none; leave it at 1."
    )
  mask = {
      path: path[-1] not in NO_DECAY_NAMES and (in_head is None or (path[0] == HEAD) == in_head)
      for path in flat
  }
  return flax.traverse_util.unflatten_dict(mask)


def scale_by_adafactor(momentum: float, momentum_dtype=None):
  """big_vision's Adafactor (optax.py:187-214, scale_by_adafactor) without its block-RMS clipping
  (off by default there): the gradient over the root of a factored second moment
  (ADAFACTOR_* above), then momentum as an EMA without debiasing (m = momentum m + (1 - momentum)
  u) kept in `momentum_dtype` (big_vision: bfloat16); momentum 0: none."""

  def decay_rate(step, exponent):
    t_plus_1 = jnp.asarray(step, jnp.float32) + 1.0
    return jnp.minimum(ADAFACTOR_BETA2_CAP, 1.0 - t_plus_1 ** (-exponent))

  parts = [
      optax.scale_by_factored_rms(
          factored=True,
          decay_rate=ADAFACTOR_DECAY_EXPONENT,
          step_offset=0,
          min_dim_size_to_factor=ADAFACTOR_MIN_DIM_TO_FACTOR,
          epsilon=ADAFACTOR_EPS,
          decay_rate_fn=decay_rate,
      )
  ]
  if momentum:
    parts.append(optax.ema(momentum, debias=False, accumulator_dtype=momentum_dtype))
  return optax.chain(*parts)


def scale_by_adam_without_bias_correction(b1: float, b2: float, eps: float, mu_dtype=None):
  """m / (sqrt(v) + eps) of the raw moments, as BERT's AdamWeightDecayOptimizer computes its
  update (google-research/bert optimization.py:131-137): early steps are not rescaled by
  1 / (1 - b^t). The moments and the state are optax.scale_by_adam's, so checkpoints are alike."""
  adam = optax.scale_by_adam(b1=b1, b2=b2, eps=eps, mu_dtype=mu_dtype)

  def update(updates, state, params=None):
    _, state = adam.update(updates, state, params)
    scaled = jax.tree.map(
        lambda g, m, v: (m.astype(jnp.float32) / (jnp.sqrt(v) + eps)).astype(g.dtype),
        updates,
        state.mu,
        state.nu,
    )
    return scaled, state

  return optax.GradientTransformation(adam.init, update)


def build_optimizer(opt_cfg, total_steps: int):
  """Returns (optax transformation, schedule). Clipping happens before everything else."""
  schedule = learning_rate_schedule(opt_cfg, total_steps)
  parts = []
  if opt_cfg.grad_clip_norm and opt_cfg.grad_clip_norm > 0:
    parts.append(optax.clip_by_global_norm(opt_cfg.grad_clip_norm))
  if opt_cfg.name == "adamw":
    # mu_dtype: e.g. bfloat16 halves the first moment's memory; the second stays fp32.
    adam = optax.scale_by_adam if opt_cfg.bias_correction else scale_by_adam_without_bias_correction
    parts.append(adam(b1=opt_cfg.b1, b2=opt_cfg.b2, eps=opt_cfg.eps, mu_dtype=opt_cfg.mu_dtype))
  elif opt_cfg.name == "sgd":
    if opt_cfg.momentum:
      parts.append(optax.trace(decay=opt_cfg.momentum, accumulator_dtype=opt_cfg.mu_dtype))
  elif opt_cfg.name == "adafactor":
    parts.append(scale_by_adafactor(opt_cfg.momentum, opt_cfg.mu_dtype))
  else:
    raise errors.ConfigError(
        f"Unknown optimizer {opt_cfg.name!r}; choose one of {', '.join(OPTIMIZERS)}."
    )
  if opt_cfg.weight_decay:
    # Coupled: decay * lr_t. Decoupled: decay * lr_t / lr, i.e. follows only the schedule's shape.
    rate = (
        opt_cfg.weight_decay / opt_cfg.lr
        if opt_cfg.decoupled_weight_decay
        else opt_cfg.weight_decay
    )
    head_mult = opt_cfg.head_weight_decay_mult
    if head_mult == 1:
      parts.append(optax.add_decayed_weights(rate, mask=decay_mask))
    else:  # as big_vision's wd_mults (optax.py:132-138): the head's kernel decays at rate x mult
      parts.append(optax.add_decayed_weights(rate, mask=lambda p: decay_mask(p, in_head=False)))
      parts.append(
          optax.add_decayed_weights(rate * head_mult, mask=lambda p: decay_mask(p, in_head=True))
      )
  parts.append(optax.scale_by_learning_rate(schedule))
  return optax.chain(*parts), schedule


# ---- The EMA of the parameters -------------------------------------------------------------
# An exponential moving average (EMA) of the parameters, kept in the train state as
# "ema_params" (checkpoint.EMA_PARAMS) when `config.ema_decay` is set.
#
# After each applied update, ema = d * ema + (1 - d) * params, with the decay warmed up as in
# TensorFlow's `ExponentialMovingAverage(num_updates=t)`:
#
#     d(t) = min(ema_decay, (1 + t) / (10 + t))      t: the step before this update (0 first)
#
# so the average forgets the initialization within the first steps instead of the first
# 1 / (1 - ema_decay) of them; d(t) reaches 0.99 near step 900, 0.999 near 9,000 and 0.9999 near
# 90,000. The average is kept in float32 whatever the params' dtype, and starts from the params
# (fresh, fine-tuned or, on a resume whose checkpoint has none, restored).


def ema_decay_at(step, ema_decay: float):
  """The decay of the update after `step` steps (a scalar array or int)."""
  step = jnp.asarray(step, jnp.float32)
  return jnp.minimum(ema_decay, (1.0 + step) / (10.0 + step))


def ema_start(params):
  """A new average: a float32 copy of `params` (a copy: the train state's buffers are donated
  one by one, so the two must not share one)."""
  return jax.tree.map(lambda p: jnp.array(p, jnp.float32, copy=True), params)


def ema_start_placed(params, state_shardings: dict):
  """`ema_start(params)` placed where the train state keeps its average."""
  return jax.jit(ema_start, out_shardings=state_shardings[checkpoint.EMA_PARAMS])(params)


def ema_update(ema_params, params, decay):
  """ema * decay + params * (1 - decay), leaf by leaf, in float32."""
  return jax.tree.map(
      lambda e, p: decay * e + (1.0 - decay) * p.astype(jnp.float32), ema_params, params
  )


def ema_like_params(ema_params, params):
  """The average in the params' dtypes, to run the model with (a no-op for float32 params)."""
  return jax.tree.map(lambda e, p: e.astype(p.dtype), ema_params, params)
