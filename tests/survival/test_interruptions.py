"""Preemption (SIGTERM) of one process and of a multi-process job, a kill during a checkpoint
write, and non-finite losses."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests import helpers
from vit_jax import interop


def command(workdir, data_dir, *extra, total_steps=40, every=20):
  return helpers.main_command(
      workdir,
      "",
      f"--config.data_dir={data_dir}",
      f"--config.total_steps={total_steps}",
      "--config.batch_size=32",
      f"--config.checkpoint_every={every}",
      f"--config.eval_every={total_steps}",
      "--config.eval_max_batches=1",
      "--config.log_every=1",
      "--config.progress=lines",
      "--config.optimizer.warmup_steps=5",
      *extra,
  )


def wait_for(predicate, proc, timeout=300):
  deadline = time.time() + timeout
  while not predicate():
    assert proc.poll() is None, "the run ended before the event"
    assert time.time() < deadline, "timed out"
    time.sleep(0.005)


def rows(workdir):
  """The records a (running) trainer has written whole: it may be writing the last line."""
  try:
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
      lines = f.read().split("\n")[:-1]
  except FileNotFoundError:
    return []
  return [json.loads(line) for line in lines]


# The one-process runs: one block is enough to stop, save and resume (a third less time).
ONE_BLOCK = "--config.model.depth=1"


def preempt_and_resume(workdir, data_dir) -> int:
  """SIGTERM after step 7: the run saves the step it is at and exits 0; the same command resumes
  from that step and finishes. Returns the step."""
  proc = subprocess.Popen(
      command(workdir, data_dir, ONE_BLOCK),
      env=helpers.env(),
      cwd=helpers.ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
  )
  wait_for(lambda: any(r.get("step", 0) >= 7 for r in rows(workdir)), proc)
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=300)
  assert proc.returncode == 0, err[-3000:]
  assert "SIGTERM: saved a checkpoint at step" in out
  stopped = int(out.split("SIGTERM: saved a checkpoint at step ")[1].split(";")[0])
  assert 7 <= stopped < 40 and (workdir / "checkpoints" / str(stopped)).is_dir()
  resumed = helpers.run(command(workdir, data_dir, ONE_BLOCK))
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"at step {stopped}" in resumed.stdout
  assert (workdir / "checkpoints" / "40").is_dir()
  return stopped


def test_sigterm_checkpoints_and_resumes(tmp_path, digits_dir):
  preempt_and_resume(tmp_path / "preempted", digits_dir)


# That a resume ends as the straight run did, the default run checks after a SIGKILL (the bucket
# run), a damaged step and a full disk (tests/survival), and after a SIGTERM across processes
# (the multiprocess stage).
@pytest.mark.slow
def test_sigterm_then_resume_equals_straight_run(tmp_path, digits_dir):
  straight = helpers.run(command(tmp_path / "straight", digits_dir, ONE_BLOCK))
  assert straight.returncode == 0, straight.stderr[-3000:]
  workdir = tmp_path / "preempted"
  preempt_and_resume(workdir, digits_dir)
  a = interop.read_params(str(tmp_path / "straight" / "checkpoints" / "40"))
  b = interop.read_params(str(workdir / "checkpoints" / "40"))
  for key in a:
    np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-6, err_msg=key)


# The two-process runs' length: a notice sent after step 5 is seen when the runtime next polls
# (once a second), which must come well before the end: at 40 steps, the 35 after step 5 were
# once all taken before it.
TWO_PROCESS_STEPS = 120


def two_process_command(workdir, data_dir, progress):
  # Log, save and eval only at the end: a notice must not wait for any of them.
  return command(
      workdir,
      data_dir,
      f"--config.log_every={TWO_PROCESS_STEPS}",
      f"--config.progress={progress}",
      total_steps=TWO_PROCESS_STEPS,
      every=TWO_PROCESS_STEPS,
  )


def preempt_one_of_two(workdir, data_dir, out_dir, when, delay=0.0) -> tuple[int, int]:
  """Runs two processes, sends SIGTERM to the second `delay` seconds after `when(its stderr, the
  first's)`, checks that both exit 0 having saved the same step, and returns (that step, the
  step JAX's runtime had them agree on)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{s.getsockname()[1]}"
  procs, err = [], [out_dir / f"err_{i}" for i in range(2)]
  out = [out_dir / f"out_{i}" for i in range(2)]
  for i in range(2):
    env = helpers.env()
    # TF_CPP_MIN_LOG_LEVEL=0: JAX's runtime logs joining the job and the step the hosts agree on.
    env.update(
        JAX_COORDINATOR_ADDRESS=address,
        JAX_NUM_PROCESSES="2",
        JAX_PROCESS_ID=str(i),
        JAX_PLATFORMS="cpu",
        TF_CPP_MIN_LOG_LEVEL="0",
    )
    with open(out[i], "w") as stdout, open(err[i], "w") as stderr:
      procs.append(
          subprocess.Popen(
              two_process_command(workdir, data_dir, "bar"),  # the bar: steps as they are taken
              env=env,
              cwd=helpers.ROOT,
              stdout=stdout,
              stderr=stderr,
          )
      )
  try:
    wait_for(lambda: when(err[1].read_text(), err[0].read_text()), procs[0], timeout=600)
    time.sleep(delay)
    procs[1].send_signal(signal.SIGTERM)
    codes = [p.wait(timeout=300) for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  assert codes == [0, 0], err[0].read_text()[-3000:] + err[1].read_text()[-3000:]
  saved = [re.findall(r"SIGTERM: saved a checkpoint at step (\d+);", o.read_text()) for o in out]
  assert saved[0] == saved[1] and len(saved[0]) == 1, saved
  stopped = int(saved[0][0])
  assert (workdir / "checkpoints" / str(stopped)).is_dir()
  # Both at the step after the furthest step any host had reported when they agreed.
  agreed = [re.findall(r"Preemption sync counter is set: (\d+)", e.read_text()) for e in err]
  assert agreed[0] == agreed[1] and len(agreed[0]) == 1, agreed
  return stopped, int(agreed[0][0])


@pytest.mark.multiprocess
def test_sigterm_to_one_process_stops_both_at_the_next_step_and_resumes_exactly(
    tmp_path, digits_dir
):
  straight = tmp_path / "straight"
  launcher = [sys.executable, os.path.join(helpers.ROOT, "scripts", "launch_local.py"), "-n", "2"]
  logs = ["--log_dir", str(tmp_path / "logs"), "--"]
  out = helpers.run(launcher + logs + two_process_command(straight, digits_dir, "lines"))
  assert out.returncode == 0, out.stderr[-3000:]

  # In the loop, after step 5: the hosts stop one step after the furthest one.
  workdir = tmp_path / "preempted"
  steps = lambda bar: max(map(int, re.findall(rf"(\d+)/{TWO_PROCESS_STEPS}", bar)), default=0)
  stopped, agreed = preempt_one_of_two(
      workdir, digits_dir, tmp_path, lambda _, bar: steps(bar) >= 5
  )
  assert 5 < stopped < TWO_PROCESS_STEPS and agreed == stopped
  # While the resumed run sets up (a second after joining the job, when the runtime's notifier
  # has the signal): it stops after its first step.
  joined = lambda err, _: "Connected to distributed JAX controller" in err
  again, agreed = preempt_one_of_two(workdir, digits_dir, tmp_path, joined, delay=1.0)
  assert again == stopped + 1 and agreed == 1  # the runtime's count before the loop

  resumed = helpers.run(launcher + logs + two_process_command(workdir, digits_dir, "lines"))
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"at step {again}" in resumed.stdout
  a = interop.read_params(str(straight / "checkpoints" / str(TWO_PROCESS_STEPS)))
  b = interop.read_params(str(workdir / "checkpoints" / str(TWO_PROCESS_STEPS)))
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.slow
def test_sigkill_during_checkpoint_write_resumes_from_previous(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  ckpts = workdir / "checkpoints"
  # A wider model makes each save take long enough to be caught in the middle.
  cmd = command(
      workdir,
      digits_dir,
      "--config.model.width=512",
      "--config.model.mlp_dim=2048",
      "--config.keep_checkpoints=5",
      total_steps=30,
      every=3,
  )

  def finished():
    return sorted(int(d) for d in os.listdir(ckpts) if d.isdigit()) if ckpts.exists() else []

  def writing():
    return ckpts.exists() and any("tmp" in d for d in os.listdir(ckpts))

  proc = subprocess.Popen(
      cmd, env=helpers.env(), cwd=helpers.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
  )
  wait_for(lambda: finished() and writing(), proc)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  intact = finished()
  assert intact and any("tmp" in d for d in os.listdir(ckpts))
  again = helpers.run(cmd)
  assert again.returncode == 0, again.stderr[-3000:]
  assert f"at step {max(intact)}" in again.stdout
  assert 30 in finished()


@pytest.mark.slow
def test_nan_stops_naming_the_step_and_keeps_the_last_good_checkpoint(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  result = helpers.run(
      command(workdir, digits_dir, "--config.debug_nan_at_step=7", total_steps=20, every=5)
  )
  assert result.returncode == 3
  assert "Non-finite loss or gradients at step 7" in result.stderr
  saved = sorted(int(d) for d in os.listdir(workdir / "checkpoints") if d.isdigit())
  assert saved == [5]
  params = interop.read_params(str(workdir / "checkpoints" / "5"))
  assert all(np.isfinite(v).all() for v in params.values())


# tests/training/test_step_math.py checks skip and stop in-process, state and metrics included.
@pytest.mark.slow
def test_nan_skip_mode_skips_the_update(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  result = helpers.run(
      command(
          workdir,
          digits_dir,
          "--config.debug_nan_at_step=3",
          "--config.nonfinite=skip",
          total_steps=6,
          every=6,
      )
  )
  assert result.returncode == 0, result.stderr[-3000:]
  last = [r for r in helpers.read_metrics(workdir) if "train_loss" in r][-1]
  assert last["skipped_steps"] == 1 and np.isfinite(last["train_loss"])
