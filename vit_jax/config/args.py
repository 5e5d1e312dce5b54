"""Reading config files: the `k=v,k=v` argument of `--config=configs/X.py:ARGS` parsed against a
config's defaults, one config or sweep file loaded from another by path, and the command line.

A config or sweep file is user code: an exception raised while loading it or in its `get_config`
(a syntax error, a failed import, a `raise`) is the user's error, reported as one line naming the
file, the line and the message (`user_code_error`), never as our traceback.

The defaults configs share (training schema, data, tokenizer) are in vit_jax/config/defaults.py.
"""

import ast
import importlib.util
import os
import shlex
import sys
import traceback

from absl import flags
from ml_collections import config_dict
from ml_collections import config_flags

from vit_jax import errors

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_loaded_files = set()  # every config or sweep file load_file has loaded: user code


def load_file(path: str):
  """The module of the config or sweep file at `path`. Config files are loaded by path, not
  imported (configs/ is no package); each load is a fresh module."""
  path = os.path.normpath(os.path.abspath(path))
  _loaded_files.add(path)
  name = os.path.splitext(os.path.basename(path))[0]
  module_spec = importlib.util.spec_from_file_location(f"vit_jax_config_file_{name}", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module


def user_code_error(error: BaseException, *paths: str) -> errors.ConfigError | None:
  """A one-line ConfigError for an exception raised in a config or sweep file (`paths`, or any
  file `load_file` loaded), naming the deepest such file and line; None when the exception did
  not pass through one, is already a UserError (its message names the fix: an unknown `k=v`
  argument), or was raised inside vit_jax itself (a bug of ours keeps its traceback).

  ml_collections re-raises a TypeError or ValueError of a config file as a new exception that
  embeds the traceback as text; the original is its context, so the whole chain is searched.
  """
  files = {os.path.normpath(os.path.abspath(p)) for p in paths} | _loaded_files
  chain = _chain(error)
  if any(isinstance(exc, errors.UserError) for exc in chain):
    return None
  for exc in chain:
    frames = traceback.extract_tb(exc.__traceback__)
    where = None
    if isinstance(exc, SyntaxError) and exc.filename:
      where = (os.path.normpath(os.path.abspath(exc.filename)), exc.lineno)
    else:
      in_files = [f for f in frames if os.path.normpath(os.path.abspath(f.filename)) in files]
      if in_files:
        where = (in_files[-1].filename, in_files[-1].lineno)
        innermost = os.path.abspath(frames[-1].filename)
        if innermost.startswith(_PACKAGE_DIR + os.sep) and innermost not in files:
          return None  # raised in our code (called from the file): our bug, keep the traceback
    if where is None or os.path.normpath(os.path.abspath(where[0])) not in files:
      continue
    message = exc.msg if isinstance(exc, SyntaxError) else errors.without_traceback(str(exc))
    shown = os.path.relpath(where[0])
    shown = where[0] if shown.startswith("..") else shown
    return errors.ConfigError(
        f"{shown}, line {where[1]}: {type(exc).__name__}: {message.strip()}; "
        "fix the file and rerun."
    )
  return None


def _chain(error: BaseException) -> list[BaseException]:
  """`error` and the exceptions it was raised from or while handling, outermost first."""
  chain, seen = [], error
  while seen is not None and seen not in chain:
    chain.append(seen)
    seen = seen.__cause__ or seen.__context__
  return chain


def _raised_in_package(error: BaseException) -> bool:
  """Whether `error`'s innermost frame is in vit_jax (not in a config file `load_file` loaded)."""
  frames = traceback.extract_tb(error.__traceback__)
  if not frames:
    return False
  innermost = os.path.normpath(os.path.abspath(frames[-1].filename))
  return innermost.startswith(_PACKAGE_DIR + os.sep) and innermost not in _loaded_files


def is_digits(text: str) -> bool:
  """Whether `text` is a whole number in ASCII digits ("8000"): a step, a count, a checkpoint
  folder's name. `str.isdigit` alone also takes '²' (which int() refuses) and '٣' (which int()
  reads as 3)."""
  return text.isascii() and text.isdigit()


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
    wrong = errors.ConfigError(
        f"Config argument {key}={raw!r} must be {_TYPE_NAMES[type(default)]}."
    )
    try:
      parsed = ast.literal_eval(raw)
    except (ValueError, SyntaxError) as e:
      raise wrong from e
    # Only a value that converts exactly: 2.5 for an int would otherwise train with 2, unsaid.
    if isinstance(parsed, bool) or not isinstance(parsed, (int, float)):
      raise wrong
    if type(default)(parsed) != parsed:
      raise wrong
    return type(default)(parsed)
  return raw


_TYPE_NAMES = {int: "an int", float: "a float"}


def prepare_command(*, output: bool = False, dataset: str | None = None, data_dir=None) -> str:
  """The command that prepares this run's data: `python -m vit_jax.prepare` with this command
  line's --config flags (those of vit_jax.main or vit_jax.evaluate), writing a token store to DIR
  with `output`. Outside such a command (no --config flags): a config naming `dataset` and
  `data_dir`."""
  given = [a for a in sys.argv[1:] if a.startswith("--config=") or a.startswith("--config.")]
  given = [a for a in given if not a.startswith("--config.token_store=")]
  if not given:
    given = [f"--config=configs/vit.py:dataset={dataset}" if dataset else "--config=CONFIG"]
    given += [f"--config.data_dir={data_dir}"] if data_dir else []
  return shlex.join(
      ["python", "-m", "vit_jax.prepare", *given, *(["--output=DIR"] if output else [])]
  )


class _OptionalParser(flags.ArgumentParser):
  """absl's parser of a type, plus "None" (or "none"): ml_collections parses an int, float or
  bool key with absl's own parser, which refuses "None" even for a key declared
  `placeholder(int)`. Which keys may be None is `refuse_none`'s to say."""

  def __init__(self, parser: flags.ArgumentParser, name: str):
    self.parser, self.name = parser, name

  def parse(self, argument):
    if isinstance(argument, str) and argument.strip() in ("None", "none"):
      return None
    try:
      return self.parser.parse(argument)
    except ValueError as e:  # absl's own says "invalid literal for int() with base 10"
      raise ValueError(f"{argument!r} is not {self.name}") from e

  def flag_type(self):
    return self.parser.flag_type()


for _type, _parser in ((int, flags.IntegerParser()), (float, flags.FloatParser()),
                       (bool, flags.BooleanParser())):  # fmt: skip
  config_flags.register_flag_parser_for_type(
      _type, _OptionalParser(_parser, {**_TYPE_NAMES, bool: "a boolean"}[_type])
  )


def refuse_none(config, argv) -> None:
  """A ConfigError for a `--config.KEY=None` whose key is not optional. An optional key is one
  a config declares with `placeholder(TYPE)` (a FieldReference, so its type survives a None);
  a plain key set to None would fail later, far from the flag. A string key takes "none" as the
  string it is (`model.biases=none`, `model.rope_scaling=none`)."""
  for arg in argv[1:]:
    key, sep, value = arg.partition("=")
    if not (sep and key.startswith("--config.") and value.strip() in ("None", "none")):
      continue
    *parents, last = key[len("--config.") :].split(".")
    node = config
    for part in parents:
      node = node[part]
    declared = dict(node.items(preserve_field_references=True)).get(last)
    if isinstance(node[last], str) and value.strip() == "none":
      continue
    if not isinstance(declared, config_dict.FieldReference):
      raise errors.ConfigError(
          f"{key}=None: {key[len('--config.'):]} is not optional; give it a value."
      )


def parse_command_line(flag_values, argv):
  """absl parsing of a command with --config, but a missing config file, a bad flag, an unknown
  config key or None for a key that is not optional is one clear line and exit code 2."""
  for arg in argv[1:]:  # config_flags only reports a missing file later, with a traceback
    if arg.startswith("--config=") and not os.path.isfile(arg[len("--config=") :].split(":")[0]):
      print(
          f"error: config file {arg[len('--config='):].split(':')[0]!r} does not exist; pass "
          "one of configs/*.py, e.g. --config=configs/vit.py.",
          file=sys.stderr,
      )
      sys.exit(2)
  config_files = [
      a[len("--config=") :].split(":")[0] for a in argv[1:] if a.startswith("--config=")
  ]
  try:
    remaining = flag_values(argv)
  except Exception as e:  # pylint: disable=broad-except  (sorted below: the user's, or ours)
    in_file = user_code_error(e, *config_files)
    if in_file is not None:
      print(f"error: {in_file}", file=sys.stderr)
      sys.exit(2)
    chain = _chain(e)
    ours = next((x for x in chain if isinstance(x, errors.UserError)), None)
    if ours is not None:  # raised on purpose: its message names the fix
      print(f"error: {errors.without_traceback(str(ours))}", file=sys.stderr)
      sys.exit(2)
    if isinstance(e, flags.IllegalFlagValueError):  # a known key, a bad value: absl names both
      print(f"error: {errors.without_traceback(str(e))}", file=sys.stderr)
      sys.exit(2)
    if any(_raised_in_package(x) for x in chain):
      raise  # a bug of ours, even when a config file called it: keep the traceback
    if not isinstance(e, (flags.Error, ValueError, KeyError, AttributeError, TypeError)):
      raise
    print(f"error: {errors.without_traceback(str(e))}", file=sys.stderr)
    print(
        "Check the --config.* key names against the config file (they are case-sensitive).",
        file=sys.stderr,
    )
    sys.exit(2)
  try:
    refuse_none(flag_values["config"].value, argv)
  except errors.ConfigError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  return remaining
