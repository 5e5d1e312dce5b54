"""Timing train steps side by side on one device: our trainer's step built from a recipe's flags,
a peer's step, each looped on its own donated state, timed in interleaved rounds.

benchmarks/cpu_steps.py and benchmarks/gpu_steps.py time their rows with this.
"""

import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from vit_jax.tpu_planning import pod_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def random_batch(spec: dict) -> dict:
  """Random arrays of the batch's shapes: floats uniform in [0, 1) (pixels, soft labels, loss
  weights), integers 1 (a valid token, label, position and segment id for every task here)."""
  rng = np.random.default_rng(0)
  return {
      k: jnp.asarray(
          rng.random(v.shape) if jnp.issubdtype(v.dtype, jnp.floating) else np.ones(v.shape),
          v.dtype,
      )
      for k, v in spec.items()
  }


def looped(step, state, inputs, fresh_inputs=False):
  """A callable that dispatches one step and returns its metrics without waiting for them; the
  state is carried (it is donated). `fresh_inputs`: each call gets its own copy of the inputs
  (for a step that donates them)."""
  holder = {"state": state}

  def run():
    args = jax.tree.map(jnp.copy, inputs) if fresh_inputs else inputs
    holder["state"], metrics = step(holder["state"], *args)
    return metrics

  return run


def wait(metrics):
  """Blocks until the step that returned `metrics` is done; a skipped update is an error."""
  jax.block_until_ready(metrics)
  if isinstance(metrics, dict) and metrics.get("finite", 1.0) != 1.0:
    raise RuntimeError("a non-finite step: the guard skipped the update this would time")


def our_runners(flags, steps_of) -> dict:
  """Our runners for the recipe `flags` give, on one device: `steps_of(config, setup)` returns
  name -> jitted step (state donated); each runs on its own initialized state and one random
  batch, placed as the trainer places them, so the first call's compile is the only one."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import tasks
  from vit_jax.training import mesh as mesh_lib
  from vit_jax.training import train

  config = pod_table.config_of(flags, ROOT)
  setup = train.prepare(config, tasks.build_task_without_data(config), jax.devices()[:1])
  batch = jax.device_put(
      random_batch(setup.task.batch_spec(config.batch_size)),
      mesh_lib.batch_sharding(setup.mesh),
  )
  return {
      name: looped(
          step, jax.device_put(setup.init_state(setup.init_rng), setup.state_shardings), (batch,)
      )
      for name, step in steps_of(config, setup).items()
  }


def peer_runner(peer_step, fresh_inputs=False):
  """A jax_peers.PeerStep's runner on the default device, state and inputs committed there (as
  its outputs will be, so the first call's compile is the only one)."""
  device = jax.devices()[0]
  return looped(
      peer_step.step,
      jax.device_put(peer_step.init(), device),
      jax.device_put(peer_step.example_inputs(), device),
      fresh_inputs=fresh_inputs,
  )


def measure(runners: dict, warmup: int, rounds: int, steps: int, pipelined=False) -> dict:
  """name -> (median wall seconds, median CPU seconds) per step, timed in interleaved rounds:
  each round runs `steps` steps of every runner in turn, so load changes hit all alike.

  Each step is timed alone (dispatch, run, wait), or with `pipelined` each round's `steps` steps
  are dispatched back to back and waited for at the end, as a trainer that does not read every
  step's metrics runs them: the host's dispatch overlaps the device's work (an accelerator's
  figure), and the sample is the group's time over `steps`.
  """
  for run in runners.values():
    for _ in range(warmup):
      wait(run())
  wall = {name: [] for name in runners}
  cpu = {name: [] for name in runners}
  group = steps if pipelined else 1
  for _ in range(rounds):
    for name, run in runners.items():
      for _ in range(steps // group):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(group):
          metrics = run()
        wait(metrics)
        wall[name].append((time.perf_counter() - start_wall) / group)
        cpu[name].append((time.process_time() - start_cpu) / group)
  return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in runners}
