"""Seconds from a training command's start to its first step, without and with the compilation
cache (docs/results.md).

  python -m benchmarks.first_step --config=configs/vit.py:runlocal
  python -m benchmarks.first_step --config=configs/gpt.py

Three runs of `python -m vit_jax.main ... --config.total_steps=1`, each in a new workdir: with the
cache off (`--config.compilation_cache_dir=`), then twice with one shared cache directory: the
first compiles and writes it, the second loads the compiled programs (as a restarted run does).
The time is from starting the process to the first step's record in metrics.jsonl.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def seconds_to_first_step(config: str, workdir: str, cache_dir: str, extra: list[str]) -> float:
  cmd = [
      sys.executable,
      "-m",
      "vit_jax.main",
      f"--config={config}",
      f"--workdir={workdir}",
      "--config.total_steps=1",
      "--config.log_every=1",
      "--config.progress=lines",
      f"--config.compilation_cache_dir={cache_dir}",
      *extra,
  ]
  metrics = os.path.join(workdir, "metrics.jsonl")
  started = time.time()
  proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  while not (os.path.exists(metrics) and '"train_loss"' in open(metrics, encoding="utf-8").read()):
    if proc.poll() is not None:
      sys.exit(f"the run failed:\n{proc.stderr.read().decode()[-3000:]}")
    time.sleep(0.05)
  elapsed = time.time() - started
  proc.wait()
  return elapsed


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", required=True)
  parser.add_argument("extra", nargs="*", help="more --config.KEY=VALUE overrides")
  args = parser.parse_args()
  load_before = os.getloadavg()[0]
  with tempfile.TemporaryDirectory() as tmp:
    cache = os.path.join(tmp, "cache")
    runs = {
        "no cache": seconds_to_first_step(args.config, f"{tmp}/off", "", args.extra),
        "cache, first run (compiles, writes)": seconds_to_first_step(
            args.config, f"{tmp}/cold", cache, args.extra
        ),
        "cache, second run (loads)": seconds_to_first_step(
            args.config, f"{tmp}/warm", cache, args.extra
        ),
    }
    entries = len(os.listdir(cache))
  load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
  print(f"{args.config}: seconds from start to the first step (load average {load}):")
  for name, seconds in runs.items():
    print(f"  {name:38s} {seconds:6.1f}")
  print(f"  cache entries written: {entries}")


if __name__ == "__main__":
  main()
