"""Steps for a compute budget: a run's `total_steps` from its training FLOPs per step.

IsoFLOP sweeps (Hoffmann et al. 2022, approach 2) train every model size on the same compute, so
each run's length follows from its model. A sweep file calls `steps_for_budget` while it lists its
runs; the FLOPs per example are the trainer's own count (vit_jax/training/flops.py: 3x the
forward matmuls, PaLM's 6N + 12LHQT per token), taken from the run's config with the task built
without data, so nothing is read or trained and the count equals the run's `run_info.json`. A text
config therefore needs its vocabulary size set (`tokenizer.vocab_size`).
"""

import functools

from vit_jax import errors
from vit_jax.sweep import spec


@functools.cache
def _per_example(config: str, overrides: tuple) -> tuple[float, int, dict]:
  """(training FLOPs per example, parameters, the run's config as a dict) of one model."""
  # pylint: disable=g-import-not-at-top  (JAX and the model only where a budget is used)
  import jax

  from vit_jax import tasks
  from vit_jax.models import build_model
  from vit_jax.sweep import checks
  from vit_jax.training import flops

  run_config = checks.run_config(spec.Run("budget", config, overrides))
  task = tasks.build_task_without_data(run_config)
  model_config = {**run_config.model.to_dict(), **task.model_overrides()}
  per_example = flops.train_flops_per_example(model_config, task.init_inputs(1))
  model = build_model(model_config)
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), *task.init_inputs(1)))
  return per_example, flops.count_params(shapes["params"]), run_config.to_dict()


def model_cost(config: str, overrides: dict) -> tuple[float, int]:
  """(training FLOPs per step, parameters) of the run `config` + `overrides` describes."""
  per_example, params, run_config = _per_example(config, tuple(overrides.items()))
  return per_example * run_config["batch_size"], params


def steps_for_budget(
    config: str, overrides: dict, budget_flops: float, *, run: str, min_steps: int | None = None
) -> int:
  """The step count whose training compute is nearest `budget_flops` for this run's model.

  `overrides` are the run's (everything but total_steps). A budget that buys fewer than
  `min_steps` steps (default: the config's warmup, at least 1) is a ConfigError naming the run,
  the budget and the smallest budget that would do.
  """
  per_step, _ = model_cost(config, overrides)
  _, _, run_config = _per_example(config, tuple(overrides.items()))
  if min_steps is None:
    min_steps = max(1, run_config["optimizer"]["warmup_steps"])
  if budget_flops / per_step < min_steps:  # before rounding: 0.6 of a step is not one step
    raise errors.ConfigError(
        f"run {run!r}: a budget of {budget_flops:.3g} FLOPs buys {budget_flops / per_step:.3g} "
        f"steps of {per_step:.3g} FLOPs, fewer than the minimum of {min_steps} (warmup); the "
        f"smallest budget for this model is {min_steps * per_step:.3g} FLOPs. Raise the budget "
        "or drop the model from it; no run was started."
    )
  return round(budget_flops / per_step)
