"""Weighted mixtures of token stores: which source each training row reads, and where in it.

A causal LM trains on several token stores (vit_jax/data/text/token_store.py) at stated weights:

    --config.dataset=mixture                                   (configs/gpt.py:dataset=mixture)
    --config.mixture.stores=web=gs://BUCKET/web,code=/data/code        NAME=STORE,...
    --config.mixture.weights=web=0.8,code=0.2                          NAME=WEIGHT,...

Every store gets a weight, >= 0; they are normalized by their sum, and a source of weight 0 is
evaluated but not trained on. Stages: `web=0.8,code=0.2;2000:web=0.5,code=0.5` reads the second
mixture from step 2000 on (mid-training, or a cooldown branch's annealing mixture: the branch
repeats its parent's weights up to its branch point and gives its own from there).

Which source row r of step s reads, and where in it (B the global batch, u = s B + r the row's
training position, as for one store: vit_jax/data/text/order.py):
- The stage in force at step s covers the positions from P = its first step times B. They come
  in blocks of BLOCK rows counted from P; each block gives source k exactly c_k of its rows (the
  largest-remainder shares of BLOCK in the stage's weights), at the places a permutation of the
  block drawn from (seed, stage, block) puts them: levanter's block-deterministic mixture.
- So the rows of source k before position u are a closed form: its rows before the stage, whole
  blocks times c_k, and its rows among the first places of u's block (one permutation of BLOCK).
  Row u reads the next row of its source: row n of the source is unit `epoch_units(n)` of the
  source's own epochs (causal LM: windows), so each source reads each of its units once per
  epoch, whatever its weight, and a change of weights at a stage continues where it left off.
Nothing is replayed: a resume at step 10^6 computes its rows as step 1 does, and the global batch
is the same for any number of input shards. Over every block the weights are met exactly, to
1 / BLOCK; the tokens each source gave the first s steps (`tokens/NAME`, rows x seq_len) are the
same closed form.
"""

import dataclasses
import math
import re
import zlib

import numpy as np

from vit_jax import errors
from vit_jax.config import args as config_args
from vit_jax.data.text import order

BLOCK = 2048  # rows per block: each block meets the weights exactly (levanter's default block)
_BLOCK_STREAM = 0x6D6978  # keys the blocks' permutations apart from the sources' epochs
_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # a source's name, as metrics show it: tokens/NAME
STORES_KEY, WEIGHTS_KEY = "--config.mixture.stores", "--config.mixture.weights"
_WEIGHTS_FORM = "NAME=WEIGHT,... (e.g. web=0.8,code=0.2), then ;STEP:NAME=WEIGHT,... for a stage"


@dataclasses.dataclass(frozen=True)
class Stage:
  step: int  # the first step it trains
  weights: dict  # source name -> weight, as given

  def text(self) -> str:
    return ",".join(f"{name}={weight:.12g}" for name, weight in self.weights.items())


@dataclasses.dataclass(frozen=True)
class Mixture:
  """The sources (name -> token store, in the order given) and the stages of their weights."""

  stores: dict
  stages: tuple

  @property
  def names(self) -> tuple[str, ...]:
    return tuple(self.stores)

  def counts(self, stage: Stage) -> np.ndarray:
    """Each source's rows in every block of `stage` (int64, in the order of `names`)."""
    return apportion([stage.weights[name] for name in self.names], BLOCK)

  def schedule(self, batch_size: int, seed: int) -> "Schedule":
    """The rows' sources for a global batch of `batch_size` rows and the run's seed."""
    return Schedule(self, batch_size, seed)

  def epoch_keys(self) -> list[int]:
    """The keys each source's epochs are drawn with (beside the seed), from its name: each
    source reads its units in an order of its own."""
    return [zlib.crc32(name.encode("utf-8")) for name in self.names]


# ---- The config: its form, names and weights ---------------------------------------------------


def parse_stores(text: str) -> dict[str, str]:
  """{name: store} of `--config.mixture.stores`, in the order given."""
  stores = {}
  for entry in text.split(","):
    name, has_store, path = (part.strip() for part in entry.partition("="))
    if not has_store or not path or not _NAME.fullmatch(name):
      raise errors.ConfigError(
          f"{STORES_KEY}={text!r}: {entry.strip()!r} is not NAME=STORE; give each source as "
          "NAME=STORE, comma separated (e.g. web=gs://BUCKET/web,code=/data/code), its NAME of "
          "letters, digits, '_', '.' and '-'."
      )
    if name in stores:
      raise errors.ConfigError(f"{STORES_KEY}={text!r} names {name!r} twice; name it once.")
    stores[name] = path
  return stores


def parse_weights(text: str) -> list[Stage]:
  """The stages of `--config.mixture.weights`: each one's first step and weights."""
  stages = []
  for i, part in enumerate(text.split(";")):
    step = 0
    if i:
      head, has_step, part = part.partition(":")
      if not has_step or not config_args.is_digits(head.strip()):
        raise _malformed(text, f"stage {i + 1} ({part.strip() or head.strip()!r}) has no STEP:")
      step = int(head)
      if step <= stages[-1].step:
        raise _malformed(text, f"stage {i + 1} starts at step {step}, not after {stages[-1].step}")
    weights = {}
    for entry in part.split(","):
      name, has_weight, value = (piece.strip() for piece in entry.partition("="))
      try:
        weight = float(value)
      except ValueError:
        weight = math.nan
      if not has_weight or not _NAME.fullmatch(name) or not math.isfinite(weight):
        raise _malformed(text, f"{entry.strip()!r} is not NAME=WEIGHT with a number")
      if name in weights:
        raise _malformed(text, f"a stage names {name!r} twice")
      if weight < 0:
        raise errors.ConfigError(
            f"{WEIGHTS_KEY}: {name}={value} is negative; weights are >= 0 (0 evaluates a source "
            "without training on it)."
        )
      weights[name] = weight
    if not sum(weights.values()) > 0:
      where = f" from step {step}" if step else ""
      raise errors.ConfigError(
          f"{WEIGHTS_KEY}: the weights {part.strip()}{where} sum to 0, so no row has a source; "
          "give at least one source a positive weight."
      )
    stages.append(Stage(step, weights))
  return stages


def _malformed(text: str, why: str) -> errors.ConfigError:
  return errors.ConfigError(f"{WEIGHTS_KEY}={text!r} is malformed: {why}; write {_WEIGHTS_FORM}.")


def apportion(weights, total: int) -> np.ndarray:
  """Integer shares of `total` in proportion to `weights` (the largest remainders round up;
  ties go to the first)."""
  exact = np.asarray(weights, np.float64) / float(np.sum(weights)) * total
  shares = np.floor(exact).astype(np.int64)
  by_remainder = np.argsort(-(exact - shares), kind="stable")
  shares[by_remainder[: total - int(shares.sum())]] += 1
  return shares


def from_config(config) -> Mixture:
  """The mixture `config.mixture` describes; a ConfigError naming what is wrong with its form,
  its names or its weights (the stores themselves: data/text/checks.py)."""
  if not config.mixture.stores or not config.mixture.weights:
    raise errors.ConfigError(
        f"--config.dataset=mixture reads the sources {STORES_KEY}=NAME=STORE,... names at the "
        f"weights {WEIGHTS_KEY}=NAME=WEIGHT,... gives; set both, e.g. "
        f"{STORES_KEY}=web=/data/web_store,code=/data/code_store {WEIGHTS_KEY}=web=0.8,code=0.2."
    )
  stores = parse_stores(config.mixture.stores)
  stages = parse_weights(config.mixture.weights)
  mixture = Mixture(stores, tuple(stages))
  for stage in stages:
    at = f" (in the stage from step {stage.step})" if stage.step else ""
    unknown = [name for name in stage.weights if name not in stores]
    if unknown:
      raise errors.ConfigError(
          f"{WEIGHTS_KEY} names {unknown[0]!r}{at}, which {STORES_KEY} gives no store (its "
          f"sources: {', '.join(stores)}); add {unknown[0]}=STORE there, or leave it out."
      )
    missing = [name for name in stores if name not in stage.weights]
    if missing:
      raise errors.ConfigError(
          f"{STORES_KEY} names {missing[0]!r}, which {WEIGHTS_KEY} gives no weight{at}; give "
          f"it one ({missing[0]}=0 evaluates it without training on it)."
      )
    rows = mixture.counts(stage)
    too_small = [n for n, c in zip(mixture.names, rows) if stage.weights[n] > 0 and c == 0]
    if too_small:
      raise errors.ConfigError(
          f"{WEIGHTS_KEY}: {too_small[0]}={stage.weights[too_small[0]]:g}{at} is below the "
          f"mixture's resolution (1/{BLOCK} of the rows) and would give it none; raise it, or "
          "set it to 0."
      )
  return mixture


def branch_problem(stores: str, parents: str | None, ours: str | None, step: int) -> str | None:
  """Why weights `ours` cannot continue a parent run of the same `stores` with weights
  `parents` from its step `step` (a branch repeats its parent's mixture before the branch point
  and may change it from there), or None."""
  if parents is None or ours is None:
    return f"{WEIGHTS_KEY}: parent {parents!r}, here {ours!r}; a branch reads its parent's data"
  names = list(parse_stores(stores))
  theirs, mine = parse_weights(parents), parse_weights(ours)

  def before(stages):  # the stages before the branch point, by what decides their rows
    shares = lambda s: apportion([s.weights.get(n, 0.0) for n in names], BLOCK).tolist()
    return [(s.step, shares(s)) for s in stages if s.step < step]

  if before(theirs) == before(mine):
    return None
  kept = ";".join((f"{s.step}:" if s.step else "") + s.text() for s in theirs if s.step < step)
  return (
      f"{WEIGHTS_KEY}={ours!r} changes the mixture before the branch point (the parent read "
      f"{parents!r}); a branch keeps its parent's weights up to step {step} and may change them "
      f"from there: --config.mixture.weights='{kept};{step}:{mine[-1].text()}'"
  )


def stage_from(config, step: int) -> Stage | None:
  """The stage of `config`'s mixture that starts at `step`, if one does."""
  return next((s for s in parse_weights(config.mixture.weights) if s.step == step), None)


# ---- Where each row reads ----------------------------------------------------------------------


class Schedule:
  """Each training position's source and its row of that source, and the rows each source gave
  the positions before any one: the closed form of the module docstring. Not shared between
  threads (it keeps the last blocks it drew)."""

  _KEPT = 4  # blocks kept drawn: a batch spans at most two

  def __init__(self, mixture: Mixture, batch_size: int, seed: int):
    self.names, self.seed = mixture.names, seed
    self.starts = np.array([s.step * batch_size for s in mixture.stages], np.int64)
    self.counts = np.stack([mixture.counts(s) for s in mixture.stages])  # (stages, sources)
    self.bounds = np.concatenate(
        [np.zeros((len(self.counts), 1), np.int64), np.cumsum(self.counts, axis=1)], axis=1
    )
    self._blocks = {}
    before = [np.zeros(len(self.names), np.int64)]  # each stage's rows of each source before it
    for stage in range(len(self.starts) - 1):
      span = int(self.starts[stage + 1] - self.starts[stage])
      before.append(before[-1] + self._rows_in_stage(stage, span))
    self.before = np.stack(before)

  def _block(self, stage: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """(source, rank) of each place of a block: the source that reads there, and how many of
    that source's rows come before it in the block."""
    key = (stage, block)
    if key not in self._blocks:
      slots = order.permute(np.arange(BLOCK), BLOCK, self.seed, _BLOCK_STREAM, stage, block)
      source = np.searchsorted(self.bounds[stage], slots, side="right") - 1
      rank = np.zeros(BLOCK, np.int64)
      for k in range(len(self.names)):
        at = source == k
        rank[at] = np.arange(int(at.sum()))
      if len(self._blocks) >= self._KEPT:
        del self._blocks[next(iter(self._blocks))]
      self._blocks[key] = (source, rank)
    return self._blocks[key]

  def _stage_of(self, positions_N: np.ndarray) -> np.ndarray:
    return np.searchsorted(self.starts, positions_N, side="right") - 1

  def _rows_in_stage(self, stage: int, length: int) -> np.ndarray:
    """Each source's rows among the first `length` positions of `stage`."""
    blocks, rest = divmod(length, BLOCK)
    rows = blocks * self.counts[stage]
    if rest:
      source, _ = self._block(stage, blocks)
      rows = rows + np.bincount(source[:rest], minlength=len(self.names))
    return rows

  def rows_before(self, position: int) -> np.ndarray:
    """How many rows each source gave the positions before `position` (int64, by name order)."""
    stage = int(self._stage_of(np.array([position]))[0])
    return self.before[stage] + self._rows_in_stage(stage, position - int(self.starts[stage]))

  def locate(self, positions_N) -> tuple[np.ndarray, np.ndarray]:
    """(source index, row of that source) of each training position."""
    positions_N = np.asarray(positions_N, np.int64)
    stage_N = self._stage_of(positions_N)
    block_N, place_N = np.divmod(positions_N - self.starts[stage_N], BLOCK)
    source_N, row_N = np.empty_like(positions_N), np.empty_like(positions_N)
    for stage, block in sorted(set(zip(stage_N.tolist(), block_N.tolist()))):
      at = (stage_N == stage) & (block_N == block)
      source_M, rank_M = self._block(stage, block)
      k = source_M[place_N[at]]
      source_N[at] = k
      row_N[at] = self.before[stage, k] + block * self.counts[stage, k] + rank_M[place_N[at]]
    return source_N, row_N
