"""Example sources with a deterministic order per epoch, and exact resume.

A source yields examples (a document string, a (texts, label) pair, or a
(source, target) pair) in two orders: `epoch(e)`, shuffled by (seed, e), for
training; `single_pass()`, in stored order, for evaluation.

`resume_stream` turns a source into the infinite training stream positioned
after a number of consumed units (tokens, rows or examples). In-memory
sources know their units per epoch, so whole epochs are skipped by
arithmetic; streaming sources are read forward.
"""

import itertools
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from vit_jax import errors

# Chunk size for batch-mapping streaming sources (e.g. encode_batch).
_MAP_CHUNK = 256


class InMemorySource:
  """A list of examples; epoch e is a seeded permutation of it."""

  def __init__(self, examples: Iterable[Any], seed: int = 0):
    self.examples = list(examples)
    self.seed = seed

  def epoch(self, epoch: int) -> Iterator[Any]:
    order = seeded_rng(self.seed, epoch).permutation(len(self.examples))
    return (self.examples[i] for i in order)

  def single_pass(self) -> Iterator[Any]:
    return iter(self.examples)

  def map_batches(self, fn: Callable[[list], list]) -> "InMemorySource":
    """Applies `fn` to all examples at once (e.g. tokenize the corpus once)."""
    return InMemorySource(fn(self.examples), self.seed)


class StreamingSource:
  """Examples read from a stream (e.g. TFDS) that is too big to hold."""

  examples = None  # Size unknown: resume reads forward.

  def __init__(
      self,
      epoch_fn: Callable[[int], Iterable[Any]],
      single_pass_fn: Callable[[], Iterable[Any]],
      fns: Sequence[Callable[[list], list]] = (),
  ):
    self._epoch_fn = epoch_fn
    self._single_pass_fn = single_pass_fn
    self._fns = tuple(fns)

  def _apply(self, examples: Iterable[Any]) -> Iterator[Any]:
    it = iter(examples)
    while chunk := list(itertools.islice(it, _MAP_CHUNK)):
      for fn in self._fns:
        chunk = fn(chunk)
      yield from chunk

  def epoch(self, epoch: int) -> Iterator[Any]:
    return self._apply(self._epoch_fn(epoch))

  def single_pass(self) -> Iterator[Any]:
    return self._apply(self._single_pass_fn())

  def map_batches(self, fn: Callable[[list], list]) -> "StreamingSource":
    """Applies `fn` lazily to chunks of examples."""
    return StreamingSource(self._epoch_fn, self._single_pass_fn, self._fns + (fn,))


Source = InMemorySource | StreamingSource


def as_source(data: Any, seed: int = 0) -> Source:
  """Sources pass through; a plain list of examples becomes in-memory."""
  if isinstance(data, (InMemorySource, StreamingSource)):
    return data
  if isinstance(data, (list, tuple)):
    return InMemorySource(data, seed)
  raise TypeError(
      f"Expected a dataset name, a source or a list of examples, " f"got {type(data).__name__}."
  )


def shuffle_buffer(examples: Iterable[Any], size: int, rng: np.random.Generator) -> Iterator[Any]:
  """Approximate shuffle of a stream with a `size`-slot buffer, seeded."""
  buffer = []
  for example in examples:
    if len(buffer) < size:
      buffer.append(example)
      continue
    j = rng.integers(size)
    yield buffer[j]
    buffer[j] = example
  for j in rng.permutation(len(buffer)):
    yield buffer[j]


def resume_stream(
    source: Source, cost: Callable[[Any], int], skip: int = 0
) -> Iterator[tuple[Any, int]]:
  """Infinite epochs of `source`, after `skip` units have been consumed.

  Yields (example, units of it already consumed); only the first example
  yielded can be partly consumed. `cost(example)` is how many units (tokens,
  rows...) an example provides. Examples of cost 0 are kept once the skip is
  done, because consumers may look ahead at them (NSP negatives).
  """
  epoch = 0
  if source.examples is not None:
    per_epoch = sum(cost(x) for x in source.examples)
    if per_epoch == 0:
      raise errors.DataError(
          "The dataset yields nothing to train on (every example " "is empty or too short)."
      )
    epoch, skip = divmod(skip, per_epoch)
  while True:
    any_units = False
    for example in source.epoch(epoch):
      units = cost(example)
      any_units |= units > 0
      if skip and skip >= units:
        skip -= units
        continue
      yield example, skip
      skip = 0
    if not any_units:
      raise errors.DataError(
          f"Epoch {epoch} of the dataset yielded nothing to "
          "train on (no examples, or all empty)."
      )
    epoch += 1


def lookahead(items: Iterable[Any], window: int) -> Iterator[tuple[Any, list[Any]]]:
  """Yields (item, the next up to `window` - 1 items) for every item."""
  it = iter(items)
  ahead = list(itertools.islice(it, window))
  while ahead:
    yield ahead[0], ahead[1:]
    ahead = ahead[1:]
    nxt = next(it, _END)
    if nxt is not _END:
      ahead.append(nxt)


_END = object()


def seeded_rng(seed: int, *keys: int) -> np.random.Generator:
  """A Generator determined by (seed, keys): same step, same randomness."""
  return np.random.default_rng([seed % 2**32, *keys])


def check_process(process_index: int, process_count: int) -> None:
  if not 0 <= process_index < process_count:
    raise ValueError(
        f"process_index={process_index} must be in " f"[0, process_count={process_count})."
    )


def take_share(items: Sequence[Any], process_index: int, process_count: int) -> list[Any]:
  """This process's stride of `items` (for data that lives in memory)."""
  check_process(process_index, process_count)
  return list(items[process_index::process_count])
