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


MEAN_DOCUMENT_TOKENS = 500  # about C4's mean document length in GPT-2 tokens


def data_like_batch(spec: dict, model_config: dict, seed: int = 0) -> dict:
  """A batch of `spec`'s shapes whose values look like data, so the step timed is the one
  training runs: token ids drawn over the vocabulary, rows packed with documents of random
  lengths (segment ids 1, 2, ... and positions counted from 0 in each), random images, labels
  over the classes. A constant batch can time another program (every token's embedding
  gradient added into one row is a contended scatter on a GPU). A key this does not know is an
  error, so a new task's benchmark says what its data looks like."""
  rng = np.random.default_rng(seed)
  batch = {}
  for key, value in spec.items():
    shape = value.shape
    if key in ("inputs", "targets", "tokens"):
      array = rng.integers(0, model_config["vocab_size"], shape)
    elif key in ("segment_ids", "positions"):  # the same documents for both keys
      starts = np.random.default_rng(seed + 2).random(shape) < 1.0 / MEAN_DOCUMENT_TOKENS
      starts[:, 0] = True
      segment_ids = np.cumsum(starts, axis=1)
      column = np.broadcast_to(np.arange(shape[1]), shape)
      first = np.maximum.accumulate(np.where(starts, column, 0), axis=1)
      array = segment_ids if key == "segment_ids" else column - first
    elif key == "weights":
      array = np.ones(shape)
    elif key == "image":
      array = rng.standard_normal(shape)
    elif key in ("label", "labels"):
      label = np.random.default_rng(seed + 1).integers(0, model_config["num_classes"], shape[0])
      array = label if key == "label" else np.eye(model_config["num_classes"])[label]
    else:
      raise ValueError(f"data_like_batch: no rule for batch key {key!r}; add one")
    batch[key] = jnp.asarray(array, value.dtype)
  return batch


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
  name -> jitted step (state donated); each runs on its own initialized state and one data-like
  batch (`data_like_batch`), placed as the trainer places them, so the first call's compile is
  the only one.
  """
  # pylint: disable=g-import-not-at-top
  from vit_jax import tasks
  from vit_jax.training import mesh as mesh_lib
  from vit_jax.training import setup as setup_lib

  config = pod_table.config_of(flags, ROOT)
  setup = setup_lib.prepare(config, tasks.build_task_without_data(config), jax.devices()[:1])
  batch = jax.device_put(
      data_like_batch(setup.task.batch_spec(config.batch_size), setup.model_config),
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
