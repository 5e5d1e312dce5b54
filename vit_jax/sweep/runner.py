"""Runs a sweep's runs one after another, each an ordinary `vit_jax.main` in its own workdir.

The sweep root holds `sweep.json` (the sweep file and a hash of its expanded runs) and one workdir
per run. A root written by another sweep, or a non-empty folder without `sweep.json`, is refused
untouched. A run is finished when its `metrics.jsonl` has an eval record at the config's
`total_steps`; finished runs are skipped, any other run is (re)started with its command, and the
trainer resumes it from its latest checkpoint. A failing run is reported and the sweep goes on.
"""

import json
import os
import shlex
import subprocess
import sys
import time

from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.sweep import spec

LOG_UPLOAD_S = 30  # a run's log in a bucket gets its new lines this often while it runs


def check_root(sweep: spec.Sweep, root: str, create: bool) -> None:
  """Refuses a root that holds another sweep (or something else); writes sweep.json if `create`."""
  identity = sweep.identity()
  path = workdir_lib.sweep_file(root)
  if storage.isfile(path):
    try:
      saved = json.loads(storage.read_text(path))
    except errors.StorageUnavailableError:
      raise
    except (OSError, ValueError) as e:
      raise errors.WorkdirError(f"{path} is unreadable ({e}); use a new --root.") from e
    if saved.get("sweep_hash") != identity["sweep_hash"]:
      raise errors.WorkdirError(
          f"--root={root} holds runs of another sweep ({saved.get('sweep_file')}): "
          f"{_difference(saved.get('runs', {}), identity['runs'])}. Use a new --root for this "
          "sweep; nothing in the root was changed."
      )
    return
  if storage.exists(root) and (not storage.isdir(root) or storage.listdir(root)):
    raise errors.WorkdirError(
        f"--root={root} is not empty and has no {workdir_lib.SWEEP_FILE}, so it is not this "
        "sweep's root; use a new or empty folder. Nothing in it was changed."
    )
  if not create:
    raise errors.MissingFileError(f"--root={root} holds no sweep yet; run the sweep first.")
  storage.makedirs(root)
  storage.write_text(path, json.dumps(identity, indent=2))


def _difference(saved: dict, now: dict) -> str:
  parts = []
  for label, names in (
      ("runs only there", sorted(set(saved) - set(now))),
      ("runs only in this sweep", sorted(set(now) - set(saved))),
      ("runs with other settings", sorted(n for n in set(saved) & set(now) if saved[n] != now[n])),
  ):
    if names:
      parts.append(f"{label}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}")
  return "; ".join(parts) or "its runs differ"


def read_metrics(workdir: str) -> list[dict]:
  """The records of `workdir/metrics.jsonl` (a torn last line of a killed run is ignored)."""
  path = workdir_lib.metrics_path(workdir)
  if not storage.isfile(path):
    return []
  rows = []
  with storage.open(path, encoding="utf-8") as f:
    for line in f:
      try:
        rows.append(json.loads(line))
      except ValueError:
        continue
  return rows


def is_eval(row: dict) -> bool:
  """A record of the default evaluator, "eval" (older workdirs named its metrics eval_*, with no
  "/": "eval_ema/..." is the EMA's)."""
  return any(k.startswith("eval/") or (k.startswith("eval_") and "/" not in k) for k in row)


def eval_metric(row: dict, key: str):
  """`row[key]` for a key like "eval/loss", or its older name ("eval_loss"); None if neither."""
  return row.get(key, row.get(key.replace("/", "_")))


def is_finished(workdir: str, total_steps: int) -> bool:
  return any(is_eval(r) and r.get("step") == total_steps for r in read_metrics(workdir))


def print_commands(sweep: spec.Sweep, root: str) -> None:
  for run in sweep.runs:
    print(shlex.join(run.argv(root)), flush=True)


def run_all(sweep: spec.Sweep, configs: dict, root: str) -> int:
  """Runs every unfinished run; returns 0 if all finished, else 1 (after trying every run)."""
  check_root(sweep, root, create=True)
  workdir_lib.lock(root, what="--root")  # each run's trainer also locks its own workdir
  try:
    return _run_each(sweep, configs, root)
  finally:
    workdir_lib.unlock(root)


def _run_each(sweep: spec.Sweep, configs: dict, root: str) -> int:
  failed, skipped = [], 0
  for i, run in enumerate(sweep.runs, 1):
    workdir = storage.join(root, run.name)
    total_steps = configs[run.name].total_steps
    prefix = f"[{i}/{len(sweep.runs)}] {run.name}"
    if is_finished(workdir, total_steps):
      print(f"{prefix}: finished, skipped.", flush=True)
      skipped += 1
      continue
    resuming = storage.isdir(workdir_lib.checkpoints_dir(workdir))
    log_path = workdir_lib.train_log_path(workdir)
    print(f"{prefix}: {'resuming' if resuming else 'starting'} (log: {log_path})", flush=True)
    storage.makedirs(workdir)
    start = time.time()
    code = _run(run.argv(root, python=sys.executable), workdir, log_path)
    took = f"{time.time() - start:.0f} s"
    if code == 0 and is_finished(workdir, total_steps):
      print(f"{prefix}: done in {took}.", flush=True)
      continue
    why = f"exit code {code}" if code else f"stopped before step {total_steps} (preempted?)"
    print(f"{prefix}: FAILED after {took}, {why}; last lines of {log_path}:", flush=True)
    for line in _tail(log_path, 5):
      print(f"    {line}", flush=True)
    failed.append(run.name)
  done = len(sweep.runs) - len(failed)
  print(
      f"sweep: {done} of {len(sweep.runs)} runs finished ({skipped} skipped as already finished)"
      + (
          f"; failed: {', '.join(failed)}. Rerun the same command to retry them." if failed else "."
      ),
      flush=True,
  )
  return 1 if failed else 0


def _run(argv: list[str], workdir: str, log_path: str) -> int:
  del workdir  # the command names it
  with storage.appender(log_path) as log:
    log.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(argv)}\n")
    log.flush()
    # The run imports the same vit_jax as this process, wherever the sweep is started from.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [spec.REPO_ROOT, env.get("PYTHONPATH")]))
    if not storage.is_remote(log_path):  # the run writes the file itself
      return subprocess.run(
          argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=False
      ).returncode
    # A bucket object cannot be written by the child: its lines pass through here, and are
    # appended every LOG_UPLOAD_S seconds and at the end.
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, errors="replace"
    ) as run:
      uploaded = time.time()
      for line in run.stdout:
        log.write(line)
        if time.time() - uploaded > LOG_UPLOAD_S:
          log.flush()
          uploaded = time.time()
    return run.returncode


def _tail(path: str, count: int) -> list[str]:
  try:
    text = storage.read_bytes(path).decode("utf-8", errors="replace")
  except OSError:
    return []
  return [line.rstrip() for line in text.splitlines()[-count:]]
