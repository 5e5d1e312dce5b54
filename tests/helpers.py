"""Runs the real command line in a subprocess, as a user would; loads configs in-process."""

import json
import os
import subprocess
import sys

from vit_jax.config import args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIT_CONFIG = os.path.join(ROOT, "configs", "vit.py")
# The step-time breakdown and goodput every train record carries (training/metrics_log.py).
BREAKDOWN_KEYS = (
    "time/window_s",
    "time/input_wait_s",
    "time/dispatch_s",
    "time/device_wait_s",
    "time/checkpoint_s",
    "time/eval_s",
    "time/compile_s",
    "time/profile_s",
    "time/startup_s",
    "time/productive_s",
    "input_wait_share",
    "goodput",
)


def main_command(workdir, config_arg="", *overrides):
  config = VIT_CONFIG + (f":{config_arg}" if config_arg else "")
  return [
      sys.executable,
      "-m",
      "vit_jax.main",
      f"--config={config}",
      f"--workdir={workdir}",
      *overrides,
  ]


def repo_file(relative_path: str):
  """The module of a config or sweep file of this repository (e.g. "configs/vit.py"), loaded by
  path as the commands load it."""
  return args.load_file(os.path.join(ROOT, relative_path))


def vit_config(config_arg="runlocal", **overrides):
  """configs/vit.py's config, for tests that call the trainer in-process."""
  config = repo_file("configs/vit.py").get_config(config_arg)
  config.update(overrides)
  return config


# XLA flags of every test process (tests/conftest.py sets them for pytest's own): LLVM's
# optimization level 0 for the CPU's code, and XLA:CPU's older loop emitters. The tests' programs
# are small and compile more than they run: level 0 takes a fifth off the in-process training
# tests with the same results (LLVM keeps the floating-point order at any level); the older
# emitters take another fifth off them (docs/results.md, CI's time). Under either, a program
# computes the same bits on every run (exact resume, meshes, microbatches); but two programs
# that compute the same steps in other code (a parent without a cooldown and a run from scratch
# with one, before the cooldown) round apart under the older emitters. The tests that compare
# such programs bit for bit are marked `default_emitters` and run in a session of XLA's defaults
# (DEFAULT_EMITTERS_VARIABLE=1, scripts/test_multiprocess.sh).
DEFAULT_EMITTERS_VARIABLE = "VIT_JAX_TEST_DEFAULT_EMITTERS"
DEFAULT_EMITTERS = os.environ.get(DEFAULT_EMITTERS_VARIABLE) == "1"
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0" + (
    "" if DEFAULT_EMITTERS else " --xla_cpu_use_fusion_emitters=false"
)


def env(devices: int = 1, data_dir=None):
  e = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
  e["XLA_FLAGS"] = f"{TEST_XLA_FLAGS} --xla_force_host_platform_device_count={devices}"
  if data_dir:
    e["TFDS_DATA_DIR"] = str(data_dir)
  return e


def launch_local(processes: int, devices_per_process: int, log_dir, command: list) -> list:
  """`command` (argv) run by scripts/launch_local.py as `processes` processes of
  `devices_per_process` CPU devices each, their logs under `log_dir`."""
  launcher = os.path.join(ROOT, "scripts", "launch_local.py")
  return [sys.executable, launcher, "-n", str(processes), "--devices_per_process",
          str(devices_per_process), "--log_dir", str(log_dir), "--", *command]  # fmt: skip


def run(cmd, devices=1, data_dir=None, timeout=600):
  return subprocess.run(
      cmd, env=env(devices, data_dir), capture_output=True, text=True, timeout=timeout, cwd=ROOT
  )


def translate_file(workdir, sources, folder, *flags):
  """(the result, its output lines or None) of `python -m vit_jax.generate --input_file` over
  the lines `sources`, as the documented command translates a file; `flags` add its options."""
  input_file, output_file = os.path.join(folder, "sources.txt"), os.path.join(folder, "outputs.txt")
  with open(input_file, "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in sources))
  result = run(
      [
          sys.executable,
          "-m",
          "vit_jax.generate",
          f"--workdir={workdir}",
          f"--input_file={input_file}",
          f"--output_file={output_file}",
          *flags,
      ]
  )
  if not os.path.exists(output_file):
    return result, None
  with open(output_file, encoding="utf-8") as f:
    return result, f.read().splitlines()


def read_metrics(workdir):
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def snapshot(directory):
  """{relative path: (size, mtime_ns)} of every file, to prove nothing was touched."""
  out = {}
  for root, _, files in os.walk(directory):
    for name in files:
      path = os.path.join(root, name)
      st = os.stat(path)
      out[os.path.relpath(path, directory)] = (st.st_size, st.st_mtime_ns)
  return out
