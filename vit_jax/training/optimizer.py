"""optax optimizers from a config: AdamW or SGD, warmup + decay schedule, clipping, decay mask."""

import flax.traverse_util
import jax
import jax.numpy as jnp
import optax

from vit_jax import errors

OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("cosine", "linear", "constant")  # after the linear warmup
# Parameters that weight decay leaves alone: biases, norm scales, position embeddings, tokens.
NO_DECAY_NAMES = ("bias", "scale", "pos_embedding", "cls", "probe", "output_bias")


def learning_rate_schedule(opt_cfg, total_steps: int):
  """Linear warmup from 0 to lr, then cosine, linear or constant down to lr * end_lr_ratio."""
  lr, warmup = opt_cfg.lr, opt_cfg.warmup_steps
  end = lr * opt_cfg.end_lr_ratio
  decay_steps = max(total_steps - warmup, 1)
  if opt_cfg.schedule == "cosine":
    decay = optax.cosine_decay_schedule(lr, decay_steps, alpha=opt_cfg.end_lr_ratio)
  elif opt_cfg.schedule == "linear":
    decay = optax.linear_schedule(lr, end, decay_steps)
  elif opt_cfg.schedule == "constant":
    decay = optax.constant_schedule(lr)
  else:
    raise errors.ConfigError(
        f"Unknown schedule {opt_cfg.schedule!r}; choose one of {', '.join(SCHEDULES)}."
    )
  if warmup <= 0:
    return decay
  return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), decay], [warmup])


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
