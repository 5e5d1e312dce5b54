"""The loop never waits for the devices or the other hosts per step: only at log, save and eval
points. Counted with spies on the real functions in real runs (one process, and two)."""

import collections
import json
import os
import sys

import jax
from jax.experimental import multihost_utils
import numpy as np

from tests.training import helpers
from vit_jax.training import host_input
from vit_jax.training import mesh as mesh_lib
from vit_jax.training import train

# 12 steps: log at 4 and 8, save at 6 and 12, eval at 12: host syncs at steps 4, 6, 8 and 12.
CADENCE = dict(total_steps=12, log_every=4, checkpoint_every=6, eval_every=12)


def test_one_process_waits_only_at_log_save_and_eval_points(tmp_path, monkeypatch):
  calls = collections.Counter()
  device_get, allgather = jax.device_get, multihost_utils.process_allgather

  def spy_get(x):
    calls[os.path.basename(sys._getframe(1).f_code.co_filename)] += 1
    return device_get(x)

  def spy_allgather(*args, **kwargs):
    calls["process_allgather"] += 1
    return allgather(*args, **kwargs)

  monkeypatch.setattr(jax, "device_get", spy_get)
  monkeypatch.setattr(multihost_utils, "process_allgather", spy_allgather)
  config = helpers.vit_config("runlocal", **CADENCE)
  train.train_and_evaluate(config, str(tmp_path))
  # 4 fetches of the pending metrics, 1 of the eval sums; no all-gather at all.
  assert calls["train.py"] == 5
  assert calls["process_allgather"] == 0


SPY = r"""
import atexit, collections, json, os, runpy, sys
from jax.experimental import multihost_utils
calls = collections.Counter()
allgather = multihost_utils.process_allgather
def spy(*args, **kwargs):  # counted by the module of ours that asked (directly or via orbax)
  frame = sys._getframe(1)
  while frame is not None and "/vit_jax/" not in frame.f_code.co_filename:
    frame = frame.f_back
  calls[os.path.basename(frame.f_code.co_filename) if frame else "elsewhere"] += 1
  return allgather(*args, **kwargs)
multihost_utils.process_allgather = spy
atexit.register(lambda: print("ALLGATHER" + json.dumps(calls), flush=True))
sys.argv = ["vit_jax.main"] + sys.argv[1:]
runpy.run_module("vit_jax.main", run_name="__main__")
"""


def test_two_processes_agree_only_at_log_save_and_eval_points(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  cmd = [
      sys.executable,
      os.path.join(helpers.ROOT, "scripts", "launch_local.py"),
      "-n",
      "2",
      "--devices_per_process",
      "2",
      "--log_dir",
      str(tmp_path / "logs"),
      "--",
      sys.executable,
      "-c",
      SPY,
      f"--config={helpers.VIT_CONFIG}:runlocal",
      f"--workdir={workdir}",
      f"--config.data_dir={digits_dir}",
      "--config.input_shards=2",
      "--config.progress=lines",
      *[f"--config.{k}={v}" for k, v in CADENCE.items()],
  ]
  out = helpers.run(cmd, timeout=1500)
  assert out.returncode == 0, out.stderr[-3000:]
  line = next(x for x in out.stdout.splitlines() if x.startswith("ALLGATHER"))
  calls = json.loads(line[len("ALLGATHER") :])
  assert calls.pop("preemption.py") == 4  # steps 4, 6, 8, 12 of 12
  # The eval pass's "any data left?" (2 batches + the end), at step 12 only.
  assert calls.pop("host_input.py") == 3
  # The rest are orbax's barriers around opening the checkpoint directory and the saves (some
  # from its own threads, "elsewhere"); none from the loop itself.
  assert set(calls) <= {"checkpoint.py", "elsewhere"}, calls


def test_batches_are_on_the_devices_two_steps_ahead(monkeypatch):
  mesh = mesh_lib.make_mesh("data:-1")
  made_global = []
  global_batch = mesh_lib.global_batch

  def spy(batch, mesh):
    made_global.append(int(batch["x"][0, 0]))
    return global_batch(batch, mesh)

  monkeypatch.setattr(mesh_lib, "global_batch", spy)
  batches = ({"x": np.full((2, 3), i, np.float32)} for i in range(6))
  stream = host_input.prefetch_to_mesh(batches, mesh, size=2)
  first = next(stream)
  assert isinstance(first["x"], jax.Array) and float(first["x"][0, 0]) == 0
  assert made_global == [0, 1, 2]  # batches 1 and 2 already sent to the devices
  assert [float(b["x"][0, 0]) for b in stream] == [1, 2, 3, 4, 5]
