"""Validation up front: every config value and the data it names, checked before anything runs.

`validate_training` is the first thing the trainer does: before any compilation, any file is
written or any step is trained. A problem is a `ConfigError`, `DataError` or `WorkdirError`
(vit_jax/errors.py): one line naming the key or file and the fix, exit code 2, nothing touched.
The README's "Survival" section lists what is checked here.
"""

import glob
import math
import os
import re

from vit_jax import errors
from vit_jax import tasks
from vit_jax import workdir as workdir_lib
from vit_jax.config import defaults

TEXT_SPLITS = ("train", "validation", "test", "all")
_MISSING = object()


def get(config, dotted: str):
  """config["a.b"] for a dotted key; _MISSING where a config has no such key."""
  value = config
  for part in dotted.split("."):
    if not hasattr(value, "keys") or part not in value.keys():
      return _MISSING
    value = value[part]
  return value


def has_key(config, dotted: str) -> bool:
  """Whether `config` has the (dotted) key, e.g. "optimizer.lr"."""
  return get(config, dotted) is not _MISSING


def config_problems(config) -> list[str]:
  """Every out-of-range, unknown-choice or inconsistent value, each naming its --config key."""
  problems = []
  for key, (low, none_ok) in defaults.AT_LEAST.items():
    value = get(config, key)
    if value is _MISSING or (value is None and none_ok):
      continue
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
      problems.append(f"--config.{key}={value!r} must be a number >= {low}")
    elif value < low:
      problems.append(f"--config.{key}={value} must be >= {low}")
  for key in defaults.BELOW_ONE:
    value = get(config, key)
    if value is not _MISSING and not (isinstance(value, (int, float)) and 0 <= value < 1):
      problems.append(f"--config.{key}={value!r} must be in [0, 1)")
  for key, allowed in defaults.CHOICES.items():
    value = get(config, key)
    if value is not _MISSING and value not in allowed:
      problems.append(f"--config.{key}={value!r} must be one of {', '.join(allowed)}")
  if get(config, "task") not in tasks.TASKS:
    problems.append(
        f"--config.task={get(config, 'task')!r} must be one of {', '.join(tasks.TASKS)}"
    )
  batch, accum = get(config, "batch_size"), get(config, "grad_accum_steps")
  if not problems and batch is not _MISSING and accum is not _MISSING and batch % accum:
    problems.append(
        f"--config.batch_size={batch} must be divisible by " f"--config.grad_accum_steps={accum}"
    )
  return problems


def validate_config(config) -> None:
  problems = config_problems(config)
  if problems:
    raise errors.ConfigError(
        "; ".join(problems) + ". Fix the value(s) and rerun; nothing was " "written."
    )


def validate_training(config, workdir: str) -> dict:
  """Checks the config, the workdir and the data; returns notes for the metrics log (e.g. the
  count of corrupt images skipped). Raises a UserError before anything is written."""
  validate_config(config)
  workdir_lib.check_workdir(workdir)
  workdir_lib.check_resume(config, workdir)
  if config.task == "image_classification":
    return _check_image_data(config)
  _check_text_data(config)
  return {}


def validate_generation(
    *, max_new_tokens: int, temperature: float, top_k: int, top_p: float, beam_size: int
) -> None:
  problems = []
  if max_new_tokens < 1:
    problems.append(f"--max_new_tokens={max_new_tokens} must be >= 1")
  if not (math.isfinite(temperature) and temperature >= 0):
    problems.append(f"--temperature={temperature} must be >= 0 (0: greedy)")
  if top_k < 0:
    problems.append(f"--top_k={top_k} must be >= 0 (0: all tokens)")
  if not 0 < top_p <= 1:
    problems.append(f"--top_p={top_p} must be in (0, 1]")
  if beam_size < 1:
    problems.append(f"--beam_size={beam_size} must be >= 1 (1: greedy)")
  if problems:
    raise errors.ConfigError("; ".join(problems) + ".")


# ---- Splits ------------------------------------------------------------------------------------
SPLIT_KEYS = ("train_split", "eval_split")


def check_tfds_split(builder, key: str, value: str, dataset: str, renamed=()) -> None:
  """`--config.<key>=value` names an existing, non-empty split of `builder`, by the split counts
  TFDS recorded when it prepared the data; TFDS parses slices and sums (`train[:10%]`,
  `train+test`). `renamed`: (name, TFDS split) pairs a reader maps, e.g. ("validation", "test").

  A builder with no recorded splits (`tfds.testing.mock_data` without metadata files accepts
  any) is left to the reader.
  """
  splits = builder.info.splits
  if not splits:
    return
  renamed = {name: split for name, split in renamed if name != split}
  tfds_split = renamed.get(value, value)
  shown = repr(value) if tfds_split == value else f"{value!r} (TFDS split {tfds_split!r})"
  available = ", ".join(
      [f"{name} ({info.num_examples} examples)" for name, info in splits.items()]
      + [f"{name} (= {split})" for name, split in renamed.items()]
  )
  try:
    count = splits[tfds_split].num_examples
  except (KeyError, ValueError) as e:  # TFDS's way of saying it is no such split or slice
    reason = str(e).strip("'\"").splitlines()[0][:200]
    reason = "" if reason.startswith("Unknown split") else f" ({reason})"  # listed below
    raise errors.DataError(
        f"--config.{key}={shown} is not a split of {dataset!r}{reason}; available: "
        f"{available}, or slices of them such as train[:10%]."
    ) from None
  if count == 0:
    raise errors.DataError(
        f"--config.{key}={shown} of {dataset!r} has no examples; available: {available}."
    )


# ---- Text data --------------------------------------------------------------------------------
def _check_text_data(config) -> None:
  # pylint: disable=g-import-not-at-top
  from vit_jax.data.text import corpus
  from vit_jax.data.text import datasets

  name = config.dataset
  # An unknown name, or one of the wrong kind, is a ConfigError here, before the workdir exists.
  datasets.check_kind(name, tasks.TASKS[config.task].examples)
  if name in datasets.TFDS_DATASETS:
    _check_tfds_text(config, datasets.TFDS_DATASETS[name])
    return
  if name in datasets.TOY_DATASETS:
    allowed = tuple(datasets.TOY_SIZES)
  else:
    allowed = TEXT_SPLITS if name.startswith(datasets.FILE_PREFIXES) else TEXT_SPLITS[:3]
  for key in SPLIT_KEYS:
    if config[key] not in allowed:
      raise errors.DataError(
          f"--config.{key}={config[key]!r} is not a split of {name!r}; use "
          f"one of {', '.join(allowed)}."
      )
  if not name.startswith(datasets.FILE_PREFIXES):
    return  # the embedded corpus and the toy tasks are generated: every split has examples
  for path in text_files(name):
    check_text_file(path)
  count = lambda split: sum(1 for _ in datasets.load_source(name, split).single_pass())
  if count(config.eval_split) == 0 or count(config.train_split) == 0:
    every = corpus.VALIDATION_EVERY
    raise errors.DataError(
        f"dataset {name!r} has {count('all')} documents, too few for a non-empty train and "
        f"validation split (every {every}th document is held out, so at least {every} are "
        "needed): add files, or use paragraphs:PATTERN to split files at blank lines."
    )


def _check_tfds_text(config, spec) -> None:
  """The dataset is prepared and both splits exist and hold examples. The reader opens the eval
  split only at the first eval, so without this a typo there costs the training before it."""
  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds

  from vit_jax.data.image import sources  # its ensure_prepared serves any TFDS builder

  builder = tfds.builder(spec.tfds_name, data_dir=config.data_dir)
  sources.ensure_prepared(builder)
  for key in SPLIT_KEYS:  # spec.splits: e.g. lm1b's "validation" is its TFDS "test" split
    check_tfds_split(builder, key, config[key], config.dataset, spec.splits)


def text_files(name: str) -> list[str]:
  """The files a `files:`/`paragraphs:` dataset names; each must be a readable regular file."""
  pattern = os.path.expanduser(name.split(":", 1)[1])
  paths = sorted(glob.glob(pattern))
  if not paths:
    raise errors.DataError(f"dataset {name!r}: no files match {pattern!r}; check the path.")
  for path in paths:
    if not os.path.isfile(path):
      raise errors.DataError(
          f"dataset {name!r}: {path} is not a regular file (a folder?); "
          "name files, e.g. files:/data/*.txt."
      )
    if not os.access(path, os.R_OK):
      raise errors.DataError(f"dataset {name!r}: {path} is not readable; fix its permissions.")
  return paths


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")  # not tab, newline, \v, \f or \r


def check_text_file(path: str) -> None:
  """UTF-8 text without control bytes, or a DataError naming the file and the first bad byte."""
  with open(path, "rb") as f:
    data = f.read()
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise errors.DataError(
        f"{path} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); convert "
        "it, e.g. iconv -f latin1 -t utf-8, or leave it out of the pattern."
    ) from None
  bad = _CONTROL.search(text)
  if bad:
    raise errors.DataError(
        f"{path} looks binary (control character {bad.group()!r} at "
        f"character {bad.start()}); leave it out of the pattern."
    )


# ---- Image data -------------------------------------------------------------------------------
def _check_image_data(config) -> dict:
  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds

  from vit_jax.data.image import folder
  from vit_jax.data.image import sources

  source = sources.open_source(config.dataset, data_dir=config.data_dir, download=config.download)
  is_tfds = not config.dataset.startswith(sources.FOLDER_PREFIX)
  builder = tfds.builder(config.dataset, data_dir=config.data_dir) if is_tfds else None
  for key in SPLIT_KEYS:
    split = config[key] or getattr(source, key)
    if split is None:
      raise errors.ConfigError(
          f"--config.{key} is unset and {config.dataset!r} has no default one; set it."
      )
    if builder is not None:  # names the splits there are, with their sizes
      check_tfds_split(builder, key, split, config.dataset)
    try:  # and reading it: a folder's splits, or a TFDS split under mock_data
      ds = source.read(split, 0, 1)
    except errors.UserError:
      raise
    except (ValueError, KeyError) as e:  # TFDS's way of saying the split does not exist
      raise errors.DataError(
          f"--config.{key}={split!r} is not a split of {config.dataset!r} "
          f"({str(e).splitlines()[0][:200]}); choose an existing split."
      ) from e
    if int(ds.cardinality()) == 0:
      raise errors.DataError(f"--config.{key}={split!r} of {config.dataset!r} is empty.")
  if source.classes_in is not None and not get(config, "allow_class_mismatch"):
    _check_classes_agree(config, source)
  if is_tfds:
    return {}
  bad = folder.undecodable_images(source.name[len(sources.FOLDER_PREFIX) :])
  if bad and get(config, "bad_images") == "error":
    raise errors.DataError(
        f"{bad[0]} is not a decodable image ({len(bad)} such file(s) in the "
        "folder); remove or re-encode it, or set --config.bad_images=skip."
    )
  return {"skipped_images": len(bad)} if bad else {}


def _check_classes_agree(config, source) -> None:
  """The train and eval splits must hold the same classes: a class only in the eval split is
  one the model never learns, and one only in training is never scored."""
  splits = {key: config[key] or getattr(source, key) for key in SPLIT_KEYS}
  classes = {key: set(source.classes_in(split)) for key, split in splits.items()}
  train, evaluated = classes["train_split"], classes["eval_split"]
  if train == evaluated:
    return
  parts = []
  for key, other in (("eval_split", "train_split"), ("train_split", "eval_split")):
    only = sorted(classes[key] - classes[other])
    if only:
      parts.append(f"{splits[key]!r} has {', '.join(only)}, which {splits[other]!r} lacks")
  raise errors.DataError(
      f"the classes of --config.train_split={splits['train_split']!r} and "
      f"--config.eval_split={splits['eval_split']!r} of {config.dataset} differ: "
      f"{'; '.join(parts)}. Give both splits the same class folders, or set "
      "--config.allow_class_mismatch=true to train and score them as they are."
  )
