"""Validation up front: every config value, the workdir and the data, checked before anything runs.

`validate_training` is the first thing the trainer does: before any compilation, any file is
written or any step is trained. A problem is a `ConfigError`, `DataError` or `WorkdirError`
(vit_jax/errors.py): one line naming the key or file and the fix, exit code 2, nothing touched.
docs/errors.md lists what is checked here.
"""

import math
import sys

import jax

from vit_jax import data
from vit_jax import errors
from vit_jax import evaluate as evaluators
from vit_jax import tasks
from vit_jax import workdir as workdir_lib
from vit_jax.config import defaults
from vit_jax.training import host_input
from vit_jax.training import mesh
from vit_jax.training import optimizer

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


def choices(config) -> dict[str, tuple]:
  """The allowed values of each choice key: the schema's (config/defaults.py CHOICES) and the
  names that the modules reading a key define: the image classification losses, the
  optimizers and schedules, and a transformer's normalizations, biases and RoPE scalings."""
  losses = {}
  if has_key(config, "loss"):  # image classification configs
    from vit_jax.tasks import classification  # pylint: disable=g-import-not-at-top

    losses["loss"] = tuple(classification.LOSSES)
  block = {}
  if has_key(config, "model.normalization"):  # a transformer's block options
    from vit_jax.models import position  # pylint: disable=g-import-not-at-top
    from vit_jax.models import transformer  # pylint: disable=g-import-not-at-top

    block = {
        "model.normalization": tuple(transformer.NORMS),
        "model.biases": transformer.BIASES,
        "model.rope_scaling": position.ROPE_SCALINGS,
    }
  return {
      **defaults.CHOICES,
      **losses,
      **block,
      "optimizer.name": optimizer.OPTIMIZERS,
      "optimizer.schedule": optimizer.SCHEDULES,
      "optimizer.cooldown_shape": optimizer.COOLDOWN_SHAPES,
  }


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
  for key, allowed in choices(config).items():
    value = get(config, key)
    if value is not _MISSING and value not in allowed:
      problems.append(f"--config.{key}={value!r} must be one of {', '.join(allowed)}")
  for key in ("model.dtype", "model.param_dtype"):
    value = get(config, key)
    if value is not _MISSING and value not in defaults.MODEL_DTYPES:
      problems.append(
          f"--config.{key}={value!r} must be float32 or bfloat16: float16 needs loss scaling, "
          "which this trainer does not do (its small gradients would round to 0); use bfloat16 "
          "on TPUs, A100s and newer, float32 on V100s and T4s"
      )
  # None: every head has its keys and values; each head is width / num_heads wide.
  for key in ("model.num_kv_heads", "model.head_dim"):
    value = get(config, key)
    if value not in (None, _MISSING) and not (type(value) is int and value >= 1):
      problems.append(f"--config.{key}={value!r} must be None or a number >= 1")
  if get(config, "task") not in tasks.TASKS:
    problems.append(
        f"--config.task={get(config, 'task')!r} must be one of {', '.join(tasks.TASKS)}"
    )
  for key, none_ok in defaults.BETWEEN_ZERO_AND_ONE.items():
    value = get(config, key)
    if value is _MISSING or (value is None and none_ok):
      continue
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1):
      problems.append(f"--config.{key}={value!r} must be in (0, 1)")
  problems += evaluators.config_problems(config)
  dataset = get(config, "dataset")
  for key in ("hf_subset", "hf_holdout"):  # what they say applies to hf: datasets alone
    if get(config, key) not in (None, _MISSING) and not str(dataset).startswith(data.HUB_PREFIX):
      problems.append(f"--config.{key} applies to hf: datasets only, not {dataset!r}; unset it")
  if not problems and has_key(config, "optimizer.cooldown_steps"):
    problems += optimizer.schedule_problems(config.optimizer, get(config, "total_steps"))
  magnitude = get(config, "augment.randaugment_magnitude")
  low, high = defaults.RANDAUGMENT_MAGNITUDES
  if magnitude is not _MISSING and (
      isinstance(magnitude, bool) or not isinstance(magnitude, (int, float))
  ):
    problems.append(f"--config.augment.randaugment_magnitude={magnitude!r} must be a number in "
                    f"[{low}, {high}]")  # fmt: skip
  elif magnitude is not _MISSING and not low <= magnitude <= high:
    problems.append(
        f"--config.augment.randaugment_magnitude={magnitude} must be in [{low}, {high}] "
        "(big_vision's RandAugment magnitudes; 10 is each op's full strength)"
    )
  topology = get(config, "target_topology")
  if topology not in (None, _MISSING):
    from vit_jax.tpu_planning import aot  # pylint: disable=g-import-not-at-top

    try:
      aot.parse_topology(topology)
    except errors.ConfigError as e:
      problems.append(f"--config.target_topology: {e}".rstrip("."))
  profile_steps = get(config, "profile_steps")
  if profile_steps not in (None, "", _MISSING):
    from vit_jax.training import profiling  # pylint: disable=g-import-not-at-top  (only if set)

    try:
      profiling.parse_steps(profile_steps)
    except errors.ConfigError as e:
      problems.append(str(e))
  outage = get(config, "storage_outage_s")
  if outage is not _MISSING and not (
      isinstance(outage, (int, float))
      and not isinstance(outage, bool)
      and 0 < outage <= workdir_lib.MAX_OUTAGE_S
  ):
    problems.append(
        f"--config.storage_outage_s={outage!r} must be in (0, {workdir_lib.MAX_OUTAGE_S}]: a "
        f"bucket workdir's lock may be taken over by another run {workdir_lib.LOCK_STALE_S} s "
        "after its holder last renewed it"
    )
  keep = get(config, "keep_checkpoint_steps")
  if keep is not _MISSING and not (
      isinstance(keep, (tuple, list)) and all(type(s) is int and s > 0 for s in keep)
  ):
    problems.append(
        f"--config.keep_checkpoint_steps={keep!r} must be a tuple of steps > 0, e.g. (800, 1600)"
    )
  batch, accum = get(config, "batch_size"), get(config, "grad_accum_steps")
  if not problems and batch is not _MISSING and accum is not _MISSING:
    try:
      mesh.check_batch(batch, accum)  # the trainer checks the mesh's batch shards too
    except errors.ConfigError as e:
      problems.append(str(e).split(";")[0])
  return problems


def missing_keys(config) -> list[str]:
  """The keys every config shares (defaults.training_defaults) that `config` lacks. The code
  reads them as `config.key`, with no default of its own, so a config must hold them all."""

  def dotted(c, prefix=""):
    for key, value in c.items():
      if hasattr(value, "items"):
        yield from dotted(value, f"{prefix}{key}.")
      else:
        yield prefix + key

  return [key for key in dotted(defaults.training_defaults()) if not has_key(config, key)]


def validate_config(config) -> None:
  missing = missing_keys(config)
  if missing:
    raise errors.ConfigError(
        f"The config lacks {', '.join(missing)}, which every config holds; build it on "
        "vit_jax.config.defaults (dataset_defaults or text_defaults). Nothing was written."
    )
  problems = config_problems(config)
  if problems:
    raise errors.ConfigError(
        "; ".join(problems) + ". Fix the value(s) and rerun; nothing was " "written."
    )


def config_warnings(config) -> list[str]:
  """Values that train but probably not as meant, each naming its --config key and the fix."""
  warnings = []
  total, warmup = get(config, "total_steps"), get(config, "optimizer.warmup_steps")
  # A researcher may want it (a warmup-only probe), so a warning, not an error.
  if _MISSING not in (total, warmup) and 0 < total <= warmup:
    warnings.append(
        f"--config.optimizer.warmup_steps={warmup} >= --config.total_steps={total}: the whole "
        f"run is warmup, its learning rate at most {total / warmup:.2g} x optimizer.lr; set "
        f"e.g. --config.optimizer.warmup_steps={total // 10}."
    )
  return warnings


def validate_training(config, workdir: str) -> None:
  """Checks the config, the workdir and the data. Raises a UserError before anything is
  written; prints `config_warnings` to stderr (process 0)."""
  validate_config(config)
  if jax.process_index() == 0:
    for warning in config_warnings(config):
      print(f"warning: {warning}", file=sys.stderr, flush=True)
  check_mesh_and_input(config)
  workdir_lib.check_workdir(workdir)
  workdir_lib.check_resume(config, workdir)
  if config.branch_from:
    # pylint: disable=g-import-not-at-top  (orbax: only a branch reads another run's checkpoint)
    from vit_jax import checkpoint
    from vit_jax.training import branch

    if not checkpoint.step_dirs(workdir):  # a branch that saved a step resumes from its own
      branch.check(config, workdir)
  task = tasks.TASKS[config.task]
  # pylint: disable=g-import-not-at-top
  if task.reads_images:
    from vit_jax.data.image import sources as image_sources

    image_sources.check_config(config)
    return
  from vit_jax.data.text import checks as text_checks

  examples = tasks.examples_of(config)
  text_checks.check_config(config, examples, streams=task.streams, mixes=task.mixes)
  text_checks.check_tokenizer_path(config, workdir)


def validate_preparation(config, output: str, split_names=None) -> None:
  """Checks a text config and its dataset before `python -m vit_jax.prepare` writes a token
  store."""
  validate_config(config)
  from vit_jax.data.text import checks as text_checks  # pylint: disable=g-import-not-at-top
  from vit_jax.data.text import store_writer  # pylint: disable=g-import-not-at-top

  names = split_names or store_writer.splits_to_prepare(config)
  text_checks.check_preparation(config, tasks.examples_of(config), output, names)


def check_mesh_and_input(config) -> None:
  """`config.mesh` fits this job's devices, the batch splits over its batch shards, and the
  input can give each process exactly the rows its devices hold (training/host_input.py)."""
  devices_mesh = mesh.make_mesh(config.mesh)
  mesh.check_batch(config.batch_size, config.grad_accum_steps, devices_mesh)
  host_input.plan_input(devices_mesh, config.batch_size, config.input_shards)


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
