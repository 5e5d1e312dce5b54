"""Sweep test helpers: sweep files written to tmp, fabricated run dirs, the CLI in a subprocess."""

import json
import os
import subprocess
import sys

from tests.helpers import snapshot  # noqa: F401  # re-exported for the sweep tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_sweep(path, sweep: dict) -> str:
  """A sweep file at `path` whose get_sweep() returns `sweep`."""
  with open(path, "w", encoding="utf-8") as f:
    f.write(f"def get_sweep():\n  return {sweep!r}\n")
  return str(path)


def cli(*args, timeout=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
  return subprocess.run(
      [sys.executable, "-m", "vit_jax.sweep", *map(str, args)],
      env=env,
      capture_output=True,
      text=True,
      timeout=timeout,
      cwd=ROOT,
  )


def fake_run(workdir, *, config: dict, info: dict | None, rows: list[dict]) -> None:
  """A workdir as the trainer leaves it: config.json, run_info.json, metrics.jsonl."""
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f)
  if info is not None:
    with open(os.path.join(workdir, "run_info.json"), "w", encoding="utf-8") as f:
      json.dump(info, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w", encoding="utf-8") as f:
    for row in rows:
      f.write(json.dumps(row) + "\n")
