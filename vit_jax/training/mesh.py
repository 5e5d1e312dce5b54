"""The device mesh (axes data, fsdp, model) and how batches and parameters are placed on it.

One code path from a single CPU to a multi-host pod: arrays are global `jax.Array`s sharded over
the mesh, and `jax.jit` partitions the step (no pmap).
"""

import jax
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

from vit_jax import errors

AXES = ("data", "fsdp", "model")
BATCH_AXES = ("data", "fsdp")  # the batch is split over every non-model axis


def parse_mesh(spec: str, num_devices: int) -> dict[str, int]:
  """'data:2,fsdp:4' -> {'data': 2, 'fsdp': 4, 'model': 1}; one size may be -1 (the rest)."""
  sizes = {axis: 1 for axis in AXES}
  for item in filter(None, spec.replace(" ", "").split(",")):
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
  return sizes


def make_mesh(spec: str, devices=None) -> Mesh:
  devices = jax.devices() if devices is None else devices
  sizes = parse_mesh(spec, len(devices))
  return Mesh(np.asarray(devices).reshape([sizes[a] for a in AXES]), AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_divisor(mesh: Mesh) -> int:
  """The global batch must be a multiple of the number of batch shards."""
  return int(np.prod([mesh.shape[a] for a in BATCH_AXES]))


def global_batch(local_batch: dict, mesh: Mesh) -> dict:
  """Assembles each process's numpy rows into global arrays sharded over the batch axes."""
  sharding = batch_sharding(mesh)
  return {
      k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
      for k, v in local_batch.items()
  }
