"""One writer per workdir: a second trainer (or sweep) on a held workdir is refused within
seconds, naming the holder; a holder killed with SIGKILL blocks nothing."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import helpers
from tests.survival import conftest
from vit_jax import errors
from vit_jax import workdir as workdir_lib


def test_lock_names_its_holder_and_is_dropped_with_it(tmp_path):
  holder = subprocess.Popen(
      [
          sys.executable,
          "-c",
          f"from vit_jax import workdir; import time; workdir.lock({str(tmp_path)!r}); "
          "print('held', flush=True); time.sleep(120)",
      ],
      env=helpers.env(),
      cwd=helpers.ROOT,
      stdout=subprocess.PIPE,
      text=True,
  )
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(errors.WorkdirError, match=f"in use by pid {holder.pid} on host"):
      workdir_lib.lock(str(tmp_path))
  finally:
    holder.kill()  # SIGKILL: no chance to clean up
    holder.wait()
  assert (tmp_path / workdir_lib.LOCK_FILE).exists()
  workdir_lib.lock(str(tmp_path))  # the dead holder's file blocks nothing
  workdir_lib.unlock(str(tmp_path))
  assert not (tmp_path / workdir_lib.LOCK_FILE).exists()  # a clean release leaves nothing


def test_a_second_trainer_is_refused_and_a_killed_one_blocks_nothing(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  slow = conftest.tiny_command(workdir, digits_dir, "--config.total_steps=100000")
  holder = subprocess.Popen(
      slow, env=helpers.env(), cwd=helpers.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
  )
  try:
    deadline = time.time() + 300
    while not (workdir / "metrics.jsonl").exists() or not os.path.getsize(
        workdir / "metrics.jsonl"
    ):
      assert holder.poll() is None and time.time() < deadline, "the holder did not start training"
      time.sleep(0.1)
    config_before = (workdir / "config.json").read_text()
    second = helpers.run(conftest.tiny_command(workdir, digits_dir, "--config.optimizer.lr=0.1"))
    assert second.returncode == 2, second.stderr[-3000:]
    conftest.assert_one_line_error(second.stderr, "in use by", f"pid {holder.pid}")
    assert "step" not in second.stdout  # refused before it built, compiled or trained anything
    assert (workdir / "config.json").read_text() == config_before  # its lr=0.1 never landed
    assert holder.poll() is None  # the holder trains on
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=60)
  assert (workdir / workdir_lib.LOCK_FILE).exists()  # left by the killed holder
  rerun = helpers.run(conftest.tiny_command(workdir, digits_dir))
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert not (workdir / workdir_lib.LOCK_FILE).exists()


def test_a_second_sweep_on_a_held_root_is_refused(tmp_path):
  # pylint: disable=g-import-not-at-top
  from tests.sweep import helpers as sweep_helpers
  from vit_jax.sweep import runner
  from vit_jax.sweep import spec

  sweep = {"config": "configs/vit.py:runlocal", "runs": [{"seed": 0}], "name": "s{seed}"}
  sweep_file = sweep_helpers.write_sweep(tmp_path / "sweep.py", sweep)
  root = tmp_path / "root"
  runner.check_root(spec.expand(sweep), str(root), create=True)
  workdir_lib.lock(str(root))  # this process plays the running sweep
  try:
    result = sweep_helpers.cli("run", sweep_file, f"--root={root}")
  finally:
    workdir_lib.unlock(str(root))
  assert result.returncode == 2, result.stderr[-3000:]
  conftest.assert_one_line_error(result.stderr, "--root", "in use by")
  assert not (root / "s0").exists()
