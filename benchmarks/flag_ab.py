"""The trainer's XLA:CPU flag on and off, workload by workload (issue 13).

  python -m benchmarks.flag_ab [--only gpt_train ...] [--rounds 2] [--steps 3] [--quick]

XLA reads its flags when the backend starts, so every (round, setting, workload) runs in a fresh
process: our side of `benchmarks.compare`'s workload, warmed up twice, then the median of
`--steps` timed units. The two settings alternate within each round, so load changes hit both;
the table gives the median over rounds and flag / no flag. "no flag" is XLA's own default (YNNPACK
takes every lone dot and convolution); "flag" is `vit_jax/startup.py`'s value.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from vit_jax import startup

SETTINGS = {
    "flag": " ".join(f"{k}={v}" for k, v in startup.CPU_FLAGS.items()),
    "no flag": "",
}
WORKLOADS = (
    "vit_ti16_train",
    "vit_s16_train",
    "gpt_train",
    "bert_mlm_train",
    "gpt2_124m_train",
    "gpt_decode_b8",
    "matmul_fp32",
)


def child(name: str, steps: int, quick: bool):
  """Runs in the subprocess: times our side of one workload under the XLA_FLAGS it was given."""
  startup.CPU_FLAGS.clear()  # the parent chose XLA_FLAGS; add nothing
  from benchmarks import compare  # pylint: disable=g-import-not-at-top  # (loads torchvision first)

  unit, items, make_ours, _ = compare.workloads(quick)[name]
  run = make_ours()
  run()
  run()
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  print(json.dumps({"unit": unit, "rate": items / statistics.median(times)}))


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--only", nargs="+", choices=WORKLOADS, help="run only these workloads")
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--quick", action="store_true", help="tiny shapes: a smoke run")
  parser.add_argument("--child", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    return child(args.child, args.steps, args.quick)
  names = args.only or WORKLOADS
  rates = {(name, setting): [] for name in names for setting in SETTINGS}
  units = {}
  for _ in range(args.rounds):
    for name in names:
      for setting, flags in SETTINGS.items():
        env = dict(os.environ, XLA_FLAGS=flags)
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.flag_ab",
                "--child",
                name,
                "--steps",
                str(args.steps),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        rates[(name, setting)].append(result["rate"])
        units[name] = result["unit"]
        print(f"  {name} ({setting}): {result['rate']:.1f} {result['unit']}", flush=True)
  print(f"{'workload':<18} {'unit':<8} {'flag':>10} {'no flag':>10} {'ratio':>7}  (rounds)")
  for name in names:
    on, off = (statistics.median(rates[(name, s)]) for s in SETTINGS)
    rounds = " ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(*(rates[(name, s)] for s in SETTINGS)))
    print(f"{name:<18} {units[name]:<8} {on:>10.1f} {off:>10.1f} {on / off:>6.2f}x  ({rounds})")


if __name__ == "__main__":
  main()
