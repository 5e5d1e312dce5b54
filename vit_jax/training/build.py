"""The trainer's step from a config: model, mesh, optimizer, sharded state and the jitted steps.

One function builds them for the trainer (train.py, real devices and data) and for compiling
ahead of time (aot.py, a TPU slice's devices and abstract inputs), so what `vit_jax.compile`
measures is the step the trainer runs.
"""

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import build_model
from vit_jax.training import mesh as mesh_lib
from vit_jax.training import optimizer as optimizer_lib
from vit_jax.training import partitioning
from vit_jax.training import train_step as train_step_lib


@dataclasses.dataclass
class Step:
  """Everything the training loop needs around its update step."""

  task: Any
  model_config: dict
  model: Any
  mesh: jax.sharding.Mesh
  tx: Any
  schedule: Callable
  init_state: Callable  # rng -> {"params", "opt_state", "step"}
  init_rng: jax.Array
  abstract_state: dict  # ShapeDtypeStructs without shardings
  state_shardings: dict
  batch_sharding: jax.sharding.NamedSharding
  replicated: jax.sharding.NamedSharding
  train_step: Callable  # jitted: (state, batch) -> (state, metrics)
  eval_step: Callable  # jitted: (params, batch) -> sums

  def abstract_inputs(self, batch_size: int) -> tuple:
    """(state, batch) of the train step as sharded ShapeDtypeStructs: compiling needs no data."""
    with_sharding = lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s)
    state = jax.tree.map(with_sharding, self.abstract_state, self.state_shardings)
    batch = {
        k: with_sharding(v, self.batch_sharding)
        for k, v in self.task.batch_spec(batch_size).items()
    }
    return state, batch


def check_batch(config, mesh) -> None:
  """The global batch must split evenly over the batch shards and the microbatches."""
  divisor = mesh_lib.batch_divisor(mesh) * config.grad_accum_steps
  if config.batch_size % divisor:
    sizes = ", ".join(f"{a}:{mesh.shape[a]}" for a in mesh_lib.BATCH_AXES)
    raise errors.ConfigError(
        f"batch_size={config.batch_size} must be divisible by the batch shards ({sizes}) times "
        f"grad_accum_steps={config.grad_accum_steps} ({divisor}); change one of them."
    )


def build_step(config, task, devices=None) -> Step:
  """The model, mesh (over `devices`, default all), optimizer, state shardings and jitted steps."""
  model_config = {**config.model.to_dict(), **task.model_overrides()}
  model = build_model(model_config)

  mesh = mesh_lib.make_mesh(config.mesh, devices)
  check_batch(config, mesh)
  tx, schedule = optimizer_lib.build_optimizer(config.optimizer, config.total_steps)

  def init_state(init_rng):
    params = model.init(init_rng, *task.init_inputs())["params"]
    return {"params": params, "opt_state": tx.init(params), "step": jnp.array(0, jnp.int32)}

  init_rng, step_rng = jax.random.split(jax.random.PRNGKey(config.seed))
  abstract_state = jax.eval_shape(init_state, init_rng)
  state_shardings = partitioning.tree_shardings(abstract_state, mesh)
  batch_sharding, replicated = mesh_lib.batch_sharding(mesh), mesh_lib.replicated(mesh)
  train_step = jax.jit(
      train_step_lib.make_train_step(
          task,
          model,
          tx,
          schedule,
          step_rng,
          grad_accum_steps=config.grad_accum_steps,
          nan_at_step=config.debug_nan_at_step,
          log_internals=config.get("log_internals", False),
      ),
      in_shardings=(state_shardings, batch_sharding),
      out_shardings=(state_shardings, replicated),
      donate_argnums=(0,),
  )
  eval_step = jax.jit(
      train_step_lib.make_eval_step(task, model),
      in_shardings=(state_shardings["params"], batch_sharding),
      out_shardings=replicated,
  )
  return Step(
      task=task,
      model_config=model_config,
      model=model,
      mesh=mesh,
      tx=tx,
      schedule=schedule,
      init_state=init_state,
      init_rng=init_rng,
      abstract_state=abstract_state,
      state_shardings=state_shardings,
      batch_sharding=batch_sharding,
      replicated=replicated,
      train_step=train_step,
      eval_step=eval_step,
  )
