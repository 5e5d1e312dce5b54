"""Scaling sweeps from the command line:

  python -m vit_jax.sweep run     SWEEP_FILE --root=DIR [--print_commands]
  python -m vit_jax.sweep collect SWEEP_FILE --root=DIR [--out=DIR]
  python -m vit_jax.sweep fit     SWEEP_FILE --root=DIR [--out=DIR] [--bootstrap=200]
  python -m vit_jax.sweep plot    SWEEP_FILE --root=DIR [--out=DIR]
  python -m vit_jax.sweep all     SWEEP_FILE --root=DIR [--out=DIR]   (run, collect, fit, plot)

`run` checks every run's overrides against its base config first (an unknown key names the key
and the run, exit code 2, nothing started), then runs each unfinished run as its own
`python -m vit_jax.main` under ROOT/RUN_NAME: finished runs are skipped, interrupted ones resume
from their checkpoints. `--print_commands` prints one command per run instead (for a cluster
queue) and only writes ROOT/sweep.json. `collect` writes runs.csv and evals.csv, `fit` fit.json,
`plot` the PNGs, all in --out (default: the root). Sweep files: experiments/sweeps/; their
format: vit_jax/sweep/spec.py.
"""

import argparse
import sys

from vit_jax import errors
from vit_jax import startup
from vit_jax import storage
from vit_jax.sweep import checks
from vit_jax.sweep import collect as collect_lib
from vit_jax.sweep import fits as fits_lib
from vit_jax.sweep import runner
from vit_jax.sweep import spec

COMMANDS = ("run", "collect", "fit", "plot", "all")


class _Parser(argparse.ArgumentParser):
  """A bad command line is one `error:` line and exit code 2, as from every command here."""

  def error(self, message):
    raise errors.ConfigError(f"{message}; see python -m vit_jax.sweep --help.")


def parse_args(argv):
  parser = _Parser(prog="python -m vit_jax.sweep", description=__doc__.split("\n\n")[0])
  parser.add_argument("command", choices=COMMANDS)
  parser.add_argument("sweep_file", help="a sweep file, e.g. experiments/sweeps/gpt_width_cpu.py")
  parser.add_argument("--root", required=True, help="folder holding one workdir per run")
  parser.add_argument("--out", help="where CSVs, fit.json and PNGs go (default: --root)")
  parser.add_argument(
      "--print_commands", action="store_true", help="run: print the commands, run nothing"
  )
  parser.add_argument("--bootstrap", type=int, default=200, help="fit: bootstrap resamples")
  parser.add_argument("--seed", type=int, default=0, help="fit: bootstrap seed")
  args = parser.parse_args(argv)
  if args.bootstrap < 1:  # refused now, not after an hour of runs
    parser.error(f"--bootstrap={args.bootstrap} must be >= 1 (resamples for the intervals)")
  return args


def _evals(out: str) -> list[dict]:
  path = storage.join(out, collect_lib.EVALS_CSV)
  if not storage.isfile(path):
    raise errors.MissingFileError(f"{path} does not exist; run `collect` first.")
  return collect_lib.read_csv(path)


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  out = args.out or args.root
  sweep = spec.load(args.sweep_file)
  status = 0
  if args.command in ("run", "all"):
    configs = checks.check_all(sweep)  # every run, before anything starts or is written
    if args.print_commands:  # the root gets sweep.json, so `collect` later knows the runs
      runner.check_root(sweep, args.root, create=True)
      runner.print_commands(sweep, args.root)
      return 0
    status = runner.run_all(sweep, configs, args.root)
  if args.command in ("collect", "all"):
    runs, evals = collect_lib.collect(sweep, args.root, out)
    finished = sum(r["status"] == "finished" for r in runs)
    print(f"collect: {finished} of {len(runs)} runs finished, {len(evals)} eval points -> {out}")
  if args.command in ("fit", "all"):
    result = fits_lib.fit_all(sweep, _evals(out), samples=args.bootstrap, seed=args.seed)
    path = fits_lib.write(result, out)
    for line in fits_lib.summary(result):
      print(f"fit {line}")
    print(f"fit: wrote {path}")
  if args.command in ("plot", "all"):
    # pylint: disable-next=g-import-not-at-top  (matplotlib only where a plot is made)
    from vit_jax.sweep import plots

    for path in plots.plot_all(sweep, _evals(out), fits_lib.read(out), out):
      print(f"plot: wrote {path}")
  return status


def run() -> None:
  startup.quiet_startup()  # before the config checks load JAX; the runs inherit the setting
  try:
    with errors.exit_on_user_error():
      code = main()
  except KeyboardInterrupt:
    print("sweep: interrupted; rerun the same command to resume.", file=sys.stderr)
    sys.exit(130)
  sys.exit(code)


if __name__ == "__main__":
  run()
