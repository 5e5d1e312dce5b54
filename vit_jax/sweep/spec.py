"""Sweep files: a base config and overrides, expanded into named runs of `vit_jax.main`.

A sweep file is a Python file whose `get_sweep()` returns a dict (or a ConfigDict made with
`allow_dotted_keys=True`) with these keys:

  config  the base config as on the command line, e.g. "configs/gpt.py" or
          "configs/vit.py:dataset=cifar10" (a path relative to the working directory or the repo).
  fixed   {key: value}: overrides every run gets, e.g. {"optimizer.lr": 3e-3}.
  runs    [{key: value}, ...]: an explicit list of runs (keys that go together, e.g. a model's
          width, depth and heads); default one run with no overrides. An entry's "config" key
          replaces the base config for its runs (e.g. a ViT and a ResNet in one sweep).
  grid    {key: [values]}: crossed with every entry of `runs` (cartesian product, in key order).
  name    a run-name rule with {key} placeholders, e.g. "w{model.width}-s{total_steps}"; default:
          the keys that vary across runs, `width=64-total_steps=500`.
  metric  what collect/fit/plot report: "error" (1 - eval/accuracy), "prec1_error" (1 - eval/prec@1,
          the top-1 class among all of a multi-label example's labels), "loss" (eval/loss, nats
          per token or example) or "bits_per_char" (eval/bits_per_char).
  fits    which fits `fit` makes (default: compute), any of:
            compute  the saturating power law of the frontier over compute (Zhai et al. 2022)
            data     the same law over training-set size (the largest model's runs)
            params   the same law over model size (the runs on the largest training set)
            joint    L(N, D) = E + A / N^alpha + B / D^beta over every run's final eval (N
                     parameters, D examples seen) and the compute-optimal N*(C), D*(C) it implies
                     (Hoffmann et al. 2022, approach 3; vit_jax/sweep/joint.py)
            isoflop  per compute budget, a parabola of final loss in log N and its minimum N_opt;
                     N_opt = G C^a across budgets (approach 2; vit_jax/sweep/isoflop.py). Needs
                     runs with a `budget_flops`.

A `runs` (or `grid`) entry may carry "budget_flops": the run's training compute budget in FLOPs,
recorded for the isoflop fit (collect writes it to the CSVs), not passed to the run; the sweep file
sets the run's total_steps from it with `vit_jax.sweep.budget.steps_for_budget`.

The budgets axis: an entry may carry "budgets", a list of budgets for one model, each its
total_steps or a dict of the keys that go with it ({"total_steps": ..., "budget_flops": ...,
"eval_every": ...}). The entry becomes one run per budget, trained as one long run and cooldown
branches (Zhai et al. 2022; Hägele et al. 2024): the largest budget is the long run itself, with
its own cooldown at the end; every other budget T is a branch of it at step T - N that cools down
over N steps to T (`--config.branch_from`, training/branch.py), with N = cooldown_fraction x T
(the sweep key `cooldown_fraction`, default 0.2). The long run keeps its checkpoints at the branch
points; the schedule must be one a branch can continue (rsqrt, wsd or constant).

Keys are `--config.` keys (`model.width`, `train_split`, `optimizer.lr`); each run becomes
`python -m vit_jax.main --config=CONFIG --config.key=value ... --workdir=ROOT/NAME`.
"""

import dataclasses
import hashlib
import itertools
import json
import math
import os
import re

from vit_jax import errors
from vit_jax import storage
from vit_jax.config import args

SWEEP_KEYS = ("config", "fixed", "runs", "grid", "name", "metric", "fits", "cooldown_fraction")
METRICS = ("error", "prec1_error", "loss", "bits_per_char")
FITS = ("compute", "data", "params", "joint", "isoflop")
# Run settings that are not --config. overrides ("_parent" links a budgets entry's branches).
PSEUDO_KEYS = ("config", "budget_flops", "_parent")
DEFAULT_COOLDOWN_FRACTION = 0.2
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Run:
  name: str
  config: str  # the base config as written in the sweep file, with its :ARGS
  overrides: tuple[tuple[str, object], ...]  # (dotted key, value), in the sweep's order
  budget_flops: float | None = None  # the compute budget of an IsoFLOP run
  branch_from: str | None = None  # "RUN:STEP": a cooldown branch of that run of the sweep

  def flags(self) -> list[str]:
    return [f"--config.{key}={flag_value(value, key, self.name)}" for key, value in self.overrides]

  def parent(self) -> str | None:
    return self.branch_from.rpartition(":")[0] if self.branch_from else None

  def argv(self, root: str, python: str = "python") -> list[str]:
    """The command line of this run (config path resolved, workdir under `root`)."""
    return [
        python,
        "-m",
        "vit_jax.main",
        f"--config={resolve_config(self.config)}",
        *self.flags(),
        *(
            [f"--config.branch_from={storage.join(root, self.branch_from)}"]
            if self.branch_from
            else []
        ),
        f"--workdir={storage.join(root, self.name)}",
    ]


@dataclasses.dataclass(frozen=True)
class Sweep:
  path: str
  config: str
  runs: tuple[Run, ...]
  metric: str
  fits: tuple[str, ...]

  def identity(self) -> dict:
    """What makes two sweeps the same: every run's name, config and overrides."""
    runs = {r.name: [r.config, *r.flags(), *_budget_flag(r), *_branch_flag(r)] for r in self.runs}
    digest = hashlib.sha256(json.dumps(runs, sort_keys=True).encode()).hexdigest()[:16]
    return {"sweep_file": self.path, "sweep_hash": digest, "runs": runs}


def _budget_flag(run: Run) -> list[str]:
  return [] if run.budget_flops is None else [f"budget_flops={run.budget_flops!r}"]


def _branch_flag(run: Run) -> list[str]:
  return [] if run.branch_from is None else [f"branch_from={run.branch_from}"]


def _with_budgets(combo: dict, fraction: float, path: str) -> list[dict]:
  """An entry's runs for its "budgets": the long run first (the largest budget), then a cooldown
  branch per smaller budget, which names the long run by its index in the returned list."""
  budgets = [b if isinstance(b, dict) else {"total_steps": b} for b in combo.pop("budgets")]
  steps = [b["total_steps"] if "total_steps" in b else None for b in budgets]
  if not steps or any(type(t) is not int or t < 1 for t in steps) or len(set(steps)) < len(steps):
    raise errors.ConfigError(
        f"{path}: budgets={steps} must be distinct total_steps >= 1, one per budget."
    )
  cooldown = {t: max(1, round(fraction * t)) for t in steps}
  budgets.sort(key=lambda b: b["total_steps"])
  *shorter, longest = budgets
  points = tuple(b["total_steps"] - cooldown[b["total_steps"]] for b in shorter)
  long_run = {**combo, **longest, "optimizer.cooldown_steps": cooldown[longest["total_steps"]]}
  if points:
    long_run["keep_checkpoint_steps"] = points
  branches = [
      {**combo, **b, "optimizer.cooldown_steps": cooldown[b["total_steps"]], "_parent": point}
      for b, point in zip(shorter, points)
  ]
  return [long_run, *branches]


def train_slice(fraction: float, split: str = "train") -> str:
  """The TFDS slice holding the first `fraction` of `split`: 0.125 -> "train[:12.5%]"."""
  if not 0 < fraction <= 1:
    raise errors.ConfigError(f"training fraction {fraction} must be in (0, 1].")
  return split if fraction == 1 else f"{split}[:{100 * fraction:g}%]"


def steps_for_epochs(epochs: float, examples: int, batch_size: int, min_steps: int = 1) -> int:
  """Steps that show `examples` training examples `epochs` times at `batch_size`, rounded up, and
  at least `min_steps` (a subset of a few hundred images would otherwise end inside the warmup):
  steps_for_epochs(10, 50_000, 128) -> 3907."""
  if epochs <= 0 or examples < 1 or batch_size < 1 or min_steps < 1:
    raise errors.ConfigError(
        f"steps_for_epochs({epochs}, {examples}, {batch_size}, min_steps={min_steps}): epochs "
        "must be > 0, examples, batch size and min_steps >= 1."
    )
  return max(math.ceil(epochs * examples / batch_size), min_steps)


def resolve_config(config: str) -> str:
  """`configs/X.py:ARGS` as given when the file exists from here, else from the repo root."""
  path, sep, args = config.partition(":")
  if not os.path.isabs(path) and not os.path.isfile(path):
    if os.path.isfile(os.path.join(REPO_ROOT, path)):
      path = os.path.join(REPO_ROOT, path)
  return path + sep + args


def flag_value(value, key: str, run: str) -> str:
  """How `value` is written after `--config.key=`; what absl parses back to the same value."""
  if isinstance(value, bool):
    return "true" if value else "false"
  if isinstance(value, (int, float, str)):
    return repr(value) if isinstance(value, float) else str(value)
  if isinstance(value, (tuple, list)) and all(type(v) is int for v in value):
    return str(tuple(value))  # absl parses "(1, 1, 1)" back into a tuple field
  raise errors.ConfigError(
      f"run {run!r}: {key}={value!r} cannot be passed on the command line (only bool, int, float, "
      "str and tuple-of-int overrides can); set it in the base config instead."
  )


def load(path: str) -> Sweep:
  """Reads and expands a sweep file; a malformed one is a ConfigError naming the problem."""
  if not os.path.isfile(path):
    raise errors.MissingFileError(f"sweep file {path!r} does not exist; see experiments/sweeps/.")
  try:
    module = args.load_file(path)
    if not hasattr(module, "get_sweep"):
      raise errors.ConfigError(f"sweep file {path} has no get_sweep() function.")
    raw = module.get_sweep()
  except Exception as e:  # pylint: disable=broad-except  (the file is user code)
    in_file = args.user_code_error(e, path)
    if in_file is None:
      raise
    raise in_file from e
  raw = raw.to_dict() if hasattr(raw, "to_dict") else dict(raw)
  return expand(raw, path)


def expand(raw: dict, path: str = "<sweep>") -> Sweep:
  """The runs of a sweep dict: every entry of `runs` crossed with the `grid`, `fixed` added."""
  unknown = sorted(set(raw) - set(SWEEP_KEYS))
  if unknown:
    raise errors.ConfigError(f"{path}: unknown sweep key(s) {unknown}; valid: {list(SWEEP_KEYS)}.")
  if not isinstance(raw.get("config"), str) or not raw["config"]:
    raise errors.ConfigError(f"{path}: `config` must name the base config, e.g. 'configs/vit.py'.")
  fixed = dict(raw.get("fixed") or {})
  entries = [dict(e) for e in (raw.get("runs") or [{}])]
  grid = {k: list(v) for k, v in (raw.get("grid") or {}).items()}
  for key, values in grid.items():
    if not values:
      raise errors.ConfigError(f"{path}: grid key {key!r} has no values.")
  metric = raw.get("metric", "error")
  fits = raw.get("fits", ("compute",))
  fits = (fits,) if isinstance(fits, str) else tuple(fits)
  if metric not in METRICS:
    raise errors.ConfigError(f"{path}: metric={metric!r} must be one of {list(METRICS)}.")
  if not fits or set(fits) - set(FITS):
    raise errors.ConfigError(f"{path}: fits={list(fits)} must be a non-empty subset of {FITS}.")
  fraction = raw.get("cooldown_fraction", DEFAULT_COOLDOWN_FRACTION)
  if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
    raise errors.ConfigError(f"{path}: cooldown_fraction={fraction!r} must be in (0, 1).")

  combos = []
  for entry in entries:
    for values in itertools.product(*grid.values()):
      point = dict(zip(grid, values))
      clash = sorted(
          (set(fixed) & set(entry)) | (set(fixed) & set(point)) | (set(entry) & set(point))
      )
      if clash:
        raise errors.ConfigError(
            f"{path}: key(s) {clash} set in more than one of fixed/runs/grid; set each key in "
            "one place."
        )
      combo = {**fixed, **entry, **point}
      if "budgets" not in combo:
        combos.append(combo)
        continue
      start = len(combos)
      for run in _with_budgets(combo, fraction, path):
        if "_parent" in run:
          run["_parent"] = (start, run["_parent"])  # (the long run's index, the branch point)
        combos.append(run)
  names = _names(
      [{k: v for k, v in c.items() if k != "_parent"} for c in combos], raw.get("name"), path
  )
  runs = tuple(
      Run(
          name,
          overrides.get("config", raw["config"]),
          tuple((k, v) for k, v in overrides.items() if k not in PSEUDO_KEYS),
          _budget(overrides.get("budget_flops"), name, path),
          f"{names[overrides['_parent'][0]]}:{overrides['_parent'][1]}"
          if "_parent" in overrides
          else None,
      )
      for name, overrides in zip(names, combos)
  )
  return Sweep(os.path.abspath(path), raw["config"], runs, metric, fits)


def _budget(value, run: str, path: str) -> float | None:
  if value is None:
    return None
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
    raise errors.ConfigError(
        f"{path}: run {run!r} has budget_flops={value!r}; it must be a positive number of FLOPs."
    )
  return float(value)


_PLACEHOLDER = re.compile(r"\{([\w.]+)(?::([^}]*))?\}")


def _names(combos: list[dict], rule: str | None, path: str) -> list[str]:
  if rule is None:  # the keys that vary, each run naming those it sets
    varying = []
    for combo in combos:
      varying += [
          k for k in combo if k not in varying and len({repr(c.get(k)) for c in combos}) > 1
      ]
    short = {k: k.rsplit(".", 1)[-1] for k in varying}
    if len(set(short.values())) < len(short):  # two keys end alike: keep them whole
      short = {k: k for k in varying}
  names = []
  for i, combo in enumerate(combos):
    if rule is None:
      parts = [f"{short[k]}={safe_name(format(combo[k]))}" for k in varying if k in combo]
      names.append(safe_name("-".join(parts) or "run"))
      continue

    def fill(match, combo=combo, i=i):
      key, spec = match.group(1), match.group(2) or ""
      if key == "index":
        return format(i, spec)
      if key not in combo:
        raise errors.ConfigError(
            f"{path}: the name rule {rule!r} uses {{{key}}}, which run {i} does not set "
            f"(it sets {sorted(combo)})."
        )
      return safe_name(format(combo[key], spec))

    names.append(safe_name(_PLACEHOLDER.sub(fill, rule)))
  duplicates = sorted({n for n in names if names.count(n) > 1})
  if duplicates:
    raise errors.ConfigError(
        f"{path}: runs share the name(s) {duplicates}; put every varying key in the name rule."
    )
  return names


def safe_name(text: str) -> str:
  """A folder name: `train[:12.5%]` -> `train_12.5pct`, `S/16` -> `S_16`."""
  text = re.sub(r"[^A-Za-z0-9._=+-]+", "_", text.replace("%", "pct"))
  return re.sub(r"_+", "_", text).strip("_.") or "run"
