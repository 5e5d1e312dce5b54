"""Runs N cooperating processes of a command on this machine, as a multi-host job would.

  python scripts/launch_local.py -n 2 --devices_per_process 4 -- \
      python -m vit_jax.main --config=configs/vit.py --workdir=W

Each process gets JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID (read by
vit_jax.training.mesh) and its own fake CPU devices; collectives go through gloo. Process 0's
output is shown; the others' go to `launch_logs/process_I.log`. If any process
fails, the others are stopped and the launcher exits with that process's code.
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


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("-n", "--num_processes", type=int, default=2)
  parser.add_argument("--devices_per_process", type=int, default=1)
  parser.add_argument("--log_dir", default="launch_logs")
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
    out = None if i == 0 else open(os.path.join(args.log_dir, f"process_{i}.log"), "w")
    procs.append(
        subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT if out else None)
    )
  code = 0
  while any(p.poll() is None for p in procs):
    failed = [p for p in procs if p.poll() not in (None, 0)]
    if failed:
      code = failed[0].returncode
      print(
          f"launch_local: process {procs.index(failed[0])} exited with code {code}; "
          "stopping the others.",
          file=sys.stderr,
      )
      for p in procs:
        if p.poll() is None:
          p.kill()  # not SIGTERM: a preemption save would wait for the dead peer
      break
    time.sleep(0.5)
  for p in procs:
    p.wait()
    code = code or p.returncode
  sys.exit(code)


if __name__ == "__main__":
  main()
