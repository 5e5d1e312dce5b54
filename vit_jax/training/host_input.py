"""Host-side input plumbing: which input shards each process reads, device prefetch, equal eval
step counts.

Every global batch (`batch_size` rows) is `shard_count` input shards of equal rows, in shard
order; shard i of each batch comes from the task's pipeline for shard i of `shard_count`, which
depends on nothing else (seed, step, shard). A process reads exactly the shards that make up
the rows its devices hold under the mesh (`mesh.batch_slices_by_process`): processes whose
devices share a batch slice (a `model` axis, or any axis across hosts) read the same shards, so
their rows agree. `input_shards` sets `shard_count`; with it fixed, the global batch is the same
on any mesh and number of processes that it can feed. Left unset, it is the smallest count that
feeds the mesh: one shard per group of processes holding the same rows (with `data:-1`, one per
process).
"""

import collections
import dataclasses
import itertools
import queue
import threading

import jax
from jax.experimental import multihost_utils
import numpy as np

from vit_jax import errors
from vit_jax.training import mesh as mesh_lib


@dataclasses.dataclass(frozen=True)
class InputPlan:
  """This process's part of every global batch of `batch_size` rows: input shards `shards` (in
  order) of `shard_count`, which are exactly the rows its devices hold."""

  batch_size: int
  shard_count: int
  shards: tuple[int, ...]


def plan_input(mesh, batch_size: int, input_shards: int | None = None) -> InputPlan:
  """The input plan of this process for `mesh`; ConfigError if `input_shards` cannot feed it."""
  held = mesh_lib.batch_slices_by_process(mesh)
  name = ",".join(f"{axis}:{size}" for axis, size in mesh.shape.items() if size > 1)
  return plan_for_layout(
      held, mesh_lib.batch_divisor(mesh), batch_size, input_shards, jax.process_index(), name
  )


def plan_for_layout(
    held: dict[int, tuple[int, ...]],
    slices: int,
    batch_size: int,
    input_shards: int | None,
    process: int,
    mesh_name: str = "",
) -> InputPlan:
  """`plan_input` for a given layout: `held[p]`, the batch slices (of `slices`) process p's
  devices hold."""
  if input_shards is not None and batch_size % input_shards:
    raise errors.ConfigError(
        f"--config.batch_size={batch_size} must be divisible by --config.input_shards="
        f"{input_shards} (each input shard gives batch_size / input_shards rows); change one."
    )
  if input_shards is not None:
    reads = _shards_read(held, slices, batch_size, input_shards)
    if reads is None:
      fits = next(
          c for c in _divisors(slices) if _shards_read(held, slices, batch_size, c) is not None
      )
      raise errors.ConfigError(
          f"--config.input_shards={input_shards} cannot feed the mesh {mesh_name} on "
          f"{len(held)} processes: an input shard "
          f"({batch_size // input_shards} rows) would be split between processes whose devices "
          f"hold different rows of the batch (slices of {batch_size // slices} rows); use "
          f"--config.input_shards={fits} (or a multiple of it that divides the batch), or "
          "leave it unset."
      )
    return InputPlan(batch_size, input_shards, reads[process])
  for count in _divisors(slices):
    reads = _shards_read(held, slices, batch_size, count)
    if reads is not None:
      return InputPlan(batch_size, count, reads[process])
  raise AssertionError("one shard per batch slice always feeds the mesh")


def _divisors(n: int) -> list[int]:
  return [d for d in range(1, n + 1) if n % d == 0]


def _shards_read(held, slices: int, batch_size: int, count: int) -> dict | None:
  """{process: the input shards it reads} when every process's rows are whole input shards of
  `count`, else None. Shard i is rows [i*q, (i+1)*q) and batch slice s rows [s*r, (s+1)*r)."""
  q, r = batch_size // count, batch_size // slices
  shards_of = {}  # the processes of a large job hold few distinct sets of slices

  def whole_shards(mine: set) -> tuple | None:
    shards = []
    for shard in range(count):
      touched = range(shard * q // r, ((shard + 1) * q - 1) // r + 1)
      inside = sum(s in mine for s in touched)
      if 0 < inside < len(touched):  # the shard's rows lie partly on these devices
        return None
      if inside:
        shards.append(shard)
    return tuple(shards)

  for mine in set(held.values()):
    shards_of[mine] = whole_shards(set(mine))
    if shards_of[mine] is None:
      return None
  return {process: shards_of[mine] for process, mine in held.items()}


def stack(parts: list[dict]) -> dict:
  return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}


def empty_like(batch: dict) -> dict:
  """A batch of the same shapes with every value zero: zero weight/mask, it counts nowhere."""
  return {k: np.zeros_like(v) for k, v in batch.items()}


def train_batches(make_iterator, plan: InputPlan):
  """This process's rows of each global batch: its shards' batches stacked in shard order;
  `make_iterator(shard, shard_count)` gives one shard's batches."""
  iterators = [make_iterator(shard, plan.shard_count) for shard in plan.shards]
  for parts in zip(*iterators):
    yield stack(list(parts))


def eval_batches(make_iterator, plan: InputPlan, max_batches: int | None, read_ahead_size: int = 2):
  """One eval pass, streamed, with every process running the same number of steps.

  Shards or processes that run out early feed all-zero batches, which every task's eval sums
  weigh zero. With several processes, each step starts with a tiny all-gather of "do I still
  have data?" (on this thread: collectives must come in the same order on every process).
  """
  iterators = [
      itertools.islice(make_iterator(shard, plan.shard_count), max_batches) for shard in plan.shards
  ]
  local = read_ahead(itertools.zip_longest(*iterators), read_ahead_size)
  template = None
  for parts in itertools.chain(local, itertools.repeat(None)):
    have_data = parts is not None
    if jax.process_count() > 1:
      any_data = bool(np.any(multihost_utils.process_allgather(np.array(have_data))))
    else:
      any_data = have_data
    if not any_data:
      return
    if have_data:
      template = template or next(p for p in parts if p is not None)
      yield stack([p if p is not None else empty_like(template) for p in parts])
    elif template is None:
      raise errors.DataError(
          "This process has no eval data at all; use fewer input shards "
          "(--config.input_shards) than eval examples."
      )
    else:
      yield empty_like(stack([template] * len(plan.shards)))


def read_ahead(items, size: int = 2):
  """Yields `items`, produced `size` ahead on a background thread (0: on the caller's thread).

  Only host work (tf.data, tokenization, packing) belongs there, never JAX collectives. size=0
  is also needed under tfds.testing.mock_data, whose file-system patch is global while it reads.
  """
  if size == 0:
    yield from items
    return
  q = queue.Queue(maxsize=size)
  sentinel = object()

  def produce():
    try:
      for item in items:
        q.put(item)
      q.put(sentinel)
    except Exception as e:  # pylint: disable=broad-except
      q.put(e)

  threading.Thread(target=produce, daemon=True).start()
  while True:
    item = q.get()
    if item is sentinel:
      return
    if isinstance(item, Exception):
      raise item
    yield item


def prefetch_to_mesh(batches, mesh, batch_size: int, size: int = 2):
  """Global batches on the devices, `size` of them ahead of the one the step takes.

  Host batches are read `size` ahead on a background thread; copying to the devices starts
  when a batch is made a global array (asynchronously), on the caller's thread (where, with
  several processes, assembling them may communicate). So when the step asks for batch n,
  batches n+1..n+size are already on their way or on the devices.
  """
  on_devices = collections.deque()
  for batch in read_ahead(batches, size):
    on_devices.append(mesh_lib.global_batch(batch, mesh, batch_size))
    if len(on_devices) > size:
      yield on_devices.popleft()
  while on_devices:
    yield on_devices.popleft()
