"""Seconds from a training command's start to its first step, without and with the compilation
cache (docs/results.md).

  python -m benchmarks.first_step --config=configs/vit.py:runlocal
  python -m benchmarks.first_step --config=configs/gpt.py

Runs `python -m vit_jax.main ... --config.total_steps=1`, each time in a new workdir, and stops it
once the first step's record is in metrics.jsonl. One run fills a cache directory (it compiles and
writes); then, `--rounds` times, a run with the cache off (`--config.compilation_cache_dir=`) and
one that loads from the filled cache, as a restarted run does. Prints the median wall and CPU
seconds (the CPU time of the run's process, less sensitive to other jobs on the machine).
"""

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def to_first_step(config: str, workdir: str, cache_dir: str, extra: list[str]) -> tuple:
  """(wall seconds, CPU seconds) from starting the command to its first logged step."""
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
  cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
  started = time.time()
  proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  while not (os.path.exists(metrics) and '"train_loss"' in open(metrics, encoding="utf-8").read()):
    if proc.poll() is not None:
      sys.exit(f"the run failed:\n{proc.stderr.read().decode()[-3000:]}")
    time.sleep(0.02)
  wall = time.time() - started
  proc.send_signal(signal.SIGKILL)  # the save and evals after the step are not timed
  proc.wait()
  cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu = sum(getattr(cpu_after, f) - getattr(cpu_before, f) for f in ("ru_utime", "ru_stime"))
  return wall, cpu


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", required=True)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("extra", nargs="*", help="more --config.KEY=VALUE overrides")
  args = parser.parse_args()
  load_before = os.getloadavg()[0]
  with tempfile.TemporaryDirectory() as tmp:
    cache = os.path.join(tmp, "cache")
    fill = to_first_step(args.config, f"{tmp}/fill", cache, args.extra)
    off, on = [], []
    for i in range(args.rounds):  # interleaved, so both see the same machine load
      off.append(to_first_step(args.config, f"{tmp}/off{i}", "", args.extra))
      on.append(to_first_step(args.config, f"{tmp}/on{i}", cache, args.extra))
    entries = len(os.listdir(cache))
  rows = {
      "cache filled (compiles, writes)": [fill],
      f"no cache, median of {args.rounds}": off,
      f"from the cache, median of {args.rounds}": on,
  }
  load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
  print(f"{args.config}: seconds from start to the first step (load average {load})")
  print(f"  {'':34s} {'wall':>6s} {'CPU':>6s}")
  for name, runs in rows.items():
    wall, cpu = (statistics.median(run[k] for run in runs) for k in (0, 1))
    print(f"  {name:34s} {wall:6.1f} {cpu:6.1f}")
  print(f"  cache entries: {entries}")


if __name__ == "__main__":
  main()
