"""Compiles the trainer's step for a TPU slice from any machine: whether it fits, what it moves
between chips, and bounds on its step time and the run's chip-hours.

  python -m vit_jax.compile --config=configs/vit.py:dataset=imagenet2012,variant=B/16
  python -m vit_jax.compile --config=configs/vit.py:dataset=imagenet2012,variant=B/16 \
      --topology=v5p-16 --num_slices=2
  python -m vit_jax.compile --table   # docs/pod.md's table of the paper recipes
  python -m vit_jax.compile --table --table_row="ViT-g/14, ImageNet-21k"   # one of its rows

The step is the trainer's own (`prepare` and `jit_update_step` in vit_jax/training/train.py: task,
model, optimizer, mesh and partitioning) over abstract inputs: no data is read and no array
allocated. Printed per device: params + optimizer state, temporaries and the total against the
chip's HBM less `config.hbm_headroom` (10% by default); XLA's FLOPs per step against the model's
own count and its estimate of HBM traffic; the collectives by kind with the bytes each device
sends; the largest buffers live at the step's peak, with the op and source line that made each
(vit_jax/tpu_planning/peak_buffers.py); then, from the chip's published peaks
(vit_jax/tpu_planning/chips.py), a lower bound on step time, an upper bound on MFU and a lower
bound on the chip-hours of `total_steps` (vit_jax/tpu_planning/aot.py says how). Exit code 2 if
it does not fit, naming what to change.

--topology defaults to the config's `target_topology`, else the local devices; --num_slices N
compiles for N such slices joined by the data-center network (the mesh's `dcn` axis). A TPU
topology needs libtpu (`pip install "jax[tpu]"`, see docs/pod.md); on a machine without TPUs set
JAX_PLATFORMS=cpu so JAX does not wait for one.
"""

import os
import sys

from absl import app
from absl import flags
from ml_collections import config_flags

from vit_jax import startup
from vit_jax.config import args as config_args

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file(
    "config", None, "Config file, optionally with :ARGS.", lock_config=True
)
flags.DEFINE_string(
    "topology",
    None,
    "TPU slice, e.g. v5p-64, v4-32, v5e-16, v6e-16 or v5p:2x4x4; default: "
    "the config's target_topology, else the local devices.",
)
flags.DEFINE_integer(
    "num_slices", 1, "Slices of --topology joined over the data-center network (a dcn mesh axis)."
)
flags.DEFINE_bool(
    "table",
    False,
    "Compile every paper recipe on its slice (vit_jax/tpu_planning/pod_table.py) and print "
    "docs/pod.md's table and the rows' commands.",
)
flags.DEFINE_multi_string(
    "table_row",
    None,
    "With --table: compile only this row (its recipe name in vit_jax/tpu_planning/pod_table.py "
    "ROWS, e.g. 'ViT-g/14, ImageNet-21k'; repeatable) and print its line of the table.",
)


def plan(config, topology: str | None = None, num_slices: int = 1):
  """Checks `config`, compiles its train step for the slice(s) and returns the aot.Report."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import errors
  from vit_jax import tasks
  from vit_jax.config import checks
  from vit_jax.tpu_planning import aot
  from vit_jax.training import setup as setup_lib
  from vit_jax.training import train

  checks.validate_config(config)
  name = topology or config.target_topology
  if num_slices < 1 or (num_slices > 1 and not name):
    raise errors.ConfigError(
        f"--num_slices={num_slices}: give 1, or 2 or more with a TPU slice "
        "(--topology or the config's target_topology), e.g. --topology=v5p-16 --num_slices=2."
    )
  devices = aot.parse_topology(name).devices(num_slices) if name else None
  task = tasks.build_task_without_data(config)
  setup = setup_lib.prepare(config, task, devices)  # mesh and batch checked before compiling
  where = name or "the local devices"
  where += f" x {num_slices} slices" if num_slices > 1 else ""
  print(f"Compiling the train step for {where}...", flush=True)
  return aot.compile_report(setup, train.jit_update_step(config, setup), config.batch_size)


def print_table(names: list[str] | None = None) -> None:
  """Compiles every row of docs/pod.md's table (minutes each), printing each report, then the
  table and the rows' commands; with `names`, only those rows, then their lines of the table."""
  from vit_jax import errors  # pylint: disable=g-import-not-at-top
  from vit_jax.tpu_planning import pod_table  # pylint: disable=g-import-not-at-top

  unknown = sorted(set(names or ()) - set(dict(pod_table.ROWS)))
  if unknown:
    raise errors.ConfigError(
        f"--table_row={unknown[0]!r} is not a row of the table; choose from "
        f"{', '.join(repr(name) for name, _ in pod_table.ROWS)}."
    )
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  rows = []
  for name, args in pod_table.ROWS:
    if names and name not in names:
      continue
    config = pod_table.config_of(args, root)
    report = plan(config)
    print(report.text(), flush=True)
    rows.append(pod_table.markdown_row(name, config.target_topology, report))
  print("\n" + ("\n".join(rows) if names else pod_table.markdown(rows)))


def main(argv):
  del argv
  startup.quiet_startup()
  from vit_jax import errors  # pylint: disable=g-import-not-at-top
  from vit_jax.tpu_planning import aot  # pylint: disable=g-import-not-at-top

  try:
    if FLAGS.table:
      print_table(FLAGS.table_row)
      return
    if FLAGS.config is None:
      print("error: --config is required, e.g. --config=configs/vit.py", file=sys.stderr)
      sys.exit(2)
    report = plan(FLAGS.config, FLAGS.topology, FLAGS.num_slices)
    print(report.text(), flush=True)
    aot.require_fit(report)
  except errors.USER_ERRORS as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
  app.run(main, flags_parser=lambda argv: config_args.parse_command_line(FLAGS, argv))
