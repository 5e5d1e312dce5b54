"""CPU seconds per test: a pytest plugin that records them, and the report that ranks them.

On a machine whose cores are all busy (CI's 2), a test costs its CPU seconds, not its wall time:

    PYTHONPATH=scripts CPU_PER_TEST_DIR=/tmp/cpu .venv/bin/python -m pytest -p cpu_per_test \
        -q -n 2 -m "not slow and not multiprocess and not default_emitters"
    python scripts/cpu_per_test.py /tmp/cpu            # totals, the heaviest files and tests

Each test's figure is its worker's own CPU time over the test (setup and teardown included) plus
that of the processes it started and waited for (`getrusage`'s RUSAGE_CHILDREN), one JSON line
per test in CPU_PER_TEST_DIR/<worker pid>.jsonl. Time a worker spends on collection, and
processes a test leaves running, count nowhere.
"""

import collections
import json
import os
import resource
import sys
import time

import pytest

DIR_VARIABLE = "CPU_PER_TEST_DIR"


def _cpu_seconds() -> tuple[float, float]:
  """(this process's CPU seconds, its waited-for children's)."""
  own = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
  own_before, children_before = _cpu_seconds()
  wall_before = time.time()
  yield
  own_after, children_after = _cpu_seconds()
  folder = os.environ.get(DIR_VARIABLE, "cpu_per_test")
  os.makedirs(folder, exist_ok=True)
  row = {
      "test": item.nodeid,
      "own": own_after - own_before,
      "children": children_after - children_before,
      "wall": time.time() - wall_before,
  }
  with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps(row) + "\n")


def report(folder: str, top: int = 40) -> None:
  rows = []
  for name in sorted(os.listdir(folder)):
    if name.endswith(".jsonl"):
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        rows += [json.loads(line) for line in f]
  cpu = lambda row: row["own"] + row["children"]
  own, children = sum(r["own"] for r in rows), sum(r["children"] for r in rows)
  print(f"{len(rows)} tests: {own + children:.0f} CPU-s ({own:.0f} in pytest's processes, "
        f"{children:.0f} in the processes they started)")  # fmt: skip
  by_file = collections.Counter()
  for row in rows:
    by_file[row["test"].split("::")[0]] += cpu(row)
  print(f"\nthe {top} heaviest files (CPU-s):")
  for name, seconds in by_file.most_common(top):
    print(f"{seconds:8.1f}  {name}")
  print(f"\nthe {top} heaviest tests (CPU-s, of which in started processes; wall s):")
  for row in sorted(rows, key=cpu, reverse=True)[:top]:
    print(f"{cpu(row):8.1f} {row['children']:8.1f} {row['wall']:8.1f}  {row['test']}")


if __name__ == "__main__":
  if len(sys.argv) not in (2, 3):
    sys.exit("usage: python scripts/cpu_per_test.py FOLDER [TOP]")
  report(sys.argv[1], *(int(a) for a in sys.argv[2:]))
