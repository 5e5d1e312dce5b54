"""Runs N cooperating processes of a command on this machine, as a multi-host job would.

  python scripts/launch_local.py -n 2 --devices_per_process 4 -- \
      python -m vit_jax.main --config=configs/vit.py --workdir=W

Each process gets JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID (read by
vit_jax.training.mesh) and its own fake CPU devices; collectives go through gloo. Process 0's
output is shown; the others' go to `launch_logs/process_I.log`. If any process
fails, the launcher names it, the others get `--grace_s` seconds (15 by default) to end on their
own (and print their own error), then are stopped; the launcher exits with the failed process's
code.
"""

import argparse
import os
import socket
import subprocess
import sys
import time


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def with_device_count(xla_flags: str, devices: int) -> str:
  """`xla_flags` (the environment's) with this process's CPU device count in place of any."""
  flag = "--xla_force_host_platform_device_count"
  kept = [f for f in xla_flags.split() if not f.startswith(flag)]
  return " ".join([*kept, f"{flag}={devices}"])


# A peer that failed the same check (a bad flag, a mesh the input cannot feed) exits on its own
# within this, after printing its error; one blocked in a collective with the dead process does not.
DEFAULT_GRACE_S = 15.0


def log_path(log_dir: str, process: int) -> str:
  """Where process `process`'s output goes (process 0's is shown instead)."""
  return os.path.join(log_dir, f"process_{process}.log")


def stop_after_grace(procs, grace_s: float):
  """Lets the other processes end on their own for `grace_s`, then kills those still running."""
  deadline = time.monotonic() + grace_s
  while time.monotonic() < deadline and any(p.poll() is None for p in procs):
    time.sleep(0.2)
  running = [p for p in procs if p.poll() is None]
  if running:
    print(f"launch_local: stopping {len(running)} process(es) still running.", file=sys.stderr)
  for p in running:
    p.kill()  # not SIGTERM: a preemption save would wait for the dead peer


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("-n", "--num_processes", type=int, default=2)
  parser.add_argument("--devices_per_process", type=int, default=1)
  parser.add_argument("--log_dir", default="launch_logs")
  parser.add_argument(
      "--grace_s",
      type=float,
      default=DEFAULT_GRACE_S,
      help="after one process fails, seconds the others get to end on their own before the kill",
  )
  parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
  args = parser.parse_args()
  command = args.command[1:] if args.command[:1] == ["--"] else args.command
  if not command:
    parser.error("give the command to run after --")
  os.makedirs(args.log_dir, exist_ok=True)
  address = f"127.0.0.1:{free_port()}"
  procs = []
  for i in range(args.num_processes):
    env = dict(
        os.environ,
        JAX_COORDINATOR_ADDRESS=address,
        JAX_NUM_PROCESSES=str(args.num_processes),
        JAX_PROCESS_ID=str(i),
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=with_device_count(os.environ.get("XLA_FLAGS", ""), args.devices_per_process),
    )
    out = None if i == 0 else open(log_path(args.log_dir, i), "w")
    procs.append(
        subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT if out else None)
    )
  code = 0
  while True:
    failed = [p for p in procs if p.poll() not in (None, 0)]
    if failed:  # also when every process had already ended by the first look
      code = failed[0].returncode
      index = procs.index(failed[0])
      where = "" if index == 0 else f" (its output: {log_path(args.log_dir, index)})"
      print(f"launch_local: process {index} exited with code {code}{where}.", file=sys.stderr)
      stop_after_grace(procs, args.grace_s)
      break
    if all(p.poll() is not None for p in procs):
      break
    time.sleep(0.5)
  for p in procs:
    p.wait()
    code = code or p.returncode
  sys.exit(code)


if __name__ == "__main__":
  main()
