"""A bucket's bad minutes (vit_jax/storage/outages.py ride_out): the survival battery's tiny run
with a gs:// workdir whose bucket (tests/gcs_emulator.py Outage) goes away after a checkpoint,
during a checkpoint's write, for longer than the outage budget, and during start-up's reads.

Budgets of seconds stand in for minutes: the policy scales with --config.storage_outage_s (each
client's own retries last a quarter of it, so an outage of 6 s outlasts them at a budget of 22 s,
as a 150 s one outlasts the 120 s after which Google's client alone gave up).
"""

import dataclasses
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest

from tests import gcs_emulator
from tests import helpers
from tests.survival import conftest
from vit_jax import errors
from vit_jax import interop


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
  """An emulator of its own (the session's is shared with tests that must not see it go)."""
  with gcs_emulator.outage(tmp_path_factory.mktemp("bucket")) as emulator:
    yield emulator


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
  """One compilation cache for the module's runs: each compiles the tiny step once at most."""
  return f"--config.compilation_cache_dir={tmp_path_factory.mktemp('compiled')}"


class Watched:
  """A command run against `bucket`, its output read line by line as it comes, with the time
  since its start; `on_line(line)` may take the bucket down or bring it up."""

  def __init__(self, bucket, workdir, digits_dir, cwd, *extra, on_line=lambda line: None):
    command = conftest.tiny_command(workdir, digits_dir, *extra)
    env = {**helpers.env(), **bucket.env}
    self.started = time.time()
    process = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    self.stderr = []
    reader = threading.Thread(target=lambda: self.stderr.extend(process.stderr), daemon=True)
    reader.start()
    self.lines = []  # (seconds since the start, line) of stdout
    for line in process.stdout:
      self.lines.append((time.time() - self.started, line))
      on_line(line)
    self.returncode = process.wait(timeout=600)
    reader.join()
    self.stderr = "".join(self.stderr)
    self.stdout = "".join(line for _, line in self.lines)

  def when(self, prefix: str) -> float:
    return next(t for t, line in self.lines if line.startswith(prefix))


def up_in(bucket, seconds: float, times: dict) -> None:
  """Brings `bucket` back after `seconds`, noting when in `times["up"]`."""

  def up():
    bucket.up()
    times["up"] = time.time()

  threading.Timer(seconds, up).start()


def down_after_step_3(bucket, back_in: float | None, times: dict):
  """An `on_line` taking the bucket down once step 3 is logged (its checkpoint 2 saved)."""

  def on_line(line):
    if line.startswith("step 3/") and "down" not in times:
      bucket.down()
      times["down"] = time.time()
      if back_in is not None:
        up_in(bucket, back_in, times)

  return on_line


def local_copy(bucket, workdir, folder) -> str:
  """The workdir's objects written to a local folder (read there by orbax)."""
  for name, data in bucket.objects(workdir).items():
    path = os.path.join(folder, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
      f.write(data)
  return str(folder)


def assert_ends_as_a_straight_run(bucket, workdir, trained, tmp_path):
  """Params equal to the local straight run's; every step's train row once and in order, its
  eval row once; only finished checkpoints; the lock released."""
  objects = bucket.objects(workdir)
  rows = [json.loads(line) for line in objects["metrics.jsonl"].splitlines()]
  train = [r["step"] for r in rows if "train_loss" in r]
  assert train == list(range(1, 7)), train
  assert [r["step"] for r in rows if "eval/accuracy" in r] == [6]
  steps = {name.split("/")[1] for name in objects if name.startswith("checkpoints/")}
  finished = {s for s in steps if f"checkpoints/{s}/commit_success.txt" in objects}
  assert steps == finished and "6" in finished, sorted(steps)
  assert any(name.startswith("tensorboard/events.out.tfevents.") for name in objects)
  assert "lock" not in objects and "run_info.json" in objects
  straight = interop.read_params(str(trained / "checkpoints" / "6"))
  ours = interop.read_params(local_copy(bucket, workdir, tmp_path / "copy"))
  for key in straight:
    np.testing.assert_array_equal(straight[key], ours[key], err_msg=key)


def down_twice(bucket, workdir, back_in: float, times: dict):
  """An `on_line` taking the bucket down once step 3 is logged (its checkpoint 2 saved) and
  bringing it back after `back_in` s, to die at the final checkpoint's first array write (6,
  once its folder's first files are written and the waiting records sent) and come back
  `back_in` s after that."""

  def outages():
    time.sleep(back_in)
    bucket.up(die_on=f"{workdir.split('/', 3)[3]}/checkpoints/6/state/")
    times["up"] = time.time()
    while not bucket.is_down():
      time.sleep(0.05)
    times["died"] = time.time()
    time.sleep(back_in)
    bucket.up()
    times["up_again"] = time.time()

  def on_line(line):
    if line.startswith("step 3/") and "down" not in times:
      bucket.down()
      times["down"] = time.time()
      threading.Thread(target=outages, daemon=True).start()

  return on_line


@pytest.mark.parametrize(
    "outage_s, budget_s",
    [
        # Each outage outlasts the clients' own retries (a quarter of the budget). The final
        # save starts during the first (the tiny run trains its last steps in seconds) and
        # waits through both: the budget covers the two, and the emulator's restarts after each.
        (6, 22),
        pytest.param(150, 400, marks=pytest.mark.slow),  # minutes
    ],
)
def test_a_run_trains_on_through_an_outage_and_rides_out_another_in_its_final_save(
    bucket, compiled, digits_dir, trained, tmp_path, outage_s, budget_s
):
  workdir, times = bucket.new_dir("through"), {}
  run = Watched(
      bucket,
      workdir,
      digits_dir,
      tmp_path,
      compiled,
      f"--config.storage_outage_s={budget_s}",
      on_line=down_twice(bucket, workdir, outage_s, times),
  )
  assert run.returncode == 0, run.stderr[-3000:]
  assert "Traceback" not in run.stderr and "error:" not in run.stderr
  # Training went on while the bucket was away: the last step before it was back.
  assert run.started + run.when("step 6/6: grad_norm") < times["up"]
  assert "warning: checkpoint 4 not saved: gs://vit-jax-test does not answer" in run.stderr
  assert "died" in times, "the bucket did not die during checkpoint 6's write"
  assert "while saving checkpoint 6" in run.stderr  # its save waited for the bucket
  assert "answers again" in run.stdout
  assert_ends_as_a_straight_run(bucket, workdir, trained, tmp_path)


@dataclasses.dataclass
class PastTheBudget:
  workdir: str
  first: Watched  # down after step 3 for good
  down_for: float  # from the bucket going away to the first attempt's end
  rerun: Watched  # started while the bucket is away; it dies again at checkpoint 4's write
  times: dict


@pytest.fixture(scope="module")
def past_the_budget(bucket, compiled, digits_dir, tmp_path_factory):
  """A run whose bucket goes away after step 3 and stays away past its budget; then its rerun,
  started while the bucket is still away: its first request is reset and the bucket comes back
  3 s later (its start-up reads wait), to leave again at the first write of checkpoint 4 and come
  back 3 s after that."""
  workdir, cwd, times = bucket.new_dir("past"), tmp_path_factory.mktemp("cwd"), {}
  first = Watched(
      bucket,
      workdir,
      digits_dir,
      cwd,
      compiled,
      "--config.storage_outage_s=4",
      on_line=down_after_step_3(bucket, back_in=None, times=times),
  )
  down_for = time.time() - times["down"]
  times = {}

  def up_until_checkpoint_4():
    times["knocked"] = bucket.first_knock()
    time.sleep(3)
    bucket.up(die_on=f"{workdir.split('/', 3)[3]}/checkpoints/4/")
    times["up"] = time.time()
    while not bucket.is_down():
      time.sleep(0.05)
    times["died"] = time.time()
    up_in(bucket, 3, times)

  threading.Thread(target=up_until_checkpoint_4, daemon=True).start()
  rerun = Watched(bucket, workdir, digits_dir, cwd, compiled, "--config.storage_outage_s=20")
  return PastTheBudget(workdir, first, down_for, rerun, times)


def test_an_outage_past_the_budget_ends_in_one_line(past_the_budget):
  first = past_the_budget.first
  assert first.returncode == errors.EXIT_STORAGE_UNAVAILABLE, first.stderr[-3000:]
  conftest.assert_one_line_error(
      first.stderr, "gs://vit-jax-test did not answer for", "--config.storage_outage_s=4"
  )
  away = float(first.stderr.split("error: gs://vit-jax-test did not answer for ")[1].split()[0])
  assert 4 <= away < 10
  assert past_the_budget.down_for < 20  # it ended soon after the budget, not after a client's


def test_its_rerun_waits_for_the_bucket_at_start_and_at_a_checkpoint_and_resumes_exactly(
    past_the_budget, bucket, trained, tmp_path
):
  rerun, times, workdir = past_the_budget.rerun, past_the_budget.times, past_the_budget.workdir
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert "Traceback" not in rerun.stderr and "error:" not in rerun.stderr
  assert rerun.started < times["knocked"] < times["up"]  # its start-up reads waited for it
  assert "died" in times, "the bucket did not die during checkpoint 4's write"
  assert f"Resumed from {workdir}/checkpoints at step 2." in rerun.stdout
  assert "took over the lock of pid" in rerun.stderr  # the one the first attempt could not delete
  objects = bucket.objects(workdir)
  rows = [json.loads(line) for line in objects["metrics.jsonl"].splitlines()]
  assert [r["step"] for r in rows if "eval/accuracy" in r] == [6]
  train = [r["step"] for r in rows if "train_loss" in r]
  assert train[-4:] == [3, 4, 5, 6] and train[:2] == [1, 2], train  # resumed at 2
  steps = {name.split("/")[1] for name in objects if name.startswith("checkpoints/")}
  assert all(f"checkpoints/{s}/commit_success.txt" in objects for s in steps), sorted(steps)
  assert "lock" not in objects
  straight = interop.read_params(str(trained / "checkpoints" / "6"))
  ours = interop.read_params(local_copy(bucket, workdir, tmp_path / "copy"))
  for key in straight:
    np.testing.assert_array_equal(straight[key], ours[key], err_msg=key)
