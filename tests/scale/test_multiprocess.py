"""Several local processes (CPU devices, gloo) behave like one process with as many devices: the
same losses on meshes whose groups span processes, resume, and failing together."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests import helpers
from vit_jax import interop

# --heartbeat_timeout=10 plus slack for a loaded 2-core machine.
FAIL_WITHIN_S = 120


def vit_args(workdir, data_dir, total_steps=20):
  return [
      "-m",
      "vit_jax.main",
      f"--config={helpers.VIT_CONFIG}:runlocal",
      f"--workdir={workdir}",
      f"--config.data_dir={data_dir}",
      "--config.input_shards=2",
      f"--config.total_steps={total_steps}",
      "--config.batch_size=16",
      "--config.checkpoint_every=10",
      "--config.eval_every=10",
      "--config.log_every=1",
      "--config.progress=lines",
      "--config.optimizer.warmup_steps=2",
  ]


def launch(workdir, data_dir, **kw):
  command = [sys.executable, *vit_args(workdir, data_dir, **kw)]
  return helpers.run(helpers.launch_local(2, 4, str(workdir) + "_logs", command))


def losses(workdir):
  return [r["train_loss"] for r in helpers.read_metrics(workdir) if "train_loss" in r]


@pytest.mark.multiprocess
@pytest.mark.slow
def test_two_processes_match_one_process_and_resume(tmp_path, digits_dir):
  one, two = tmp_path / "one", tmp_path / "two"
  single = helpers.run([sys.executable, *vit_args(one, digits_dir)], devices=8)
  assert single.returncode == 0, single.stderr[-3000:]
  multi = launch(two, digits_dir)
  assert multi.returncode == 0, multi.stderr[-3000:]
  assert len(losses(two)) == 20  # only process 0 logs
  np.testing.assert_allclose(losses(two), losses(one), rtol=2e-5)

  shutil.rmtree(two / "checkpoints" / "20")  # as if the job died after step 10's checkpoint
  again = launch(two, digits_dir)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "Resumed from" in again.stdout and "at step 10" in again.stdout
  a = interop.read_params(str(one / "checkpoints" / "20"))
  b = interop.read_params(str(two / "checkpoints" / "20"))
  # Reductions run in another order on 2x4 devices than on 8; Adam turns the float noise in
  # gradients that are zero in exact arithmetic (attention key biases) into ~1e-5 steps.
  for key in a:
    np.testing.assert_allclose(a[key], b[key], rtol=1e-3, atol=1e-4, err_msg=key)


@pytest.mark.multiprocess
@pytest.mark.slow
def test_killing_one_process_fails_the_other_in_bounded_time(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  port = 20000 + os.getpid() % 20000
  procs = []
  for i in range(2):
    env = helpers.env(devices=2)
    env.update(
        JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
        JAX_NUM_PROCESSES="2",
        JAX_PROCESS_ID=str(i),
        JAX_PLATFORMS="cpu",
    )
    args = vit_args(workdir, digits_dir, total_steps=100_000) + ["--heartbeat_timeout=10"]
    procs.append(
        subprocess.Popen(
            [sys.executable, *args],
            env=env,
            cwd=helpers.ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
  metrics = workdir / "metrics.jsonl"
  deadline = time.time() + 300
  while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size > 0):
    assert all(p.poll() is None for p in procs), procs[0].stderr.read()[-3000:]
    time.sleep(0.2)
  procs[1].send_signal(signal.SIGKILL)
  killed_at = time.time()
  try:
    # Wait well past the bound, so a survivor too slow to notice fails the assert below (with
    # its time) instead of timing out here.
    code = procs[0].wait(timeout=3 * FAIL_WITHIN_S)
    elapsed = time.time() - killed_at
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  assert code != 0
  assert elapsed < FAIL_WITHIN_S, f"the survivor took {elapsed:.0f} s to fail"


# Groups that span processes on 4 processes x 2 devices, one model on each (the rows each process
# reads come from one plan, vit_jax/training/host_input.py, whichever pipeline reads them):
# data:2,model:4 puts each model group on 2 processes, which must read the same rows, and the ViT's
# eval pass must still count each test example once; fsdp:4,model:2 spreads the batch and the GPT's
# parameters over the processes. (model:4 alone is the same mesh as data:2,model:4:
# tests/scale/test_sharding_rules.py checks that the data axis takes the devices left.)
SPANNING_MESHES = {"vit": "data:2,model:4", "gpt": "fsdp:4,model:2"}

TRAIN_ON_MESHES = r"""
import json, sys
import jax
from vit_jax.config import args
from vit_jax.training import mesh as mesh_lib
from vit_jax.training import train
jax.config.update("jax_threefry_partitionable", True)
mesh_lib.initialize()  # the launcher's processes; run alone, a single process
workdir, data_dir = sys.argv[1:3]
meshes = json.loads(sys.argv[3])  # model name -> mesh: one job trains each in turn, one start-up
results = {}
for name, arg in (("vit", "runlocal"), ("gpt", "runlocal,variant=nano")):
  mesh = meshes[name]
  config = args.load_file(f"configs/{name}.py").get_config(arg)
  config.update(dict(mesh=mesh, total_steps=3, log_every=1, eval_every=3, checkpoint_every=3,
                     batch_size=16, input_shards=4, progress="lines"))
  if name == "vit":
    config.data_dir = data_dir
    config.eval_max_batches = None  # the whole test split
    del config.evals["fewshot"]
  out_dir = f"{workdir}/{name}"
  result = train.train_and_evaluate(config, out_dir)
  if jax.process_index() == 0:
    losses = [json.loads(l)["train_loss"] for l in open(out_dir + "/metrics.jsonl")
              if "train_loss" in l]
    evals = {k: float(v) for k, v in result.items() if k.startswith("eval/")}
    results[name] = {"losses": losses, "eval": evals}
if jax.process_index() == 0:
  print("RESULT" + json.dumps(results), flush=True)
"""


def train_on_meshes(workdir, data_dir, meshes: dict, processes: int, devices_per_process: int):
  """Each model of `meshes` (name -> mesh) trained 3 steps and evaluated; name -> losses, evals."""
  script = [sys.executable, "-c", TRAIN_ON_MESHES, str(workdir), data_dir, json.dumps(meshes)]
  if processes > 1:
    script = helpers.launch_local(processes, devices_per_process, str(workdir) + "_logs", script)
  out = helpers.run(script, devices=devices_per_process, timeout=1800)
  assert out.returncode == 0, out.stderr[-4000:]
  line = next(row for row in out.stdout.splitlines() if row.startswith("RESULT"))
  return json.loads(line[len("RESULT") :])


@pytest.mark.multiprocess
def test_meshes_spanning_processes_match_one_device(tmp_path, digits_dir):
  # Every mesh gives one device's losses (tests/scale/test_meshes.py): one device is the reference.
  one = train_on_meshes(tmp_path / "one", digits_dir, {"vit": "data:1", "gpt": "data:1"}, 1, 1)
  spanning = train_on_meshes(tmp_path / "four", digits_dir, SPANNING_MESHES, 4, 2)
  for name, mesh in SPANNING_MESHES.items():
    expected, got = one[name], spanning[name]
    assert len(expected["losses"]) == 3
    np.testing.assert_allclose(got["losses"], expected["losses"], rtol=2e-5, err_msg=mesh)
    assert got["eval"].keys() == expected["eval"].keys()
    for key, value in expected["eval"].items():
      np.testing.assert_allclose(got["eval"][key], value, rtol=2e-5, err_msg=(mesh, key))
  assert spanning["vit"]["eval"]["eval/examples"] == 355  # the eval pass saw each example once


@pytest.mark.multiprocess
def test_a_mesh_the_input_cannot_feed_is_refused_before_any_step(tmp_path, digits_dir):
  # fsdp:4 gives each process its own quarter of the batch; 2 input shards are halves.
  workdir = tmp_path / "w"
  command = [sys.executable, *vit_args(workdir, digits_dir), "--config.mesh=fsdp:4,model:2"]
  out = helpers.run(helpers.launch_local(4, 2, tmp_path / "logs", command))
  assert out.returncode == 2, out.stderr[-3000:]
  errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
  assert errors == [
      "error: --config.input_shards=2 cannot feed the mesh fsdp:4,model:2 on 4 processes: an "
      "input shard (8 rows) would be split between processes whose devices hold different rows "
      "of the batch (slices of 4 rows); use --config.input_shards=4 (or a multiple of it that "
      "divides the batch), or leave it unset."
  ], out.stderr[-3000:]
  assert not workdir.exists()  # refused before anything was written
