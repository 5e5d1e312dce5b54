"""What a run's steps run on: the model, the device mesh, the optimizer and the state's shardings
(`prepare`, the trainer's first part; vit_jax.compile and the benchmarks build the same over other
devices), and the fresh state drawn on them."""

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from vit_jax import checkpoint
from vit_jax import startup
from vit_jax.models import build_model
from vit_jax.training import mesh as mesh_lib
from vit_jax.training import optimizer as optimizer_lib


@dataclasses.dataclass(frozen=True)
class Setup:
  """What the steps run on: the model, the device mesh, the optimizer and where the state lives."""

  task: Any
  model_config: dict
  model: Any
  mesh: jax.sharding.Mesh
  tx: optax.GradientTransformation
  schedule: Callable  # step -> learning rate
  init_rng: jax.Array
  step_rng: jax.Array  # folded with the step and microbatch: dropout and other training noise
  abstract_state: dict  # init_state's {"params", "opt_state", "step"[, "ema_params"]}, no shardings
  state_shardings: dict
  ema_decay: float | None = None  # config.ema_decay (training/optimizer.py)

  def init_state(self, init_rng) -> dict:
    params = self.model.init(init_rng, *self.task.init_inputs())["params"]
    state = {"params": params, "opt_state": self.tx.init(params), "step": jnp.array(0, jnp.int32)}
    if self.ema_decay is not None:
      state[checkpoint.EMA_PARAMS] = optimizer_lib.ema_start(params)
    return state

  @functools.cached_property
  def jitted_init_state(self) -> Callable:
    """`init_state` jitted over the mesh, its result placed by `state_shardings`."""
    return jax.jit(self.init_state, out_shardings=self.state_shardings)

  def fresh_state(self) -> dict:
    """A new run's state, drawn from `init_rng` on the mesh; its random numbers by JAX's Threefry
    kernel on the platforms of startup.INIT_THREEFRY_KERNEL_PLATFORMS."""
    platform = self.mesh.devices.flat[0].platform
    with startup.threefry_kernel_lowering(platform in startup.INIT_THREEFRY_KERNEL_PLATFORMS):
      return self.jitted_init_state(self.init_rng)

  def sharded_abstract_state(self) -> dict:
    """The state as ShapeDtypeStructs with their shardings (what a restore or a compile needs)."""
    return jax.tree.map(_with_sharding, self.abstract_state, self.state_shardings)

  def abstract_inputs(self, batch_size: int) -> tuple:
    """(state, batch) of the train step as sharded ShapeDtypeStructs: compiling needs no data."""
    batch_sharding = mesh_lib.batch_sharding(self.mesh)
    batch_spec = self.task.batch_spec(batch_size)
    return self.sharded_abstract_state(), {
        k: _with_sharding(v, batch_sharding) for k, v in batch_spec.items()
    }

  @functools.cached_property
  def eval_step(self) -> Callable:
    """Jitted `(params, batch) -> sums` of the task's eval metrics (every evaluator shares it)."""
    return jax.jit(
        functools.partial(eval_step, task=self.task, model=self.model),
        in_shardings=(self.state_shardings["params"], mesh_lib.batch_sharding(self.mesh)),
        out_shardings=mesh_lib.replicated(self.mesh),
    )


def eval_step(params, batch: dict, *, task, model) -> dict:
  """Sums of the task's eval metrics over `batch` (padded rows count nothing)."""
  return task.eval_sums(task.apply(model, params, batch, train=False), batch)


def _with_sharding(x, sharding) -> jax.ShapeDtypeStruct:
  return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)


def prepare(config, task, devices=None) -> Setup:
  """The model, mesh (over `devices`, default all), optimizer and state shardings of `config`."""
  model_config = {**config.model.to_dict(), **task.model_overrides()}
  model = build_model(model_config)
  mesh = mesh_lib.make_mesh(config.mesh, devices)
  mesh_lib.check_batch(config.batch_size, config.grad_accum_steps, mesh)
  tx, schedule = optimizer_lib.build_optimizer(config.optimizer, config.total_steps)
  init_rng, step_rng = jax.random.split(jax.random.PRNGKey(config.seed))
  unsharded = Setup(
      task, model_config, model, mesh, tx, schedule, init_rng, step_rng, {}, {}, config.ema_decay
  )
  abstract_state = jax.eval_shape(unsharded.init_state, init_rng)
  mesh_lib.warn_unmatched(abstract_state["params"], mesh)
  state_shardings = mesh_lib.tree_shardings(abstract_state, mesh)
  if config.ema_decay is not None:
    state_shardings[checkpoint.EMA_PARAMS] = state_shardings["params"]
  return dataclasses.replace(
      unsharded, abstract_state=abstract_state, state_shardings=state_shardings
  )
