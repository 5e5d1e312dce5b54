"""Reading config files: the `k=v,k=v` argument of `--config=configs/X.py:ARGS` parsed against a
config's defaults, and one config or sweep file loaded from another by path.

The defaults configs share (training schema, data, tokenizer) are in vit_jax/config/defaults.py.
"""

import ast
import importlib.util
import os
import sys

from absl import flags

from vit_jax import errors


def load_file(path: str):
  """The module of the config or sweep file at `path`. Config files are loaded by path, not
  imported (configs/ is no package); each load is a fresh module."""
  path = os.path.normpath(os.path.abspath(path))
  name = os.path.splitext(os.path.basename(path))[0]
  module_spec = importlib.util.spec_from_file_location(f"vit_jax_config_file_{name}", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module


def load_beside(this_file: str, relative_path: str):
  """The module of the file at `relative_path` from `this_file`'s folder: how a config or sweep
  file that builds on another (configs/resnet.py on configs/vit.py) loads it."""
  return load_file(os.path.join(os.path.dirname(os.path.abspath(this_file)), relative_path))


def parse(arg: str | None, defaults: dict) -> dict:
  """Returns `defaults` updated from "k=v,k2=v2", values converted to the default's type.

  A key that is not in `defaults` is a ValueError listing the valid ones, so a typo never
  silently trains the wrong thing.
  """
  values = dict(defaults)
  for item in filter(None, (arg or "").split(",")):
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep:  # a bare word switches a boolean on, e.g. ":runlocal"
      raw = "True"
    if key not in defaults:
      raise errors.ConfigError(
          f"Unknown config argument {key!r} in {arg!r}; valid arguments are " f"{sorted(defaults)}."
      )
    values[key] = _convert(raw.strip(), defaults[key], key)
  return values


def _convert(raw: str, default, key: str):
  if isinstance(default, bool):
    if raw.lower() in ("1", "true", "yes"):
      return True
    if raw.lower() in ("0", "false", "no"):
      return False
    raise errors.ConfigError(f"Config argument {key}={raw!r} must be a boolean (true/false).")
  if isinstance(default, (int, float)) and not isinstance(default, bool):
    try:
      return type(default)(ast.literal_eval(raw))
    except (ValueError, SyntaxError) as e:
      raise errors.ConfigError(
          f"Config argument {key}={raw!r} must be a {type(default).__name__}."
      ) from e
  return raw


def parse_command_line(flag_values, argv):
  """absl parsing of a command with --config, but a missing config file, a bad flag or an unknown
  config key is one clear line and exit code 2."""
  for arg in argv[1:]:  # config_flags only reports a missing file later, with a traceback
    if arg.startswith("--config=") and not os.path.isfile(arg[len("--config=") :].split(":")[0]):
      print(
          f"error: config file {arg[len('--config='):].split(':')[0]!r} does not exist; pass "
          "one of configs/*.py, e.g. --config=configs/vit.py.",
          file=sys.stderr,
      )
      sys.exit(2)
  try:
    return flag_values(argv)
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError) as e:
    print(f"error: {errors.without_traceback(str(e))}", file=sys.stderr)
    print(
        "Check the --config.* key names against the config file (they are case-sensitive).",
        file=sys.stderr,
    )
    sys.exit(2)
