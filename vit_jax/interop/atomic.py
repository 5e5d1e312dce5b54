"""Writes a file or directory completely or not at all: into a temporary sibling, then renamed."""

import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def output_path(dst: str, overwrite: bool = False):
  """Yields a temporary path to write `dst` (a file or a directory) at; moves it into place only
  when the block finishes without an error. An existing `dst` is replaced only with `overwrite`."""
  dst = os.path.abspath(dst)
  if os.path.lexists(dst) and not overwrite:
    raise FileExistsError(f"{dst} already exists; pass overwrite=True (--overwrite) to replace it.")
  parent = os.path.dirname(dst)
  os.makedirs(parent, exist_ok=True)
  scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(dst)}.tmp-", dir=parent)
  try:
    staged = os.path.join(scratch, os.path.basename(dst))
    yield staged
    if not os.path.lexists(staged):
      raise RuntimeError(f"Nothing was written for {dst}.")
    if not os.path.lexists(dst):
      os.rename(staged, dst)
      return
    old = os.path.join(scratch, "replaced")
    os.rename(dst, old)  # aside, since a directory cannot be renamed onto another
    try:
      os.rename(staged, dst)
    except OSError:
      os.rename(old, dst)  # keep the old one rather than nothing
      raise
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
