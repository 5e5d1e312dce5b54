"""Workdirs, sweep roots and command inputs in a Cloud Storage bucket: the emulator of
tests/gcs_emulator.py stands in for the bucket (a real one needs none of its settings). Every
command runs in an empty folder, which must stay empty: nothing may land in a local `gs:` folder.
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests import helpers
from tests.survival import conftest
from tests.sweep import helpers as sweep_helpers
from vit_jax import interop
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.sweep import collect as collect_lib


def run_in(cwd, cmd, timeout=600):
  return subprocess.run(
      cmd, env=helpers.env(), cwd=cwd, capture_output=True, text=True, timeout=timeout
  )


def module_command(module, *args):
  return [sys.executable, "-m", module, *map(str, args)]


@dataclasses.dataclass
class BucketRun:
  workdir: str
  cwd: str
  rerun: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def bucket_run(gcs, digits_dir, tmp_path_factory):
  """The survival battery's tiny run with a gs:// workdir, killed with SIGKILL once its first
  checkpoint (step 2) is saved, and rerun to the end."""
  workdir = gcs.new_dir("run")
  cwd = tmp_path_factory.mktemp("cwd")
  first = subprocess.Popen(
      conftest.tiny_command(workdir, digits_dir),
      env=helpers.env(),
      cwd=cwd,
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
  )
  seen = []
  for line in first.stdout:  # CPU runs save in line: step 3 starts after step 2's checkpoint
    seen.append(line)
    if line.startswith("step 3/"):
      break
  first.send_signal(signal.SIGKILL)
  first.communicate(timeout=60)
  assert any(line.startswith("step 3/") for line in seen), "".join(seen)[-3000:]
  rerun = run_in(cwd, conftest.tiny_command(workdir, digits_dir))
  return BucketRun(workdir, str(cwd), rerun)


def test_a_killed_bucket_run_resumes_and_ends_as_a_local_run(bucket_run, trained, gcs):
  rerun = bucket_run.rerun
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert f"Resumed from {bucket_run.workdir}/checkpoints at step" in rerun.stdout
  resumed_at = int(rerun.stdout.split(" at step ")[1].split(".")[0])
  assert resumed_at in (2, 4), rerun.stdout[-3000:]
  # The killed holder's lock is taken over at once: it ran on this host and is gone.
  assert "took over the lock of pid" in rerun.stderr and "no longer running" in rerun.stderr
  straight = interop.read_params(str(trained / "checkpoints" / "6"))
  resumed = interop.read_params(bucket_run.workdir)
  for key in straight:
    np.testing.assert_array_equal(straight[key], resumed[key], err_msg=key)
  # Every file the same run writes locally is in the bucket, but those named by time or content
  # (TensorBoard's events; orbax's array data files under d/, as many as its writes batched:
  # each folder of them is there) and the compilation cache, which keeps only the compiles that
  # took longer than startup.CACHE_MIN_COMPILE_SECS on this machine's load at the time.
  in_bucket = set(gcs.objects(bucket_run.workdir))
  by_time_or_content = ("tensorboard/", workdir_lib.COMPILATION_CACHE_DIR + "/")
  named = lambda paths: {
      p for p in paths if not p.startswith(by_time_or_content) and "/d/" not in p
  }
  local = set(conftest.snapshot(trained))
  assert named(local) <= in_bucket, sorted(named(local) - in_bucket)
  data_files = lambda paths: {p.split("/d/")[0] for p in paths if "/d/" in p}
  assert data_files(local) == data_files(in_bucket)
  assert any(p.startswith("tensorboard/events.out.tfevents.") for p in in_bucket)
  assert "lock" not in in_bucket  # released at the end
  assert os.listdir(bucket_run.cwd) == []  # no local gs: folder, nothing else either


def test_commands_read_a_bucket_workdir(bucket_run, gcs, tmp_path):
  assert bucket_run.rerun.returncode == 0, bucket_run.rerun.stderr[-3000:]
  workdir, cwd = bucket_run.workdir, bucket_run.cwd
  evaluated = run_in(cwd, module_command("vit_jax.evaluate", f"--checkpoint={workdir}"))
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  rows = {tuple(line.split()[:2]): line.split()[2] for line in evaluated.stdout.splitlines()[2:]}
  logged = [r for r in bucket_metrics(gcs, workdir) if "eval/accuracy" in r][-1]
  assert float(rows["eval", "accuracy"]) == pytest.approx(logged["eval/accuracy"])  # as trained
  exported = f"{gcs.new_dir('export')}/params.npz"
  converted = run_in(cwd, module_command("vit_jax.convert", workdir, exported, "--to", "npz"))
  assert converted.returncode == 0, converted.stderr[-3000:]
  params = interop.read_params(workdir)
  npz = interop.load(exported).params
  # What --config.init_from=gs://... reads: the workdir's newest step, fitted to a fresh model.
  fitted = interop.flatten(interop.finetune_params(interop.unflatten(params), workdir)[0])
  for key in params:
    np.testing.assert_array_equal(params[key], npz[key], err_msg=key)
    np.testing.assert_array_equal(params[key], fitted[key], err_msg=key)
  assert os.listdir(cwd) == []


def bucket_metrics(gcs, workdir):
  return [json.loads(line) for line in gcs.objects(workdir)["metrics.jsonl"].splitlines()]


# The two-run sweep experiments/sweeps/smoke_cpu.py, cut to its first run.
SMOKE_SWEEP = helpers.repo_file("experiments/sweeps/smoke_cpu.py").get_sweep().to_dict()
SMOKE_SWEEP["runs"] = SMOKE_SWEEP["runs"][:1]


@pytest.fixture(scope="module")
def bucket_sweep(gcs, tmp_path_factory):
  """(sweep file, gs:// root, run, collect) of one tiny GPT sweep run and collected in a bucket."""
  folder = tmp_path_factory.mktemp("sweep")
  sweep_file = sweep_helpers.write_sweep(folder / "smoke.py", SMOKE_SWEEP)
  root = gcs.new_dir("sweep")
  ran = sweep_helpers.cli("run", sweep_file, f"--root={root}")
  collected = sweep_helpers.cli("collect", sweep_file, f"--root={root}")
  return sweep_file, root, ran, collected


def test_a_sweep_runs_and_collects_in_a_bucket(bucket_sweep, gcs):
  _, root, ran, collected = bucket_sweep
  assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
  assert collected.returncode == 0, collected.stderr[-3000:]
  objects = gcs.objects(root)
  assert {"sweep.json", "w16/config.json", "w16/metrics.jsonl", "runs.csv", "evals.csv"} <= set(
      objects
  )
  assert b"==== " in objects["w16/train.log"] and b"step 12/12" in objects["w16/train.log"]
  assert "lock" not in objects and "w16/lock" not in objects
  runs = collect_lib.read_csv(f"{root}/runs.csv")
  assert [(r["run"], r["status"], r["steps_done"]) for r in runs] == [("w16", "finished", 12)]
  assert not os.path.exists(os.path.join(helpers.ROOT, "gs:"))  # the CLI runs in the repo root


def test_generate_reads_a_bucket_workdir(bucket_sweep, tmp_path):
  _, root, ran, _ = bucket_sweep
  assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
  generated = run_in(
      tmp_path,
      module_command(
          "vit_jax.generate",
          f"--workdir={storage.join(root, 'w16')}",
          "--prompt=The ",
          "--max_new_tokens=8",
          "--temperature=0",
      ),
  )
  assert generated.returncode == 0, generated.stderr[-3000:]
  assert generated.stdout.startswith("The ") and os.listdir(tmp_path) == []


# The default run checks a second trainer's refusal on a local workdir
# (test_workdir_lock.py) and the lock itself in a bucket (tests/test_storage.py).
@pytest.mark.slow
def test_a_second_writer_of_a_bucket_workdir_is_refused(gcs, digits_dir, tmp_path):
  workdir = gcs.new_dir("held")
  holder = subprocess.Popen(
      conftest.tiny_command(workdir, digits_dir, "--config.total_steps=100000"),
      env=helpers.env(),
      cwd=tmp_path,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
  )
  try:
    deadline = time.time() + 300
    while "config.json" not in (before := gcs.objects(workdir)):  # written after the lock
      assert holder.poll() is None and time.time() < deadline, "the holder did not start"
      time.sleep(0.5)
    second = run_in(
        tmp_path, conftest.tiny_command(workdir, digits_dir, "--config.optimizer.lr=0.1")
    )
    assert second.returncode == 2, second.stderr[-3000:]
    conftest.assert_one_line_error(second.stderr, "in use by", f"pid {holder.pid}")
    after = gcs.objects(workdir)
    assert after["config.json"] == before["config.json"]  # its lr=0.1 never landed
    assert after["lock"] == before["lock"]  # still the holder's
    assert holder.poll() is None  # the holder trains on
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=60)


# Runs a module as `python -m` would, with gcsfs and google-cloud-storage unimportable (as without
# the gcs extra), by a finder placed first on sys.meta_path.
_WITHOUT_GCS_EXTRA = """
import importlib.abc, runpy, sys

class WithoutGcsExtra(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] == "gcsfs" or name.startswith("google.cloud.storage"):
      raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return None

sys.meta_path.insert(0, WithoutGcsExtra())
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "module, args",
    [
        ("vit_jax.main", [f"--config={helpers.VIT_CONFIG}:runlocal", "--workdir=gs://b/w"]),
        ("vit_jax.convert", ["gs://b/w", "out.npz", "--to", "npz"]),
        ("vit_jax.sweep", ["collect", "experiments/sweeps/smoke_cpu.py", "--root=gs://b/s"]),
    ],
)
def test_a_bucket_path_without_the_gcs_extra_names_the_install(module, args, tmp_path):
  result = subprocess.run(
      [sys.executable, "-c", _WITHOUT_GCS_EXTRA, module, *args],
      env=helpers.env(),
      cwd=helpers.ROOT if module == "vit_jax.sweep" else tmp_path,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert result.returncode == 2, result.stderr[-3000:]
  conftest.assert_one_line_error(result.stderr, "gs://b/", "gcs extra", "pip install -e .[gcs]")
  assert module == "vit_jax.sweep" or os.listdir(tmp_path) == []
