"""Resume after SIGKILL ends with the same params as a straight run, without compiling the step
again, and with a lower goodput that counts the recomputed steps; 8 devices match 1 device."""

import json
import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs
from vit_jax import interop
from vit_jax.training import train


def fast_overrides(data_dir, total_steps=40):
  return [
      f"--config.data_dir={data_dir}",
      f"--config.total_steps={total_steps}",
      "--config.batch_size=32",
      "--config.checkpoint_every=20",
      "--config.eval_every=5",
      "--config.log_every=1",
      "--config.progress=lines",
      "--config.optimizer.warmup_steps=5",
  ]


def final_params(workdir, step):
  return interop.read_params(os.path.join(workdir, "checkpoints", str(step)))


def last_train_step(workdir) -> int:
  """The last step a (running) trainer logged, from its metrics file; 0 before any."""
  try:
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
      lines = f.read().split("\n")[:-1]  # whole lines: the trainer may be writing the last
  except FileNotFoundError:
    return 0
  steps = [json.loads(line)["step"] for line in lines if '"train_loss"' in line]
  return steps[-1] if steps else 0


def goodput(workdir) -> dict:
  with open(os.path.join(workdir, "run_info.json"), encoding="utf-8") as f:
    return json.load(f)["goodput"]


@pytest.mark.slow
def test_sigkill_after_checkpoint_then_resume_equals_straight_run(tmp_path, digits_dir):
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"
  done = helpers.run(helpers.main_command(straight, "", *fast_overrides(digits_dir)))
  assert done.returncode == 0, done.stderr[-3000:]

  cmd = helpers.main_command(resumed, "", *fast_overrides(digits_dir))
  proc = subprocess.Popen(
      cmd, env=helpers.env(), cwd=helpers.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
  )
  checkpoint_20 = resumed / "checkpoints" / "20"
  deadline = time.time() + 300
  # Killed a few steps past the checkpoint, so that the resumed run recomputes them.
  while (
      not (checkpoint_20.is_dir() and last_train_step(resumed) >= 22)
      and proc.poll() is None
      and time.time() < deadline
  ):
    time.sleep(0.02)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert checkpoint_20.is_dir(), "the run never wrote its step-20 checkpoint"
  assert not (resumed / "checkpoints" / "40").exists(), "killed too late: the run had finished"
  killed_at = last_train_step(resumed)

  again = helpers.run(cmd)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "Resumed from" in again.stdout and "at step 20" in again.stdout
  a, b = final_params(straight, 40), final_params(resumed, 40)
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-6, err_msg=key)

  # Goodput: the restart's second start-up and compile, and the steps past the checkpoint that
  # the killed run had trained and the resumed one trained again, are lost time.
  straight_goodput, resumed_goodput = goodput(straight), goodput(resumed)
  assert straight_goodput["recomputed_steps"] == 0 and straight_goodput["step"] == 40
  assert resumed_goodput["recomputed_steps"] == killed_at - 20 > 0
  assert resumed_goodput["recomputed_s"] > 0
  assert 0 < resumed_goodput["goodput"] < straight_goodput["goodput"] < 1
  records = [r for r in helpers.read_metrics(resumed) if "train_loss" in r]
  assert [r["step"] for r in records] == list(range(1, killed_at + 1)) + list(range(21, 41))
  assert records[-1]["recomputed_steps"] == killed_at - 20


@pytest.mark.slow
def test_eight_devices_give_the_same_first_losses(tmp_path, digits_dir):
  losses = {}
  for devices in (1, 8):
    workdir = tmp_path / f"devices{devices}"
    result = helpers.run(
        helpers.main_command(
            workdir, "", *fast_overrides(digits_dir, 10), f"--config.mesh=data:{devices}"
        ),
        devices=devices,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    losses[devices] = [r["train_loss"] for r in helpers.read_metrics(workdir) if "train_loss" in r]
  assert len(losses[1]) == 10
  np.testing.assert_allclose(losses[8], losses[1], rtol=1e-5)


def test_a_resumed_run_loads_its_compiled_step_from_the_workdir(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  overrides = [f"--config.data_dir={digits_dir}", "--config.eval_every=4", "--config.log_every=2"]
  cmd = helpers.main_command(workdir, "runlocal", *overrides)  # 4 steps, saved at 2 and 4
  env = helpers.env()
  env.pop("JAX_COMPILATION_CACHE_DIR", None)  # a machine-wide cache (CI's) would take its place
  first = subprocess.run(cmd, env=env, cwd=helpers.ROOT, capture_output=True, text=True)
  assert first.returncode == 0, first.stderr[-3000:]
  cache = workdir / "compilation_cache"
  assert any(name.startswith("jit_update_step-") for name in os.listdir(cache))

  shutil.rmtree(workdir / "checkpoints" / "4")  # as if the run had stopped after step 2
  # JAX_LOG_COMPILES=1: JAX names each program it loads from the persistent cache.
  env = dict(env, JAX_LOG_COMPILES="1")
  again = subprocess.run(cmd, env=env, cwd=helpers.ROOT, capture_output=True, text=True)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "at step 2" in again.stdout
  assert "Persistent compilation cache hit for 'jit_update_step'" in again.stderr

  # Off (an empty compilation_cache_dir): the trainer's own reading of the flag, in-process.
  off = tmp_path / "off"
  config = tiny_configs.tiny_vit(digits_dir, 2)
  config.compilation_cache_dir = ""
  train.train_and_evaluate(config, str(off))
  assert not (off / "compilation_cache").exists()


def test_the_compilation_cache_is_the_configs_then_jaxs_variable_then_the_workdirs(monkeypatch):
  from vit_jax import startup  # pylint: disable=g-import-not-at-top

  monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
  assert startup.compilation_cache_path(None, "w/compilation_cache") == "w/compilation_cache"
  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/shared")
  assert startup.compilation_cache_path(None, "w/compilation_cache") == "/shared"
  assert startup.compilation_cache_path("/mine", "w/compilation_cache") == "/mine"
  assert startup.compilation_cache_path("", "w/compilation_cache") is None


def test_the_cache_skips_quick_compiles_unless_jaxs_own_variable_sets_the_threshold(
    monkeypatch, tmp_path
):
  import jax  # pylint: disable=g-import-not-at-top

  from vit_jax import startup  # pylint: disable=g-import-not-at-top

  option = "jax_persistent_cache_min_compile_time_secs"
  previous = jax.config.jax_compilation_cache_dir, getattr(jax.config, option)
  try:
    monkeypatch.delenv(startup.MIN_COMPILE_SECS_VARIABLE, raising=False)
    startup.use_compilation_cache(str(tmp_path / "default"))
    assert getattr(jax.config, option) == startup.CACHE_MIN_COMPILE_SECS
    # JAX reads its variable when it is imported; the trainer then leaves the value alone.
    monkeypatch.setenv(startup.MIN_COMPILE_SECS_VARIABLE, "0")
    jax.config.update(option, 0.0)
    startup.use_compilation_cache(str(tmp_path / "users"))
    assert getattr(jax.config, option) == 0.0
  finally:
    startup.use_compilation_cache(previous[0])
    jax.config.update(option, previous[1])
