"""The training order of text: seeded randomness by key, and each epoch a permutation that any
position of it can be computed from in constant time.

`uniform(seed, stream, keys)` gives counter-based random numbers: a hash of (seed, stream, key,
column), so a row's masking or next-sentence draws depend on its training position alone, and a
whole batch's are drawn in one vectorized call.

Training reads unit u = step * batch_size + row of an endless sequence of epochs (units are
windows, rows or examples: vit_jax/data/text/batches.py). Epoch e is a permutation of the N units
drawn from (seed, e), so unit u is `permute(u % N, N, seed, u // N)`: a resumed run computes the
units of its step and reads nothing before them.

`permute` is a Feistel network on the smallest even power of two at least N (balanced halves,
ROUNDS rounds of a 64-bit mixing function of the right half and a round key), restricted to
[0, N) by cycle walking: an index that lands outside [0, N) is sent through the network again
until it lands inside, which keeps the map a bijection of [0, N) (the approach of grain's
index_shuffle and of format-preserving encryption). Every unit is read once per epoch, in an
order that depends on nothing but (seed, epoch): not on the number of processes or shards.
"""

import math

import numpy as np

ROUNDS = 6
# The mixing function's constants: SplitMix64's finalizer (Steele, Lea and Flood 2014).
_MIX_1, _MIX_2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's increment


def seeded_rng(seed: int, *keys: int) -> np.random.Generator:
  """A Generator determined by (seed, keys): same step, same randomness."""
  return np.random.default_rng([seed % 2**32, *keys])


def check_shard(shard: int, shard_count: int) -> None:
  if not 0 <= shard < shard_count:
    raise ValueError(f"input shard {shard} must be in [0, {shard_count}).")


def _mix(z):
  z = (z ^ (z >> np.uint64(30))) * _MIX_1
  z = (z ^ (z >> np.uint64(27))) * _MIX_2
  return z ^ (z >> np.uint64(31))


def uniform(seed: int, stream: int, keys_N, columns: int = 1) -> np.ndarray:
  """Uniform floats in [0, 1), float64 (N, columns): column j of row n is output j + 1 of
  SplitMix64 started from a hash of (seed, stream, keys_N[n])."""
  keys_N = np.asarray(keys_N, np.int64).reshape(-1).astype(np.uint64)
  start = np.array([seed % 2**63, stream], np.uint64) * np.array([_MIX_1, _MIX_2], np.uint64)
  row_N = _mix(_mix(keys_N ^ _mix(start[:1] ^ start[1:])))
  step_M = (np.arange(columns, dtype=np.uint64) + np.uint64(1)) * _GOLDEN
  bits_NxM = _mix(row_N[:, None] + step_M[None, :])
  return (bits_NxM >> np.uint64(11)).astype(np.float64) * 2.0**-53


def permute(index_N: np.ndarray, size: int, seed: int, *keys: int) -> np.ndarray:
  """Where each index of [0, size) goes under the permutation of [0, size) drawn by (seed, keys);
  int64, the shape of `index_N`."""
  if size < 1:
    raise ValueError(f"cannot permute an empty range (size {size}).")
  index_N = np.asarray(index_N, np.int64)
  if index_N.size and (index_N.min() < 0 or index_N.max() >= size):
    raise ValueError(f"indices must be in [0, {size}).")
  half = max(1, math.ceil(math.log2(size) / 2)) if size > 1 else 1
  mask = np.uint64((1 << half) - 1)
  round_keys = seeded_rng(seed, *keys).integers(0, 2**63, size=ROUNDS, dtype=np.uint64)

  def feistel(x):
    left, right = x >> np.uint64(half), x & mask
    for key in round_keys:
      left, right = right, left ^ (_mix(right ^ key) & mask)
    return (left << np.uint64(half)) | right

  x = index_N.astype(np.uint64).ravel()
  x = feistel(x)
  outside = x >= size
  while outside.any():  # cycle walking; on average fewer than 4 passes (2^(2 half) < 4 size)
    x[outside] = feistel(x[outside])
    outside = x >= size
  return x.astype(np.int64).reshape(index_N.shape)


def epoch_units(positions_N: np.ndarray, units_per_epoch: int, seed: int, *keys: int) -> np.ndarray:
  """The unit read at each training position: position u is index u % units_per_epoch of epoch
  u // units_per_epoch's permutation (drawn from seed, `keys` and the epoch)."""
  positions_N = np.asarray(positions_N, np.int64)
  epoch_N, index_N = np.divmod(positions_N, units_per_epoch)
  out = np.empty_like(positions_N)
  for epoch in np.unique(epoch_N):  # a batch spans at most a few epochs
    at = epoch_N == epoch
    out[at] = permute(index_N[at], units_per_epoch, seed, *keys, int(epoch))
  return out


def shard_positions(step: int, rows: int, shard: int, shard_count: int) -> np.ndarray:
  """The training positions of the `rows` rows of input shard `shard` at `step`: the global batch
  of step s (B = rows * shard_count rows) is positions [s * B, (s + 1) * B), and shard i holds
  its i-th slice. So the global batch is the same for any number of shards."""
  check_shard(shard, shard_count)
  first = (step * shard_count + shard) * rows
  return np.arange(first, first + rows, dtype=np.int64)
