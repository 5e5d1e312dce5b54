"""Compiles the trainer's step for a TPU slice from any machine and says whether it fits.

  python -m vit_jax.compile --config=configs/vit.py:dataset=imagenet2012,variant=B/16 \
      --topology=v5p-32

The step is the trainer's own (`prepare` and `jit_update_step` in vit_jax/training/train.py: task,
model, optimizer, mesh and partitioning) over abstract inputs: no data is read and no array
allocated. Printed per device: params + optimizer state, temporaries and the total against the
chip's HBM, XLA's FLOPs per step against the model's own count, and the collectives in the step.
Exit code 2 if it does not fit, naming what to change. --topology defaults to the config's
`target_topology`, else the local devices. A TPU topology needs libtpu (`pip install "jax[tpu]"`,
see docs/pod.md); on a machine without TPUs set JAX_PLATFORMS=cpu so JAX does not wait for one.
"""

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


def main(argv):
  del argv
  startup.quiet_startup()
  # pylint: disable=g-import-not-at-top
  from vit_jax import errors
  from vit_jax import tasks
  from vit_jax.config import checks
  from vit_jax.training import aot
  from vit_jax.training import train

  if FLAGS.config is None:
    print("error: --config is required, e.g. --config=configs/vit.py", file=sys.stderr)
    sys.exit(2)
  config = FLAGS.config
  try:
    checks.validate_config(config)
    name = FLAGS.topology or config.target_topology
    devices = aot.parse_topology(name).devices() if name else None
    task = tasks.build_task_without_data(config)
    setup = train.prepare(config, task, devices)  # mesh and batch checked before compiling
    print(f"Compiling the train step for {name or 'the local devices'}...", flush=True)
    report = aot.compile_report(setup, train.jit_update_step(config, setup), config.batch_size)
    print(report.text(), flush=True)
    aot.require_fit(report)
  except errors.USER_ERRORS as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
  app.run(main, flags_parser=lambda argv: config_args.parse_command_line(FLAGS, argv))
