"""Every run's config, built and checked the way `vit_jax.main` does, before any run starts.

The base config is loaded by ml_collections' config_flags from the same argv the run will get, so
an override parses exactly as it will in the run (types, locked keys). Then the value checks of
`vit_jax.config.checks.validate_config` run, and each split of a TFDS image dataset is checked
against the split sizes TFDS recorded when it prepared the data (a slice larger than its split,
`train[:60000]` of 50,000 images, is refused). Nothing is compiled, no example is read, nothing is
written.
"""

from absl import flags
from ml_collections import config_flags

from vit_jax import data
from vit_jax import errors
from vit_jax import tasks
from vit_jax.config import args as config_args
from vit_jax.config import checks
from vit_jax.sweep import spec


def run_config(run: spec.Run):
  """The ConfigDict `run` will train with; a ConfigError names the run and the bad key."""
  config_arg = f"--config={spec.resolve_config(run.config)}"
  base = _parse(run, [config_arg])
  for key, _ in run.overrides:
    if not checks.has_key(base, key):
      parent, _, leaf = key.rpartition(".")
      scope = checks.get(base, parent) if parent else base
      known = sorted(scope.keys()) if hasattr(scope, "keys") else []
      raise errors.ConfigError(
          f"run {run.name!r}: unknown config key {key!r} (not in {run.config}"
          + (f"; {parent or 'its top level'} has {known}" if known else "")
          + "). Fix the key in the sweep file; no run was started."
      )
  config = _parse(run, [config_arg, *run.flags()])
  problems = checks.config_problems(config)
  if problems:
    raise errors.ConfigError(
        f"run {run.name!r}: " + "; ".join(problems) + ". Fix the sweep file; no run was started."
    )
  check_splits(run, config)
  return config


def check_splits(run: spec.Run, config) -> None:
  """The run's train and eval splits exist in its TFDS image dataset and fit in it, by the check
  the run itself makes first (`ImageSource.check_split`). The datasets built here are built now,
  as the first run would; one that is not on this machine (a pod's ImageNet) is left to the run,
  which checks it where the data is."""
  if not tasks.TASKS[config.task].reads_images:
    return  # text datasets: the run checks their names and splits
  # pylint: disable-next=g-import-not-at-top  (TensorFlow only for image sweeps)
  from vit_jax.data.image import sources

  if config.dataset.startswith((sources.FOLDER_PREFIX, data.HUB_PREFIX)):
    return  # a folder's or hf: dataset's splits are its own, no slices; the run checks them
  try:
    source = sources.open_source(
        config.dataset,
        data_dir=config.data_dir,
        download=False,
        read_options=data.read_options(config),
    )
  except (errors.DatasetNotPreparedError, errors.ConfigError):  # not here, or unknown here
    return
  for key in data.SPLIT_KEYS:
    split = config[key] or getattr(source, key)
    if split is None:
      continue
    try:
      source.check_split(key, split)
    except errors.DataError as e:
      raise errors.DataError(f"run {run.name!r}: {e} No run was started.") from None


def _parse(run: spec.Run, args: list[str]):
  argv = ["vit_jax.main", *args]
  values = flags.FlagValues()
  config_flags.DEFINE_config_file(
      "config", None, "base config", flag_values=values, lock_config=True, sys_argv=argv
  )
  try:
    values(argv)
    config_args.refuse_none(values.config, argv)
    return values.config
  except errors.UserError as e:  # e.g. a bad :ARGS argument of the config
    raise errors.ConfigError(f"run {run.name!r}: {e}") from None
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError) as e:
    message = errors.without_traceback(str(e)).replace("\n", " ")
    raise errors.ConfigError(f"run {run.name!r}: {message}. No run was started.") from None


def check_all(sweep: spec.Sweep) -> dict:
  """{run name: its config} for every run, or the first run's problem as a ConfigError."""
  with data.opened_once():  # each dataset opened once for all the runs' split checks
    return {run.name: run_config(run) for run in sweep.runs}
