"""The loop never waits for the devices or the other hosts per step: only at log, save and eval
points. Counted with spies on the real functions in real runs (one process, and two)."""

import collections
import json
import os
import sys

import jax
from jax.experimental import multihost_utils
import numpy as np
import pytest

from tests import helpers
from vit_jax.training import host_input
from vit_jax.training import mesh as mesh_lib
from vit_jax.training import train

# 12 steps: log at 4 and 8, save at 6 and 12, eval at 12: host syncs at steps 4, 6, 8 and 12.
CADENCE = dict(total_steps=12, log_every=4, checkpoint_every=6, eval_every=12)
SYNC_STEPS = (4, 6, 8, 12)
LOOP_FILE = "/vit_jax/training/train.py"  # its loop's `done`: the steps finished


def loop_step(frame):
  """The step the trainer's loop had finished (`done`) when `frame`'s call was made; None
  outside the loop (setup, or another thread such as orbax's)."""
  while frame is not None:
    if frame.f_code.co_filename.endswith(LOOP_FILE) and "done" in frame.f_locals:
      return frame.f_locals["done"]
    frame = frame.f_back
  return None


def test_one_process_waits_only_at_log_save_and_eval_points(tmp_path, monkeypatch):
  gets = collections.Counter()  # (module that asked, loop step) -> calls
  allgathers = []
  device_get, allgather = jax.device_get, multihost_utils.process_allgather

  def spy_get(x):
    caller = sys._getframe(1)
    gets[os.path.basename(caller.f_code.co_filename), loop_step(caller)] += 1
    return device_get(x)

  def spy_allgather(*args, **kwargs):
    allgathers.append(loop_step(sys._getframe(1)))
    return allgather(*args, **kwargs)

  monkeypatch.setattr(jax, "device_get", spy_get)
  monkeypatch.setattr(multihost_utils, "process_allgather", spy_allgather)
  config = helpers.vit_config("runlocal", **CADENCE)
  train.train_and_evaluate(config, str(tmp_path))
  # The loop fetches its pending metrics once at each sync point; the evaluators (the test
  # split's sums, batch by batch, added on the host in float64; the few-shot probe's features)
  # read the devices only at the last step.
  assert {k: v for k, v in gets.items() if k[0] == "train.py"} == {
      ("train.py", s): 1 for s in SYNC_STEPS
  }
  assert {step for _, step in gets} <= set(SYNC_STEPS), gets
  assert gets["base.py", 12] == config.eval_max_batches  # each eval batch's sums
  assert allgathers == []  # one process: nothing to agree on


SPY = r"""
import atexit, collections, json, os, runpy, sys
from jax.experimental import multihost_utils
calls = collections.Counter()
allgather = multihost_utils.process_allgather
def spy(*args, **kwargs):
  # Counted by the module of ours that asked (directly or via orbax) and the loop's step then.
  # An all-gather on an evaluator's behalf is named by the evaluator too: host_input.py/base.py.
  frame, modules, step = sys._getframe(1), [], None
  while frame is not None:
    name = frame.f_code.co_filename
    if "/vit_jax/" in name and (not modules or "/vit_jax/evaluate/" in name):
      modules.append(os.path.basename(name))
    if name.endswith("/vit_jax/training/train.py") and "done" in frame.f_locals:
      step = frame.f_locals["done"]
    frame = frame.f_back
  calls[("/".join(modules[:2]) or "elsewhere") + f"@{step}"] += 1
  return allgather(*args, **kwargs)
multihost_utils.process_allgather = spy
atexit.register(lambda: print("ALLGATHER" + json.dumps(calls), flush=True))
sys.argv = ["vit_jax.main"] + sys.argv[1:]
runpy.run_module("vit_jax.main", run_name="__main__")
"""


@pytest.mark.multiprocess
def test_two_processes_agree_only_at_log_save_and_eval_points(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  command = [
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
  out = helpers.run(helpers.launch_local(2, 2, tmp_path / "logs", command), timeout=1500)
  assert out.returncode == 0, out.stderr[-3000:]
  line = next(x for x in out.stdout.splitlines() if x.startswith("ALLGATHER"))
  calls = json.loads(line[len("ALLGATHER") :])
  steps = collections.Counter()
  for key, count in calls.items():
    module, step = key.split("@")
    steps[step] += count
    if step == "None":  # setup, or orbax's own threads: its barriers, none from the loop
      assert module in ("checkpoint.py", "elsewhere"), calls
  # Inside the loop, all-gathers happen only at the sync points: never per step.
  assert set(steps) <= {"None", *map(str, SYNC_STEPS)}, calls
  # So a preemption is agreed on by JAX's runtime in the background, not by a per-step all-gather.
  # The eval pass's "any data left?" (2 batches + the end), at the last step only; the few-shot
  # probe asks the same of each of its passes over the data, also at the last step only.
  assert calls.pop("host_input.py/base.py@12") == 3, calls
  assert calls.pop("host_input.py/fewshot.py@12", 0) > 0, calls
  assert not [k for k in calls if k.startswith("host_input.py")], calls


def test_batches_are_on_the_devices_two_steps_ahead(monkeypatch):
  mesh = mesh_lib.make_mesh("data:-1")
  made_global = []
  global_batch = mesh_lib.global_batch

  def spy(batch, mesh, batch_size):
    made_global.append(int(batch["x"][0, 0]))
    return global_batch(batch, mesh, batch_size)

  monkeypatch.setattr(mesh_lib, "global_batch", spy)
  batches = ({"x": np.full((2, 3), i, np.float32)} for i in range(6))
  stream = host_input.prefetch_to_mesh(batches, mesh, batch_size=2, size=2)
  first = next(stream)
  assert isinstance(first["x"], jax.Array) and float(first["x"][0, 0]) == 0
  assert made_global == [0, 1, 2]  # batches 1 and 2 already sent to the devices
  assert [float(b["x"][0, 0]) for b in stream] == [1, 2, 3, 4, 5]
