"""Saves that fail (vit_jax/checkpoint.py Checkpointer.save): a try that fails and is tried
again, a try whose commit landed before its error, a due save that fails and the next one after
it, a failure that outlasts the outage budget, a bucket's refusal, and a save that fails on one
process of a job. Every failure is injected at the storage (tests/faults.py); each case ends with
the newest finished step readable, nothing older deleted before a newer step is final, and
either success or one line.
"""

import os
import subprocess
import threading
import time

import jax
import numpy as np
import pytest

from tests import faults
from tests import helpers
from tests.survival import conftest
from vit_jax import checkpoint
from vit_jax import errors
from vit_jax import storage
from vit_jax.storage import outages
from vit_jax.training import job_end

STATE = {"w": np.arange(12, dtype=np.float32).reshape(3, 4)}
RECORD = {"model": {}, "param_shapes": {}}


@pytest.fixture
def budget(monkeypatch):
  """An outage budget of 8 s (the clients' and TensorStore's own retries: 2 s), this test's
  outages alone; the default budget again after."""
  monkeypatch.setattr(outages, "_away", {})
  outages.set_outage_budget(8)
  yield
  outages.set_outage_budget(outages.OUTAGE_S)
  checkpoint.tensorstore_retries()


@pytest.fixture(params=["local", "bucket"])
def where(request, tmp_path):
  """(workdir, fault target) on a local disk or in a bucket."""
  if request.param == "local":
    return str(tmp_path / "w"), request.getfixturevalue("monkeypatch")
  gcs = request.getfixturevalue("gcs")
  return gcs.new_dir("save"), gcs


def fail_step_writes(workdir, target, step: int, until_a_try_failed: bool = False):
  """A fault on the writes of `step`, of an outage: on a local disk its commit (orbax renames the
  finished folder into place) times out once, or every time; in a bucket its arrays' uploads
  (TensorStore's) answer 503 past TensorStore's own retries, until a try has failed (then the
  bucket answers again), or every time."""
  if not storage.is_remote(workdir):
    times = 1 if until_a_try_failed else 10**6
    return faults.inject(
        target, f"checkpoints/{step}", faults.TIMED_OUT, times=times, only=["rename"]
    )
  path = f"{workdir.split('//', 1)[1]}/checkpoints/{step}/state/ocdbt"
  fault = faults.inject(target, path, 503, times=10**6, only=["POST"])
  if until_a_try_failed:

    def heal_once_a_try_failed():
      while outages.outage(workdir) is None:  # set when a try fails (outages.ride_out)
        time.sleep(0.01)
      target.heal()

    threading.Thread(target=heal_once_a_try_failed, daemon=True).start()
  return fault


def saved_steps(workdir) -> list[int]:
  """The finished steps, newest first."""
  return [int(storage.name(d)) for d in checkpoint.step_dirs(workdir)]


def read(workdir, step: int) -> dict:
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), STATE)
  ckpt = checkpoint.Checkpointer(workdir, 2, 1, RECORD)
  try:
    return ckpt.restore(step, abstract)
  finally:
    ckpt.close()


def test_a_forced_save_whose_first_try_fails_is_tried_again(budget, where, capsys):
  workdir, target = where
  ckpt = checkpoint.Checkpointer(workdir, 2, 1, RECORD)
  ckpt.save(2, STATE)
  fault = fail_step_writes(workdir, target, 4, until_a_try_failed=True)
  assert ckpt.save(4, jax.tree.map(lambda x: x + 1, STATE), force=True)
  ckpt.close()
  err = capsys.readouterr().err
  assert fault.failed() >= 1 and "Traceback" not in err
  assert err.count("does not answer") == 1  # the first try failed; the next one saved
  assert saved_steps(workdir) == [4]  # step 2 deleted once 4 was final (keep=1)
  np.testing.assert_array_equal(read(workdir, 4)["w"], STATE["w"] + 1)


def test_a_save_whose_commit_landed_before_its_error_is_not_saved_again(budget, tmp_path, capsys):
  workdir = str(tmp_path / "w")
  ckpt = checkpoint.Checkpointer(workdir, 2, 1, RECORD)
  ckpt.save(2, STATE)
  # Step 4 is committed, then deleting step 2 (keep=1) times out: the try fails after its commit.
  fault = faults.inject(pytest.MonkeyPatch(), "checkpoints/2", faults.TIMED_OUT, only=["rmtree"])
  try:
    assert ckpt.save(4, jax.tree.map(lambda x: x + 1, STATE), force=True)
  finally:
    ckpt.close()
  assert fault.failed() == 1 and "does not answer" in capsys.readouterr().err
  np.testing.assert_array_equal(read(workdir, 4)["w"], STATE["w"] + 1)
  assert saved_steps(workdir)[0] == 4


def test_a_due_save_that_fails_is_left_to_the_next_one(budget, where, capsys):
  workdir, target = where
  ckpt = checkpoint.Checkpointer(workdir, 2, 1, RECORD)
  ckpt.save(2, STATE)
  fault = fail_step_writes(workdir, target, 4)
  assert not ckpt.save(4, STATE)
  assert fault.failed() >= 1
  err = capsys.readouterr().err
  assert "warning: checkpoint 4 not saved:" in err and "saved at step 6" in err
  assert saved_steps(workdir) == [2]  # nothing older deleted: 4 is not final
  assert ckpt.save(6, jax.tree.map(lambda x: x + 2, STATE))  # its unfinished files deleted first
  ckpt.close()
  assert saved_steps(workdir) == [6]
  assert not any("4" in name for name in storage.listdir(storage.join(workdir, "checkpoints")))
  np.testing.assert_array_equal(read(workdir, 6)["w"], STATE["w"] + 2)


def test_a_forced_save_past_the_budget_is_one_line_and_keeps_the_last_step(budget, where):
  workdir, target = where
  outages.set_outage_budget(4)
  ckpt = checkpoint.Checkpointer(workdir, 2, 1, RECORD)
  ckpt.save(2, STATE)
  fail_step_writes(workdir, target, 4)
  started = time.time()
  with pytest.raises(errors.StorageUnavailableError) as raised:
    ckpt.save(4, STATE, force=True)
  assert time.time() - started < 4 + 10  # the budget, and the last try's own retries
  message = str(raised.value)
  assert "\n" not in message and "while saving checkpoint 4" in message
  assert "--config.storage_outage_s=4" in message and "Nothing saved was lost" in message
  ckpt.close()
  assert saved_steps(workdir) == [2]
  np.testing.assert_array_equal(read(workdir, 2)["w"], STATE["w"])


def test_a_refused_save_ends_the_run_in_one_line_and_its_rerun_resumes(gcs, digits_dir, tmp_path):
  workdir = gcs.new_dir("refused")
  faults.inject(gcs, f"{workdir.split('//', 1)[1]}/checkpoints/6/", 403, times=10**6, only=["POST"])
  refused = helpers.run(conftest.tiny_command(workdir, digits_dir))
  assert refused.returncode == 2, refused.stderr[-3000:]
  conftest.assert_one_line_error(
      refused.stderr,
      f"cannot write {workdir}: the file system holding it does not let this user write there",
      f"rerun the same command to resume from step 4, the last good checkpoint ({workdir}/",
  )
  assert saved_steps(workdir) == [4, 2]
  gcs.heal()
  rerun = helpers.run(conftest.tiny_command(workdir, digits_dir))
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert f"Resumed from {workdir}/checkpoints at step 4." in rerun.stdout
  assert saved_steps(workdir) == [6, 4, 2]


def _process(index: int, port: int, command: list, log) -> subprocess.Popen:
  env = helpers.env()
  env.update(
      JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
      JAX_NUM_PROCESSES="2",
      JAX_PROCESS_ID=str(index),
      JAX_PLATFORMS="cpu",
  )
  return subprocess.Popen(
      command, env=env, cwd=helpers.ROOT, stdout=log, stderr=subprocess.STDOUT, text=True
  )


@pytest.mark.multiprocess
def test_a_save_failing_on_one_process_ends_both_in_one_line(gcs, digits_dir, tmp_path):
  """Process 1's arrays of the final step (4) cannot be written: it ends with one line once its
  writes' retries are spent, and process 0, waiting in the save's barrier for it, ends with the
  same line and code at once, instead of at the heartbeat's timeout or never."""
  workdir, budget = gcs.new_dir("job"), 6
  path = f"{workdir.split('//', 1)[1]}/checkpoints/4/state/ocdbt.process_1/"
  fault = faults.inject(gcs, path, 503, times=10**6, only=["POST"])
  command = conftest.tiny_command(
      workdir,
      digits_dir,
      "--config.total_steps=4",
      "--config.input_shards=2",
      f"--config.storage_outage_s={budget}",
      "--heartbeat_timeout=300",  # longer than the test: only their own ending may end them
  )
  port = 20000 + os.getpid() % 20000
  logs = [open(tmp_path / f"process_{i}.log", "w+") for i in range(2)]
  processes = [_process(i, port, command, logs[i]) for i in range(2)]
  ended = [None, None]
  deadline = time.time() + 400
  try:
    while None in ended and time.time() < deadline:
      for i, p in enumerate(processes):
        if ended[i] is None and p.poll() is not None:
          ended[i] = time.time()
      time.sleep(0.05)
  finally:
    for p in processes:
      if p.poll() is None:
        p.kill()
  outputs = []
  for log in logs:
    log.seek(0)
    outputs.append(log.read())
    log.close()
  assert None not in ended, "a process hung:\n" + outputs[0][-3000:] + outputs[1][-3000:]
  codes = [p.returncode for p in processes]
  assert codes == [errors.EXIT_STORAGE_UNAVAILABLE] * 2, outputs[0][-3000:] + outputs[1][-3000:]
  assert fault.failed() >= 1
  for output in outputs:
    assert output.count("error:") == 1 and "Traceback" not in output, output[-3000:]
  assert "did not answer (ValueError: ABORTED: Error writing" in outputs[1]
  assert "while saving checkpoint 4" in outputs[1]
  assert "error: process 1 of the job stopped: gs://vit-jax-test did not answer" in outputs[0]
  assert abs(ended[0] - ended[1]) < job_end.LEAVE_WAIT_S + 5  # together, not at a timeout
  assert saved_steps(workdir) == [2]  # the last finished step, which a rerun resumes from
