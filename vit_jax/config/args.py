"""Parses the `k=v,k=v` argument of `--config=configs/X.py:ARGS` against a config's defaults.

The defaults configs share (training schema, data, tokenizer) are in vit_jax/config/defaults.py.
"""

import ast

from vit_jax import errors


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
