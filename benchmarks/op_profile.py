"""XLA:CPU op profile of one of our benchmark workloads: where its time goes, by what each op does.

  python -m benchmarks.op_profile vit_ti16_train          # any workload of benchmarks.compare
  python -m benchmarks.op_profile gpt_decode_b8 --top 20

Runs our side of the workload twice (compile, warm-up), then once under `jax.profiler`, and sums
XLA:CPU's per-op trace events by what the op computes: the `op_name` the optimized HLO gives it
(`--xla_dump_to` a temporary directory), with layer indices merged and the result shape. The
events time each op on its own thread and XLA runs independent ops side by side, so the column
sums to more than the wall time on 2 cores; the ranking is what it is for.
"""

# pylint: disable=g-bad-import-order
import argparse
import collections
import glob
import gzip
import json
import os
import re
import tempfile
import time

DUMP_DIR = tempfile.mkdtemp(prefix="op_profile_hlo_")
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={DUMP_DIR} --xla_dump_hlo_as_text"
).strip()

import jax  # noqa: E402  # pylint: disable=wrong-import-position

from benchmarks import compare  # noqa: E402  # pylint: disable=wrong-import-position


def op_labels(dump_dir: str) -> dict:
  """(module name, HLO instruction) -> 'what it computes [result shape]' from optimized dumps."""
  labels = {}
  for path in glob.glob(f"{dump_dir}/*.cpu_after_optimizations.txt"):
    module = re.match(r"module_\d+\.(.+)\.cpu_after_optimizations", os.path.basename(path))
    with open(path, encoding="utf-8") as f:
      for line in f:
        match = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = (\(?[a-z0-9]+\[[0-9,]*\])", line)
        op = re.search(r'op_name="([^"]*)"', line)
        if match and op:
          what = "/".join(op.group(1).split("/")[-2:])
          what = re.sub(r"(h|encoderblock|layers?|block)_[0-9]+", r"\1_*", what)
          labels[(module.group(1), match.group(1))] = f"{what} {match.group(2)}"
  return labels


def profile(run, repeats: int = 1):
  """{label: (microseconds, count)} over `repeats` traced calls of `run`, and the wall seconds."""
  with tempfile.TemporaryDirectory() as trace_dir:
    with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
      start = time.perf_counter()
      for _ in range(repeats):
        run()
      wall = time.perf_counter() - start
    (path,) = glob.glob(f"{trace_dir}/**/*.trace.json.gz", recursive=True)
    with gzip.open(path) as f:
      events = json.load(f)["traceEvents"]
  labels = op_labels(DUMP_DIR)
  total_us, count = collections.Counter(), collections.Counter()
  for event in events:
    args = event.get("args", {})
    key = (args.get("hlo_module"), args.get("hlo_op"))
    if event.get("ph") == "X" and key in labels:
      total_us[labels[key]] += event["dur"]
      count[labels[key]] += 1
  return {label: (us, count[label]) for label, us in total_us.items()}, wall


def print_profile(ops: dict, wall: float, units: int, unit_name: str, top: int):
  busy = sum(us for us, _ in ops.values()) / 1e3
  print(f"wall {wall * 1e3:.0f} ms; op events sum to {busy:.0f} ms (2 threads side by side)")
  print(f"{'ms':>8} {'ms/' + unit_name:>10} {'share':>6} {'count':>6}  op")
  for label, (us, n) in sorted(ops.items(), key=lambda kv: -kv[1][0])[:top]:
    ms = us / 1e3
    print(f"{ms:8.1f} {ms / units:10.3f} {ms / busy:6.1%} {n:6d}  {label}")


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("workload", choices=sorted(compare.workloads(False)))
  parser.add_argument("--top", type=int, default=15)
  parser.add_argument("--quick", action="store_true", help="tiny shapes: a smoke run")
  args = parser.parse_args()
  unit, items, make_ours, _ = compare.workloads(args.quick)[args.workload]
  run = make_ours()
  run()
  run()
  ops, wall = profile(run)
  print(f"{args.workload}: one unit ({items} {unit.split('/')[0]}), our side, traced")
  print_profile(ops, wall, 1, "unit", args.top)


if __name__ == "__main__":
  main()
