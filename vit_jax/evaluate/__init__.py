"""Evaluators: what a run measures on its own cadence besides the training loss, and the command
that runs them once on any checkpoint.

    config.evals = {NAME: {kind, every, ...}}   ->   NAME/metric in metrics.jsonl and TensorBoard

  base            the evaluator contract; the task's own metrics on any dataset and split, and
                  classification's top-1 / top-5 accuracy and loss
  fewshot         linear probes on frozen features, k examples per class (ridge regression)
  lm              causal-LM, masked-LM and seq2seq losses, bits per character

This module is the registry (below). The command line is `python -m vit_jax.evaluate` (see
vit_jax/evaluate/__main__.py).

The registry: the evaluator kinds, their config keys, and building a run's evaluators from
`config.evals`.

    config.evals = {NAME: {kind, every, ...the kind's keys}}

Each evaluator runs every `every` steps and at the last step; its metrics are logged as
`NAME/metric`, and with `ema_decay` set those of the EMA params beside them as `NAME_ema/metric`.
A key whose default is the run's own value (`dataset`, `split`, `every`, `max_batches`) follows
the run's key (`dataset`, `eval_split`, `eval_every`, `eval_max_batches`) until it is set itself.
This module imports no evaluator: `build` imports the kinds a config names, so a run loads only
the evaluators it uses.
"""

import dataclasses
import importlib
import math

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax import errors
from vit_jax import tasks
from vit_jax.config import args as config_args

# Evaluator keys that take the run's value unless set: key -> the run's config key.
FOLLOWS = {
    "dataset": "dataset",
    "split": "eval_split",
    "every": "eval_every",
    "max_batches": "eval_max_batches",
}
_RUNS = object()  # a default that follows the run's key (FOLLOWS)
_NO_INT = object()  # None, but settable to an int from the command line (a typed placeholder)
_NO_STR = object()  # the same for a string: a split left None is the dataset's own eval split


@dataclasses.dataclass(frozen=True)
class Kind:
  module: str  # under vit_jax/evaluate
  cls: str
  keys: dict  # its keys besides `kind` and `every`, with their defaults
  # A probe of any model of the tasks that read these examples (vit_jax/tasks TaskInfo.examples).
  # None: it evaluates the tasks whose own metrics it reports (their TaskInfo.eval_kind).
  probes: str | None = None


_SPLIT_KEYS = {"dataset": _RUNS, "split": _RUNS, "max_batches": _RUNS}
KINDS = {
    # optional: skipped, with one printed line, when its dataset is not prepared (e.g. ImageNet-v2
    # beside an ImageNet run).
    "classification": Kind("base", "Classification", {**_SPLIT_KEYS, "optional": False}),
    # big_vision's configs/common_fewshot.py: shots (1, 5, 10, 25), 3 seeds, l2_reg 2 ** 10.
    "fewshot": Kind(
        "fewshot",
        "FewShot",
        {
            "dataset": _RUNS,
            "train_split": "train",
            "split": _NO_STR,  # None: the dataset's eval split
            "shots": (1, 5, 10, 25),
            "seeds": 3,
            "l2_reg": 2.0**10,
        },
        probes=tasks.IMAGES,
    ),
    # stride: a stream: dataset's sliding window step (vit_jax/data/text/stream.py); None: seq_len
    "causal_lm": Kind("lm", "CausalLMLoss", {**_SPLIT_KEYS, "stride": _NO_INT}),
    "masked_lm": Kind("lm", "MaskedLMLoss", _SPLIT_KEYS),
    "seq2seq": Kind("lm", "Seq2SeqLoss", _SPLIT_KEYS),
    # BLEU, chrF and ROUGE of decoded text (vit_jax/evaluate/decoding.py); GNMT's and flax's WMT
    # example's beam search: 4 beams, length penalty alpha 0.6 (configs/gpt.py's pairs: greedy,
    # beam_size 1). max_new_tokens None: target_len (decoder-only: half of seq_len).
    "decoding": Kind(
        "decoding",
        "Seq2SeqDecoding",
        {
            "dataset": _RUNS,
            "split": _RUNS,
            "max_examples": 1000,
            "beam_size": 4,
            "length_penalty": 0.6,
            "max_new_tokens": _NO_INT,
        },
        probes="pairs",
    ),
}
DEFAULT_NAME = "eval"  # the default entry: the task's own metrics on `eval_split`


def ema_name(name: str) -> str:
  """The name an evaluator's metrics of the EMA params are logged under (training/optimizer.py)."""
  return f"{name}_ema"


def tasks_of(kind: str) -> tuple[str, ...]:
  """The training tasks (vit_jax/tasks) whose models `kind` evaluates."""
  probes = KINDS[kind].probes
  if probes is None:
    return tuple(name for name, task in tasks.TASKS.items() if task.eval_kind == kind)
  return tuple(
      name
      for name, task in tasks.TASKS.items()
      if task.examples == probes or (probes == "pairs" and task.packs_pairs)
  )


def default_kind(task: str) -> str:
  """The kind that reports `task`'s own eval metrics (its task entry says which)."""
  return tasks.TASKS[task].eval_kind


def entry(config, kind: str, **settings) -> ml_collections.ConfigDict:
  """An evaluator's config: `kind`'s keys at their defaults, then `settings`. Keys left at the
  run's value follow `config`'s key (`--config.eval_every=100` reaches them)."""
  values = {"kind": kind, "every": _RUNS, **KINDS[kind].keys, **settings}
  for key, value in values.items():
    if value is _RUNS:
      values[key] = config.get_ref(FOLLOWS[key]).identity()
    elif value is _NO_INT:
      values[key] = placeholder(int)
    elif value is _NO_STR:
      values[key] = placeholder(str)
  return ml_collections.ConfigDict(values)


def default_evals(config) -> ml_collections.ConfigDict:
  """{"eval": the task's own metrics on `eval_split` every `eval_every` steps}."""
  return ml_collections.ConfigDict({DEFAULT_NAME: entry(config, default_kind(config.task))})


def evals_of(config) -> dict:
  """{name: settings} of `config.evals`, every key filled in: the kind's defaults, the run's
  values for the keys that follow it. A config without `evals` (saved before evaluators were
  configurable) has the default entry."""
  entries = dict(config.evals.items()) if "evals" in config else {}
  if "evals" not in config:
    entries[DEFAULT_NAME] = {"kind": default_kind(config.task)}
  return {name: _filled(config, settings) for name, settings in entries.items()}


def _filled(config, settings) -> ml_collections.ConfigDict:
  defaults = {"every": _RUNS, **KINDS[settings["kind"]].keys}
  values = {
      k: config[FOLLOWS[k]] if v is _RUNS else None if v in (_NO_INT, _NO_STR) else v
      for k, v in defaults.items()
  }
  return ml_collections.ConfigDict({**values, **settings})


def _is_int(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def _value_problem(key: str, value) -> str | None:
  """What is wrong with one evaluator setting, or None."""
  if key in ("every", "seeds") and not (_is_int(value) and value >= 1):
    return "must be an integer >= 1"
  if key == "max_batches" and value is not None and not (_is_int(value) and value >= 1):
    return "must be an integer >= 1 or None (the whole split)"
  if key == "stride" and value is not None and not (_is_int(value) and value >= 1):
    return "must be an integer >= 1 or None (seq_len)"
  if key == "max_examples" and value is not None and not (_is_int(value) and value >= 1):
    return "must be an integer >= 1 or None (the whole split)"
  if key == "max_new_tokens" and value is not None and not (_is_int(value) and value >= 1):
    return "must be an integer >= 1 or None (target_len)"
  if key == "beam_size" and not (_is_int(value) and value >= 1):
    return "must be an integer >= 1 (1: greedy)"
  if key == "length_penalty" and not (
      isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
  ):
    return "must be a finite number >= 0 (0: none)"
  if key == "length_penalty" and value < 0:
    return "must be >= 0 (0: none)"
  if key == "shots" and not (
      isinstance(value, (tuple, list)) and value and all(_is_int(k) and k >= 1 for k in value)
  ):
    return "must be a non-empty tuple of integers >= 1, e.g. (1, 5, 10, 25)"
  if key == "l2_reg" and not (
      isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
  ):
    return "must be a finite number >= 0"
  if key == "l2_reg" and value < 0:
    return "must be >= 0"
  if key == "optional" and not isinstance(value, bool):
    return "must be true or false"
  if key == "split" and value is None:
    return None  # the dataset's own eval split
  if key in ("dataset", "split", "train_split") and not (isinstance(value, str) and value):
    return "must name a dataset or split"
  return None


def config_problems(config) -> list[str]:
  """Every unknown kind, unknown key or bad value of `config.evals`, each naming its key."""
  if "evals" not in config:
    return []
  problems = []
  if "ema_decay" in config and config["ema_decay"] is not None:
    taken = [name for name in config.evals.keys() if ema_name(name) in config.evals]
    problems += [
        f"--config.evals.{ema_name(name)}: with --config.ema_decay set, the EMA metrics of "
        f"--config.evals.{name} are logged under that name; rename one of them"
        for name in taken
    ]
  for name, settings in config.evals.items():
    where = f"--config.evals.{name}"
    if "/" in name:
      problems.append(f"{where}: an evaluator's name may not contain '/'")
      continue
    if not hasattr(settings, "keys") or "kind" not in settings:
      problems.append(f"{where} must be a dict with a 'kind' (one of {', '.join(KINDS)})")
      continue
    kind = settings["kind"]
    if kind not in KINDS:
      problems.append(
          f"{where}.kind={kind!r} is not an evaluator kind; use one of {', '.join(KINDS)}"
      )
      continue
    info = KINDS[kind]
    if config.task not in tasks_of(kind):
      problems.append(
          f"{where}.kind={kind!r} evaluates {' and '.join(tasks_of(kind))} models, not "
          f"--config.task={config.task!r}"
      )
    allowed = ("kind", "every", *info.keys)
    for key in settings.keys():
      if key not in allowed:
        problems.append(
            f"{where}.{key} is not a key of a {kind!r} evaluator; its keys: {', '.join(allowed)}"
        )
    for key in allowed[1:]:
      if key not in settings:
        continue  # a default
      problem = _value_problem(key, settings[key])
      if problem:
        problems.append(f"{where}.{key}={settings[key]!r} {problem}")
  return problems


def build(config, task, setup, files_dir: str | None = None) -> list:
  """The run's evaluators (vit_jax/evaluate/base.py), each importing only its kind's module.

  Building checks each evaluator's data (splits exist, class counts fit the model, a probe has
  enough examples per class): a problem is a UserError before anything is trained. An `optional`
  evaluator whose dataset is not prepared is left out, with one line saying so. `files_dir`: where
  evaluators that write files beside their metrics write them (None: nowhere).
  """
  evaluators = []
  for name, settings in evals_of(config).items():
    info = KINDS[settings.kind]
    cls = getattr(importlib.import_module(f"vit_jax.evaluate.{info.module}"), info.cls)
    try:
      evaluator = cls(name, settings, config, task, setup)
      evaluator.files_dir = files_dir
      evaluators.append(evaluator)
    except errors.DatasetNotPreparedError as e:
      if not settings.get("optional"):
        raise
      why = f"{settings.dataset!r} is not prepared; `{config_args.prepare_command()}` prepares it"
      if config.download:  # what stopped its download and preparation: one line
        why = str(e).strip()
      print(f"note: evaluator {name!r} skipped: {why.rstrip('.')}.", flush=True)
  return evaluators
