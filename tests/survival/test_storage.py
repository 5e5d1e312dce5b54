"""When the file system refuses a write (full, over quota, read-only): one error line naming the
path, the cause and the fix, exit code 2, and nothing saved lost.

The end-to-end tests use a real small tmpfs (they need the right to mount one, as root on Linux);
the mapping from an OS error to the message is also checked in-process, which runs anywhere.
"""

import contextlib
import errno
import os
import shutil
import subprocess

import numpy as np
import pytest

from tests import helpers
from tests.survival import conftest
from tests.survival import test_bad_command_input
from vit_jax import errors
from vit_jax import interop

# What orbax raised (through TensorStore) when a checkpoint save hit a full tmpfs.
TENSORSTORE_FULL = (
    'RESOURCE_EXHAUSTED: Error writing local file "/d/w/checkpoints/4.orbax-checkpoint-tmp/state/'
    'd/abc": Failed writing: "/d/w/checkpoints/4.orbax-checkpoint-tmp/state/d/abc.__lock": Failed '
    "to write 14235 bytes to file 15: No space left on device [os_error_code='28']"
)


@pytest.mark.parametrize(
    "exc, path, cause",
    [
        (
            OSError(errno.ENOSPC, "No space left on device", "/d/metrics.jsonl"),
            "/d/metrics.jsonl",
            "is full",
        ),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "/d/w", "over its quota"),
        (OSError(errno.EROFS, "Read-only file system", "/ro/x.npz"), "/ro/x.npz", "read-only"),
        (PermissionError(errno.EACCES, "Permission denied", "/p/f"), "/p/f", "does not let"),
        (ValueError(TENSORSTORE_FULL), "/d/w/checkpoints/4.orbax-checkpoint-tmp", "is full"),
        # A bucket's refusals: gcsfs's words for a 403 and a 404, and TensorStore's.
        (
            OSError("Forbidden: http://h/upload/storage/v1/b/b/o?name=w%2Fx\nno access"),
            "/d/w",
            "does not let this user write there",
        ),
        (FileNotFoundError("http://h/upload/storage/v1/b/b/o?name=w"), "/d/w", "no longer holds"),
        (
            ValueError("PERMISSION_DENIED: Error writing x [http_response_code='403']"),
            "/d/w",
            "does not let this user write there",
        ),
    ],
)
def test_refused_writes_name_the_path_and_the_cause(exc, path, cause):
  problem = errors.storage_error(exc, where="/d/w", then="rerun")
  assert isinstance(problem, errors.UserError)
  assert path in str(problem) and cause in str(problem) and "\n" not in str(problem)


def test_the_cause_is_found_in_the_chain_and_other_errors_are_not_ours():
  try:
    try:
      raise ValueError(TENSORSTORE_FULL)
    except ValueError as inner:
      raise RuntimeError("while closing the checkpoint manager") from inner
  except RuntimeError as e:
    assert errors.storage_cause(e)[0] == errno.ENOSPC
  assert errors.storage_error(FileNotFoundError(errno.ENOENT, "gone", "/x")) is None
  assert errors.storage_error(ValueError("RESOURCE_EXHAUSTED: out of memory")) is None


@contextlib.contextmanager
def tmpfs(path, size):
  """A tmpfs of `size` bytes mounted at `path` (skips the test where mounting is not allowed)."""
  os.makedirs(path, exist_ok=True)
  mounted = subprocess.run(
      ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
  )
  if mounted.returncode != 0:
    pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
  try:
    yield path
  finally:
    subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path, options):
  subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def used_bytes(path) -> int:
  st = os.statvfs(path)
  return (st.f_blocks - st.f_bfree) * st.f_frsize


def test_disk_full_during_a_save_resumes_bit_identical(tmp_path, trained, digits_dir):
  """The save of step 4 finds the disk full: exit 2 naming the last good step (2); once space
  is freed the same command resumes from step 2 and ends as the straight run did."""
  with tmpfs(tmp_path / "disk", 64 << 20) as disk:
    # The space the run needs up to step 2, and the size of one more checkpoint.
    shutil.copytree(trained, disk / "probe")
    for step in ("4", "6"):
      shutil.rmtree(disk / "probe" / "checkpoints" / step)
    base = used_bytes(disk)
    shutil.copytree(trained / "checkpoints" / "4", disk / "one_step")
    step_size = used_bytes(disk) - base
    shutil.rmtree(disk / "probe")
    shutil.rmtree(disk / "one_step")
    remount(disk, f"size={base + step_size // 2}")

    workdir = disk / "w"
    full = helpers.run(conftest.tiny_command(workdir, digits_dir))
    assert full.returncode == 2, full.stderr[-3000:]
    conftest.assert_one_line_error(full.stderr, str(workdir), "is full", "resume from step 2")
    assert sorted(os.listdir(workdir / "checkpoints")) == ["2"]  # the partial step is gone

    remount(disk, f"size={64 << 20}")
    resumed = helpers.run(conftest.tiny_command(workdir, digits_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "at step 2" in resumed.stdout
    straight = interop.read_params(str(trained / "checkpoints" / "6"))
    again = interop.read_params(str(workdir / "checkpoints" / "6"))
    for key in straight:
      np.testing.assert_array_equal(straight[key], again[key], err_msg=key)


def test_convert_to_a_read_only_file_system(tmp_path, trained):
  with tmpfs(tmp_path / "ro", 1 << 20) as ro:
    remount(ro, "ro")
    result = test_bad_command_input.run_module(
        "vit_jax.convert", str(trained), str(ro / "out.npz"), "--to", "npz"
    )
    assert result.returncode == 2, result.stderr[-3000:]
    conftest.assert_one_line_error(result.stderr, "out.npz", "read-only")


def test_sweep_collect_to_a_full_disk(tmp_path):
  """collect's CSVs cannot be written: one line, and the runs' workdirs are untouched."""
  # pylint: disable=g-import-not-at-top
  from tests.sweep import helpers as sweep_helpers
  from vit_jax.sweep import runner
  from vit_jax.sweep import spec

  sweep = {"config": "configs/vit.py:runlocal", "runs": [{"seed": 0}], "name": "s{seed}"}
  sweep_file = sweep_helpers.write_sweep(tmp_path / "sweep.py", sweep)
  root = tmp_path / "root"
  runner.check_root(spec.expand(sweep), str(root), create=True)
  sweep_helpers.fake_run(
      root / "s0",
      config={
          "model": {"name": "vit"},
          "train_split": "train",
          "batch_size": 8,
          "seed": 0,
          "total_steps": 10,
          "optimizer": {"lr": 1e-3},
      },
      info={"num_params": 10, "train_flops_per_example": 1.0, "train_examples": 80},
      rows=[{"step": 10, "eval/accuracy": 0.5, "eval/loss": 1.0, "elapsed_s": 1.0}],
  )
  before = conftest.snapshot(root)
  with tmpfs(tmp_path / "full", 64 << 10) as full:
    with open(full / "filler", "wb") as f:  # fill it: the CSVs get no room
      with contextlib.suppress(OSError):
        f.write(b"x" * (1 << 20))
    result = sweep_helpers.cli("collect", sweep_file, f"--root={root}", f"--out={full}")
  assert result.returncode == 2, result.stderr[-3000:]
  conftest.assert_one_line_error(result.stderr, "is full")
  assert conftest.snapshot(root) == before
