"""Test-only peers (torch, transformers, timm): skipped locally when missing, a failure in CI.

    torch = peers.require("torch")  # at module level, or inside one test

CI runs `CI=true bash .ci/run`: there a missing peer means the interop tests would silently not run,
so it fails the test, naming the package and the install command.
"""

import importlib
import os
import types

import pytest

INSTALL = "pip install -e '.[test]'  (or: bash scripts/setup.sh test)"


def in_ci() -> bool:
  return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require(name: str) -> types.ModuleType:
  """The imported module `name`; if it does not import: fail under CI, else skip, saying why."""
  try:
    return importlib.import_module(name)
  except ImportError as e:  # also a package that is installed but broken (e.g. a bad wheel pair)
    reason = f"test peer {name!r} does not import ({e}); install the test extras: {INSTALL}"
    if in_ci():
      pytest.fail(f"CI needs every test peer: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
