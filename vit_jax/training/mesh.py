"""A run's processes and devices: joining the job's processes, the device mesh (axes dcn, data,
fsdp, model), and how batches and parameters are placed on it.

Processes: `initialize` calls `jax.distributed.initialize` from flags or the environment.
- Explicit: --coordinator_address=HOST:PORT --num_processes=N --process_id=I.
- scripts/launch_local.py and hand-written launchers: JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
  JAX_PROCESS_ID.
- SLURM (srun) and Cloud TPU VMs: `jax.distributed.initialize()` with no arguments, which reads
  the job's layout from SLURM's environment or the TPU VM's metadata server (one process per host,
  slices of a multi-slice job included). A TPU VM is recognized by its TPU chips on the PCI bus.
Nothing set: a single process, nothing to initialize.

Mesh: one code path from a single CPU to a multi-host pod: arrays are global `jax.Array`s sharded
over the mesh, and `jax.jit` partitions the step (no pmap). On TPUs the mesh follows the physical
torus (`mesh_utils.create_device_mesh`), so neighbours on an axis are neighbours on the chip
interconnect; across the slices of a multi-slice job the `dcn` axis (data parallel over the
data-center network, one entry per slice) comes first (`create_hybrid_device_mesh`).

Batches: the batch axes cut each global batch into equal slices of rows; which slices a
process's devices hold (`batch_slices_by_process`) is what it must load (host_input.py), and
`global_batch` assembles the processes' rows into arrays of the global batch size, given, never
inferred.
"""

import glob
import os
import re
import sys

import jax
from jax.experimental import mesh_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

from vit_jax import errors
from vit_jax.training import job_end

GOOGLE_PCI_VENDOR = "0x1ae0"  # TPU chips' PCI vendor id
PCI_DEVICES = "/sys/bus/pci/devices"

AXES = ("dcn", "data", "fsdp", "model")
BATCH_AXES = ("dcn", "data", "fsdp")  # the batch is split over every non-model axis


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
  job_end.watch()  # a process that stops on a user error stops the others the same way


def parse_mesh(spec: str, num_devices: int, num_slices: int = 1) -> dict[str, int]:
  """'data:2,fsdp:4' -> {'dcn': 1, 'data': 2, 'fsdp': 4, 'model': 1}; one size may be -1 (the
  rest). An axis left out is 1, except `data`, which takes the rest when no size is -1 (so
  'model:4' on 8 devices is 'data:2,model:4'). `dcn` defaults to the number of slices and must
  equal it."""
  sizes = {axis: 1 for axis in AXES}
  sizes["dcn"] = num_slices
  items = [item for item in spec.replace(" ", "").split(",") if item]
  given = {item.partition(":")[0] for item in items}
  if "data" not in given and not any(item.endswith(":-1") for item in items):
    sizes["data"] = -1
  for item in items:
    axis, _, size = item.partition(":")
    if axis not in AXES:
      raise errors.ConfigError(f"Unknown mesh axis {axis!r} in mesh={spec!r}; axes are {AXES}.")
    try:
      sizes[axis] = int(size)
    except ValueError as e:
      raise errors.ConfigError(
          f"Mesh axis size {size!r} in mesh={spec!r} is not an integer."
      ) from e
  rest = [a for a, s in sizes.items() if s == -1]
  if len(rest) > 1:
    raise errors.ConfigError(f"Only one mesh axis may be -1 in mesh={spec!r}.")
  known = int(np.prod([s for s in sizes.values() if s != -1]))
  if rest:
    if num_devices % known:
      raise errors.ConfigError(f"mesh={spec!r} does not divide {num_devices} devices.")
    sizes[rest[0]] = num_devices // known
  if int(np.prod(list(sizes.values()))) != num_devices:
    raise errors.ConfigError(
        f"mesh={spec!r} has {int(np.prod(list(sizes.values())))} slots but there are "
        f"{num_devices} devices; make the sizes multiply to the device count."
    )
  if sizes["dcn"] != num_slices:
    raise errors.ConfigError(
        f"mesh={spec!r} has dcn:{sizes['dcn']} but the devices form {num_slices} slice(s); dcn "
        "is the slice count (leave it out to get that)."
    )
  return sizes


def num_slices(devices) -> int:
  """Slices of a multi-slice TPU job (devices carry `slice_index`); 1 elsewhere."""
  return len({getattr(d, "slice_index", 0) for d in devices})


def make_mesh(spec: str, devices=None) -> Mesh:
  devices = jax.devices() if devices is None else list(devices)
  slices = num_slices(devices)
  sizes = parse_mesh(spec, len(devices), slices)
  shape = [sizes[a] for a in AXES]
  if devices[0].platform != "tpu":  # no physical topology to follow
    return Mesh(np.asarray(devices).reshape(shape), AXES)
  if slices > 1:
    ici_shape = [1] + shape[1:]
    dcn_shape = [slices] + [1] * (len(AXES) - 1)
    grid = mesh_utils.create_hybrid_device_mesh(ici_shape, dcn_shape, devices)
  else:
    # allow_split_physical_axes: e.g. fsdp:8 on a 2x2x4 torus spans two of its axes.
    grid = mesh_utils.create_device_mesh(shape, devices, allow_split_physical_axes=True)
  return Mesh(grid, AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_divisor(mesh: Mesh) -> int:
  """The global batch must be a multiple of the number of batch shards."""
  return int(np.prod([mesh.shape[a] for a in BATCH_AXES]))


def check_batch(batch_size: int, grad_accum_steps: int, mesh: Mesh | None = None) -> None:
  """The global batch must split evenly over the microbatches, and over the batch shards of
  `mesh` when one is given (the config checks run before any mesh exists)."""
  shards = batch_divisor(mesh) if mesh is not None else 1
  if batch_size % (shards * grad_accum_steps) == 0:
    return
  over = f"--config.grad_accum_steps={grad_accum_steps}"
  if mesh is not None:
    sizes = ", ".join(f"{a}:{mesh.shape[a]}" for a in BATCH_AXES)
    over = f"the batch shards ({sizes}) times {over} ({shards * grad_accum_steps})"
  raise errors.ConfigError(
      f"--config.batch_size={batch_size} must be divisible by {over}; change one of them."
  )


def batch_slices_by_process(mesh: Mesh) -> dict[int, tuple[int, ...]]:
  """{process index: the batch slices its devices hold}: the batch axes cut every global batch
  into `batch_divisor(mesh)` equal slices of rows, numbered in row order. Processes whose
  devices differ only on the `model` axis hold the same slices."""
  slices = batch_divisor(mesh)
  held = {}
  for device, index in batch_sharding(mesh).devices_indices_map((slices,)).items():
    held.setdefault(device.process_index, set()).add(index[0].start or 0)
  return {process: tuple(sorted(s)) for process, s in sorted(held.items())}


def global_batch(local_batch: dict, mesh: Mesh, batch_size: int) -> dict:
  """Assembles this process's numpy rows (those of its devices' batch slices, in row order)
  into global arrays of `batch_size` rows, sharded over the batch axes."""
  sharding = batch_sharding(mesh)
  return {
      k: jax.make_array_from_process_local_data(
          sharding, np.asarray(v), (batch_size,) + np.shape(v)[1:]
      )
      for k, v in local_batch.items()
  }


# ---- Parameters and optimizer state: sharding rules ----------------------------------------------
# Parameter sharding rules: logical axis names per parameter, mapped onto the mesh axes.
#
# Rules are data. Each rule matches a parameter path (a regex over "a/b/c") and names the logical
# axis of every dimension; `LOGICAL_TO_MESH` says which mesh axis shards each logical axis:
# FSDP shards the model width ("embed") over `fsdp`, tensor parallelism splits attention heads
# and the MLP hidden dimension over `model`. Small tensors, and dimensions a mesh axis does not
# divide, stay replicated. Optimizer state follows the parameter it belongs to (its path ends
# with the parameter's path).

# (path regex, logical axis per dimension). First match wins; no match means replicated.
RULES = (
    (r"(query|key|value)/kernel$", ("embed", "heads", "head_dim")),  # D x H x K
    (r"(query|key|value)/bias$", ("heads", "head_dim")),
    (r"out/kernel$", ("heads", "head_dim", "embed")),  # H x K x D
    (r"(MlpBlock_\d+|mlp|token_mixing|channel_mixing)/Dense_0/kernel$", ("embed", "mlp")),
    (r"MlpBlock_\d+/gate/kernel$", ("embed", "mlp")),  # a gated MLP's gate (SwiGLU)
    (r"(MlpBlock_\d+|mlp|token_mixing|channel_mixing)/Dense_0/bias$", ("mlp",)),
    (r"(MlpBlock_\d+|mlp|token_mixing|channel_mixing)/Dense_1/kernel$", ("mlp", "embed")),
    (r"(wte|word_embeddings|token_embed)/embedding$", ("vocab", "embed")),
    (r"(^|/)lm_head$", ("vocab", "embed")),  # GPT's untied LM head, (V, D) as the embedding
    (r"(wpe|position_embeddings|token_type_embeddings)/embedding$", (None, "embed")),
    (r"pos_embedding$", (None, None, "embed")),
    (r"(^|/)(embedding|stem)/kernel$", (None, None, None, "embed")),  # patch conv, HWIO
    (r"(head|classifier|pre_logits|pooler|transform)/kernel$", ("embed", None)),
    (r"(^|/)conv\w*/kernel$", (None, None, None, None)),  # BiT's convs: replicated, on purpose
    # Norms' scales and offsets: one width each, replicated on purpose (an 8B's 4,096 wide).
    (r"(^|/)(LayerNorm\w*|\w*_norm)/(scale|bias)$", (None,)),
)
LOGICAL_TO_MESH = {
    "embed": "fsdp",
    "heads": "model",
    "mlp": "model",
    "vocab": "model",
    "head_dim": None,
}
MIN_SHARDED_SIZE = 2**12  # smaller tensors are cheaper replicated than gathered


def path_string(path) -> str:
  parts = []
  for key in path:
    for attr in ("key", "name", "idx"):
      if hasattr(key, attr):
        parts.append(str(getattr(key, attr)))
        break
  return "/".join(parts)


def logical_axes(path: str, ndim: int):
  """The logical axis names of a parameter's dimensions (None: not sharded)."""
  for pattern, axes in RULES:
    if re.search(pattern, path):
      if len(axes) == ndim:
        return axes
      if len(axes) + 1 == ndim:  # scanned layers stack params on a leading layer axis
        return (None,) + axes
  return (None,) * ndim


def unmatched_params(params, mesh_shape: dict) -> list[str]:
  """The paths of the parameters no rule matches that a sharding mesh would replicate on every
  chip in full (tensors of MIN_SHARDED_SIZE or more); none unless `fsdp` or `model` is > 1."""
  if max(mesh_shape.get("fsdp", 1), mesh_shape.get("model", 1)) <= 1:
    return []
  return [
      path_string(path)
      for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
      if int(np.prod(np.shape(leaf))) >= MIN_SHARDED_SIZE
      and not any(re.search(pattern, path_string(path)) for pattern, _ in RULES)
  ]


def warn_unmatched(params, mesh) -> None:
  """One warning naming the parameters `unmatched_params` finds (a new model's layer names)."""
  paths = unmatched_params(params, dict(mesh.shape))
  if paths and jax.process_index() == 0:
    shown = ", ".join(paths[:8]) + (f" and {len(paths) - 8} more" if len(paths) > 8 else "")
    print(
        f"warning: {len(paths)} parameters match no sharding rule and are replicated in full on "
        f"every chip of mesh {dict(mesh.shape)}: {shown}; add a rule for them to RULES in "
        "vit_jax/training/mesh.py.",
        file=sys.stderr,
        flush=True,
    )


def spec_for(path: str, shape, mesh) -> P:
  if int(np.prod(shape)) < MIN_SHARDED_SIZE:
    return P()
  spec = []
  for dim, logical in zip(shape, logical_axes(path, len(shape))):
    axis = LOGICAL_TO_MESH.get(logical) if logical else None
    if axis is not None and mesh.shape[axis] > 1 and dim % mesh.shape[axis] == 0:
      spec.append(axis)
    else:
      spec.append(None)
  return P(*spec)


def tree_shardings(tree, mesh):
  """NamedSharding for every leaf of a (possibly abstract) params or train-state tree."""

  def one(path, leaf):
    return NamedSharding(mesh, spec_for(path_string(path), np.shape(leaf), mesh))

  return jax.tree_util.tree_map_with_path(one, tree)
