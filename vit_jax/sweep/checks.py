"""Every run's config, built and checked the way `vit_jax.main` does, before any run starts.

The base config is loaded by ml_collections' config_flags from the same argv the run will get, so
an override parses exactly as it will in the run (types, locked keys). Then the value checks of
`vit_jax.config.checks.validate_config` run. Nothing is compiled, no dataset is opened, nothing is
written.
"""

from absl import flags
from ml_collections import config_flags

from vit_jax import errors
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
  return config


def _parse(run: spec.Run, args: list[str]):
  argv = ["vit_jax.main", *args]
  values = flags.FlagValues()
  config_flags.DEFINE_config_file(
      "config", None, "base config", flag_values=values, lock_config=True, sys_argv=argv
  )
  try:
    values(argv)
    return values.config
  except errors.UserError as e:  # e.g. a bad :ARGS argument of the config
    raise errors.ConfigError(f"run {run.name!r}: {e}") from None
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError) as e:
    message = errors.without_traceback(str(e)).replace("\n", " ")
    raise errors.ConfigError(f"run {run.name!r}: {message}. No run was started.") from None


def check_all(sweep: spec.Sweep) -> dict:
  """{run name: its config} for every run, or the first run's problem as a ConfigError."""
  return {run.name: run_config(run) for run in sweep.runs}
