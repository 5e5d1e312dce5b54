"""The errors a user can cause and fix (bad config, missing data, wrong checkpoint or workdir).

Every command-line entry point prints a `UserError` as one line (`error: ...`) and exits with
code 2, with nothing written. Only these classes are dressed that way: a bare `ValueError` or
`KeyError` from inside our code is a bug and keeps its traceback.

The classes also derive from the builtin they replace (`ValueError`, `FileNotFoundError`), so
library callers that catch those keep working. This module imports nothing of ours, so every
module can raise from it.
"""

import re


class UserError(Exception):
  """Something the user gave us is wrong; the message names it and says how to fix it."""


class ConfigError(UserError, ValueError):
  """A config value is out of range, of an unknown choice, or inconsistent with another."""


class DataError(UserError, ValueError):
  """A dataset, split or data file is missing, empty, unreadable or too small."""


class MissingFileError(UserError, FileNotFoundError):
  """A file or directory the user named does not exist."""


class WorkdirError(UserError):
  """The workdir (or a convert destination) cannot be used without losing or mixing up work."""


class CheckpointError(UserError, ValueError):
  """No readable checkpoint: every step is damaged, or none was ever written."""


USER_ERRORS = (UserError,)


def without_traceback(message: str) -> str:
  """A message that embeds a traceback (ml_collections does that) reduced to its last line,
  without the exception's module path: `vit_jax.errors.ConfigError: X` -> `X`."""
  if "Traceback (most recent call last)" not in message:
    return message
  last = [line for line in message.splitlines() if line.strip()][-1]
  return re.sub(r"^[\w.]+(Error|Exception): ", "", last.strip())
