"""Multi-process start-up: `jax.distributed.initialize` from flags or the environment.

- Explicit: --coordinator_address=HOST:PORT --num_processes=N --process_id=I.
- scripts/launch_local.py and hand-written launchers: JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
  JAX_PROCESS_ID.
- SLURM (srun) and Cloud TPU pods: detected by JAX itself from their environment.
Nothing set: a single process, nothing to initialize.
"""

import os

import jax


def _auto_detectable() -> bool:
  env = os.environ
  slurm = "SLURM_JOB_ID" in env and int(env.get("SLURM_NTASKS", "1")) > 1
  tpu_pod = len(env.get("TPU_WORKER_HOSTNAMES", "").split(",")) > 1
  return slurm or tpu_pod


def initialize(
    coordinator_address=None,
    num_processes=None,
    process_id=None,
    heartbeat_timeout_seconds: int = 60,
) -> None:
  """Joins the job's processes; a peer that stops answering fails this one within the timeout."""
  env = os.environ
  coordinator_address = coordinator_address or env.get("JAX_COORDINATOR_ADDRESS")
  if num_processes is None and "JAX_NUM_PROCESSES" in env:
    num_processes = int(env["JAX_NUM_PROCESSES"])
  if process_id is None and "JAX_PROCESS_ID" in env:
    process_id = int(env["JAX_PROCESS_ID"])
  if coordinator_address is None and not _auto_detectable():
    return
  if jax.config.jax_platforms in (None, "", "cpu") or env.get("JAX_PLATFORMS") == "cpu":
    # CPU devices of different processes talk through gloo.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(
      coordinator_address=coordinator_address,
      num_processes=num_processes,
      process_id=process_id,
      heartbeat_timeout_seconds=heartbeat_timeout_seconds,
  )
