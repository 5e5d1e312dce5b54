"""Host-side input plumbing: input shards per process, device prefetch, equal eval step counts.

The input is split into `input_shards` shards (default: one per process); each process reads only
its own shards and stacks them on the batch axis. With a fixed `input_shards`, the global batch
is the same whether it is read by one process or by several, so runs on different topologies
see identical data.
"""

import collections
import itertools
import queue
import threading

import jax
from jax.experimental import multihost_utils
import numpy as np

from vit_jax import errors
from vit_jax.training import mesh as mesh_lib


def shards_of_process(input_shards: int | None) -> tuple[list[int], int]:
  """(this process's shard indices, total shard count)."""
  count = input_shards or jax.process_count()
  if count % jax.process_count():
    raise errors.ConfigError(
        f"input_shards={count} must be a multiple of the {jax.process_count()} " "processes."
    )
  per_process = count // jax.process_count()
  first = jax.process_index() * per_process
  return list(range(first, first + per_process)), count


def stack(parts: list[dict]) -> dict:
  return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}


def empty_like(batch: dict) -> dict:
  """A batch of the same shapes with every value zero: zero weight/mask, it counts nowhere."""
  return {k: np.zeros_like(v) for k, v in batch.items()}


def train_batches(make_iterator, input_shards: int | None):
  """This process's rows of each global batch: its shards' batches stacked in shard order."""
  shards, count = shards_of_process(input_shards)
  iterators = [make_iterator(shard, count) for shard in shards]
  for parts in zip(*iterators):
    yield stack(list(parts))


def eval_batches(
    make_iterator, input_shards: int | None, max_batches: int | None, read_ahead_size: int = 2
):
  """One eval pass, streamed, with every process running the same number of steps.

  Shards or processes that run out early feed all-zero batches, which every task's eval sums
  weigh zero. With several processes, each step starts with a tiny all-gather of "do I still
  have data?" (on this thread: collectives must come in the same order on every process).
  """
  shards, count = shards_of_process(input_shards)
  iterators = [itertools.islice(make_iterator(shard, count), max_batches) for shard in shards]
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
          "This process has no eval data at all; use fewer processes or "
          "input_shards than eval examples."
      )
    else:
      yield empty_like(stack([template] * len(shards)))


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


def prefetch_to_mesh(batches, mesh, size: int = 2):
  """Global batches on the devices, `size` of them ahead of the one the step takes.

  Host batches are read `size` ahead on a background thread; copying to the devices starts
  when a batch is made a global array (asynchronously), on the caller's thread (where, with
  several processes, assembling them may communicate). So when the step asks for batch n,
  batches n+1..n+size are already on their way or on the devices.
  """
  on_devices = collections.deque()
  for batch in read_ahead(batches, size):
    on_devices.append(mesh_lib.global_batch(batch, mesh))
    if len(on_devices) > size:
      yield on_devices.popleft()
  while on_devices:
    yield on_devices.popleft()
