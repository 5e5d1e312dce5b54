"""Tokenizes a text config's dataset once into a token store that training reads by index.

  python -m vit_jax.prepare --config=configs/gpt.py:dataset=c4,variant=gpt2 \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=50257 --output=DIR
  python -m vit_jax.main --config=configs/gpt.py:dataset=c4,variant=gpt2 \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=50257 \
      --config.token_store=DIR --workdir=W

The store holds the splits the config trains and evaluates on (--splits to choose), tokenized
with the tokenizer its `tokenizer` settings describe (trained on the training split's first
`max_train_texts` texts, or loaded from `tokenizer.path`), saved in DIR/tokenizer; a run on the
store must name the same settings. DIR is a local folder or gs://BUCKET/...

Parallel: --workers processes on this machine (default: one per core); on several hosts, run
the same command on each with --task_index=I --num_tasks=N (scripts/launch_local.py sets them
through JAX_PROCESS_ID and JAX_NUM_PROCESSES). Rerun the command after an interruption: it goes
on from the shards that are done. The store is read only once DIR/store.json is written, after
its last shard (vit_jax/data/text/store_writer.py).
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
flags.DEFINE_string("output", None, "The store's folder: a new one, local or gs://BUCKET/...")
flags.DEFINE_list("splits", None, "Splits to tokenize; default: those the config reads.")
flags.DEFINE_integer("workers", None, "Processes tokenizing shards at once; default: the cores.")
flags.DEFINE_integer("examples_per_shard", None, "Examples per shard (default 100,000).")
flags.DEFINE_integer(
    "task_index", None, "This host's task, of --num_tasks (default: JAX_PROCESS_ID, else 0)."
)
flags.DEFINE_integer(
    "num_tasks", None, "Hosts preparing the store together (default: JAX_NUM_PROCESSES, else 1)."
)


def main(argv):
  del argv
  startup.quiet_startup()
  # pylint: disable=g-import-not-at-top
  from vit_jax import errors
  from vit_jax.config import checks
  from vit_jax.data.text import store_writer

  if FLAGS.config is None or FLAGS.output is None:
    print(
        "error: both --config and --output are required, e.g. python -m vit_jax.prepare "
        "--config=configs/gpt.py:dataset=c4 --output=/data/c4_tokens",
        file=sys.stderr,
    )
    sys.exit(2)
  config = FLAGS.config
  task_index = FLAGS.task_index
  if task_index is None:
    task_index = int(os.environ.get("JAX_PROCESS_ID", 0))
  num_tasks = FLAGS.num_tasks or int(os.environ.get("JAX_NUM_PROCESSES", 1))
  for name in ("workers", "examples_per_shard", "num_tasks"):
    if FLAGS[name].value is not None and FLAGS[name].value < 1:
      print(f"error: --{name}={FLAGS[name].value} must be at least 1.", file=sys.stderr)
      sys.exit(2)
  with errors.exit_on_user_error(where=FLAGS.output):
    checks.validate_preparation(config, FLAGS.output, FLAGS.splits)
    finished = store_writer.prepare(
        config,
        FLAGS.output,
        split_names=FLAGS.splits,
        examples_per_shard=FLAGS.examples_per_shard or store_writer.EXAMPLES_PER_SHARD,
        workers=FLAGS.workers or store_writer.default_workers(),
        task_index=task_index,
        num_tasks=num_tasks,
    )
  del finished  # another task's last shard finishes the store: not an error here


if __name__ == "__main__":
  app.run(main, flags_parser=lambda argv: config_args.parse_command_line(FLAGS, argv))
