"""scripts/launch_local.py when a process fails: the others get a grace period to print their own
error and end, then are killed; the launcher names the failed process and exits with its code."""

import os
import subprocess
import sys
import time

from tests import helpers

LAUNCHER = os.path.join(helpers.ROOT, "scripts", "launch_local.py")


def launch(tmp_path, processes: int, program: str, grace_s: float):
  """`program` (Python, reading JAX_PROCESS_ID) run as `processes` processes; (result, seconds)."""
  command = [sys.executable, LAUNCHER, "-n", str(processes), "--log_dir", str(tmp_path / "logs")]
  command += ["--grace_s", str(grace_s), "--", sys.executable, "-c", program]
  started = time.monotonic()
  result = subprocess.run(command, capture_output=True, text=True, timeout=120)
  return result, time.monotonic() - started


def test_peers_that_fail_the_same_check_print_their_own_error(tmp_path):
  # Process 1 fails first; process 0 fails the same way a moment later and must still be heard.
  program = (
      "import os, sys, time\n"
      "i = int(os.environ['JAX_PROCESS_ID'])\n"
      "time.sleep(0 if i else 1.5)\n"
      "print(f'error: bad input seen by process {i}', file=sys.stderr)\n"
      "sys.exit(2)\n"
  )
  result, _ = launch(tmp_path, 3, program, grace_s=30)
  assert result.returncode == 2
  assert "error: bad input seen by process 0" in result.stderr
  log = os.path.join(tmp_path, "logs", "process_1.log")
  assert f"launch_local: process 1 exited with code 2 (its output: {log})." in result.stderr
  assert "stopping" not in result.stderr  # every process ended on its own


def test_a_peer_still_running_after_the_grace_is_killed(tmp_path):
  program = (
      "import os, sys, time\n"
      "if os.environ['JAX_PROCESS_ID'] == '1':\n"
      "  sys.exit(3)\n"
      "time.sleep(300)  # blocked, as in a collective with the dead process\n"
  )
  result, seconds = launch(tmp_path, 3, program, grace_s=1)
  assert result.returncode == 3
  assert "launch_local: stopping 2 process(es) still running." in result.stderr
  assert seconds < 60


def test_processes_that_all_end_at_once_are_still_named(tmp_path):
  # Every process has ended before the launcher's first look at them.
  result, _ = launch(tmp_path, 2, "import sys; sys.exit(4)", grace_s=30)
  assert result.returncode == 4
  assert "launch_local: process 0 exited with code 4." in result.stderr
