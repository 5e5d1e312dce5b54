"""Multi-process start-up: `jax.distributed.initialize` from flags or the environment.

- Explicit: --coordinator_address=HOST:PORT --num_processes=N --process_id=I.
- scripts/launch_local.py and hand-written launchers: JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
  JAX_PROCESS_ID.
- SLURM (srun) and Cloud TPU VMs: `jax.distributed.initialize()` with no arguments, which reads
  the job's layout from SLURM's environment or the TPU VM's metadata server (one process per host,
  slices of a multi-slice job included). A TPU VM is recognized by its TPU chips on the PCI bus.
Nothing set: a single process, nothing to initialize.
"""

import glob
import os

import jax

GOOGLE_PCI_VENDOR = "0x1ae0"  # TPU chips' PCI vendor id
PCI_DEVICES = "/sys/bus/pci/devices"


def on_tpu_vm(pci_devices: str = PCI_DEVICES) -> bool:
  """Whether this host has TPU chips (a Cloud TPU VM), read from the PCI bus as JAX does."""
  for vendor_file in glob.glob(os.path.join(pci_devices, "*", "vendor")):
    try:
      with open(vendor_file, encoding="ascii") as f:
        if f.read().strip() == GOOGLE_PCI_VENDOR:
          return True
    except OSError:
      continue
  return False


def _auto_detectable() -> bool:
  env = os.environ
  slurm = "SLURM_JOB_ID" in env and int(env.get("SLURM_NTASKS", "1")) > 1
  tpu_pod = len(env.get("TPU_WORKER_HOSTNAMES", "").split(",")) > 1
  forced_cpu = env.get("JAX_PLATFORMS", "").split(",")[0] == "cpu"
  return slurm or tpu_pod or (not forced_cpu and on_tpu_vm())


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
