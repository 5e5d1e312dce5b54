"""optax optimizers from a config: AdamW or SGD, warmup + decay schedule, clipping, decay mask."""

import flax.traverse_util
import jax
import jax.numpy as jnp
import optax

from vit_jax import errors

OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("cosine", "linear", "constant", "rsqrt", "wsd")  # after the linear warmup
COOLDOWN_SHAPES = ("linear", "cosine", "1-sqrt")
# The schedules whose rate before the cooldown does not depend on total_steps: a run of one can
# be cooled down from any of its checkpoints to a budget of its own (config.branch_from).
BRANCHABLE_SCHEDULES = ("constant", "rsqrt", "wsd")
# Parameters that weight decay leaves alone: biases, norm scales, position embeddings, tokens.
NO_DECAY_NAMES = ("bias", "scale", "pos_embedding", "cls", "probe", "output_bias")


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


def decay_mask(params):
  """True for the weights that get weight decay (kernels and embeddings)."""
  flat = flax.traverse_util.flatten_dict(params)
  mask = {path: path[-1] not in NO_DECAY_NAMES for path in flat}
  return flax.traverse_util.unflatten_dict(mask)


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
    parts.append(optax.add_decayed_weights(rate, mask=decay_mask))
  parts.append(optax.scale_by_learning_rate(schedule))
  return optax.chain(*parts), schedule
