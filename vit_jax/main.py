"""Trains a model from a config: `python -m vit_jax.main --config=configs/X.py:ARGS --workdir=W`.

`--config.key=value` overrides any key of the config; an unknown key is an error (exit code 2).
Rerunning the same command resumes from the latest checkpoint in W/checkpoints.
"""

import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from vit_jax import startup
from vit_jax.config import args as config_args

startup.set_cpu_xla_defaults()  # before the backend starts; see startup.py

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file(
    "config", None, "Config file, optionally with :ARGS.", lock_config=True
)
flags.DEFINE_string("workdir", None, "Directory for checkpoints, logs and metrics.")
flags.DEFINE_string("coordinator_address", None, "Multi-process: HOST:PORT of process 0.")
flags.DEFINE_integer("num_processes", None, "Multi-process: number of processes.")
flags.DEFINE_integer("process_id", None, "Multi-process: this process's index.")
flags.DEFINE_integer(
    "heartbeat_timeout", 60, "Multi-process: seconds after which a silent peer fails the job."
)


def parse_flags(argv):
  """absl parsing, but a bad flag or config key is one clear line and exit code 2."""
  return config_args.parse_command_line(FLAGS, argv)


def main(argv):
  del argv
  startup.quiet_startup()  # before TF, JAX and orbax load
  logging.set_verbosity(logging.WARNING)  # orbax logs every file it writes at INFO
  if FLAGS.config is None or FLAGS.workdir is None:
    print(
        "error: both --config and --workdir are required, e.g.\n  python -m vit_jax.main "
        "--config=configs/vit.py --workdir=workdirs/digits",
        file=sys.stderr,
    )
    sys.exit(2)
  # pylint: disable=g-import-not-at-top
  import jax

  from vit_jax import errors
  from vit_jax.training import job_end
  from vit_jax.training import mesh
  from vit_jax.training import train

  jax.config.update("jax_threefry_partitionable", True)
  mesh.initialize(
      FLAGS.coordinator_address, FLAGS.num_processes, FLAGS.process_id, FLAGS.heartbeat_timeout
  )
  note = startup.slow_gpu_scatter_note()  # after the backend may start (multi-process: above)
  if note and jax.process_index() == 0:
    print(note, file=sys.stderr)
  try:
    with errors.exit_on_user_error(where=FLAGS.workdir, end=job_end.end):
      result = train.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  except train.NonFiniteError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(3)
  if jax.process_index() == 0:
    by_evaluator = {}  # "NAME/metric" -> {NAME: {metric: value}}
    for key, value in result.items():
      if "/" in key:
        name, metric = key.split("/", 1)
        by_evaluator.setdefault(name, {})[metric] = value
    for name, metrics in by_evaluator.items():
      print(f"Final {name}: " + "  ".join(f"{k}={v:.4g}" for k, v in metrics.items()), flush=True)
      if "accuracy" in metrics:
        print(f"Final {name} accuracy: {100 * metrics['accuracy']:.2f}%", flush=True)


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
