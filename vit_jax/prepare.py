"""Prepares what a config reads, once, before training: its TFDS datasets, and for text a token
store that training reads by index.

Images (docs/imagenet.md): the config's dataset and its evaluators' datasets, into
--config.data_dir (TFDS's data_dir; default ~/tensorflow_datasets). A dataset behind a manual
download reads its files from --manual_dir (default DATA_DIR/downloads/manual): for ImageNet,
ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar.

  python -m vit_jax.prepare --config=configs/vit.py:variant=S/16,dataset=imagenet2012 \
      --config.data_dir=/data/tfds --manual_dir=/data/imagenet_tars
  python -m vit_jax.main --config=configs/vit.py:variant=S/16,dataset=imagenet2012 \
      --config.data_dir=/data/tfds --workdir=W

An hf: dataset (vit_jax/data/hub.py) is downloaded from the hub, or converted from a local folder
in the hub's layout, into the datasets cache (--config.data_dir, else Hugging Face's), which runs
then read, offline too. webdataset shards (wds:, vit_jax/data/image/webdataset.py) are indexed and
checked, as a run's first read would.

An evaluator's dataset that cannot be prepared here (no manual download, or no network: each
file is tried tfds_builders.DOWNLOAD_RETRIES + 1 times, a few seconds) is skipped with one line,
as the run then skips that evaluator;
--datasets=imagenet2012 prepares only the ones named.

Text: the dataset's TFDS data (when it has some and is not prepared), then, with --output, the
token store:

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
through JAX_PROCESS_ID and JAX_NUM_PROCESSES); their TFDS data must be prepared first (the same
command without --output, on one host). Rerun the command after an interruption: it goes on
from the shards that are done. The store is read only once DIR/store.json is written, after its
last shard (vit_jax/data/text/store_writer.py); TFDS renames a dataset's folder into place only
once it is whole.
"""

import atexit
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
    "output", None, "Text: the token store's folder, a new one, local or gs://BUCKET/..."
)
flags.DEFINE_string(
    "manual_dir", None, "A manual download's files (default: DATA_DIR/downloads/manual)."
)
flags.DEFINE_list("splits", None, "Splits to tokenize; default: those the config reads.")
flags.DEFINE_list(
    "datasets", None, "Images: the TFDS datasets to prepare; default: all the config reads."
)
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
  from vit_jax import tasks
  from vit_jax.config import checks

  if FLAGS.config is None:
    print(
        "error: --config is required, e.g. python -m vit_jax.prepare "
        "--config=configs/vit.py:dataset=imagenet2012 --config.data_dir=/data/tfds",
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
    checks.validate_config(config)
    if tasks.TASKS[config.task].reads_images:
      if FLAGS.output is not None:
        raise errors.ConfigError(
            "--output is for a text config's token store; an image dataset is prepared into "
            "--config.data_dir (TFDS's data_dir). Drop --output."
        )
      _prepare_image_datasets(config)
      return
    if FLAGS.output is None:
      if not _prepare_text_dataset(config):
        raise errors.ConfigError(
            f"--output=DIR is required: --config.dataset={config.dataset!r} has no TFDS data to "
            "prepare, only a token store to write (a new folder, local or gs://BUCKET/...)."
        )
      print("To tokenize it into a token store that training reads by index, add --output=DIR.")
      return
    if num_tasks == 1:
      _prepare_text_dataset(config)
    _prepare_token_store(config, task_index, num_tasks)


def _prepare_image_datasets(config) -> None:
  """The config's dataset, then each evaluator's other dataset (skipped with a line if it cannot
  be prepared here)."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import data
  from vit_jax import errors
  from vit_jax import evaluate as evaluators
  from vit_jax.data import hub
  from vit_jax.data import tfds_builders
  from vit_jax.data.image import sources

  evaluated = [s.dataset for s in evaluators.evals_of(config).values() if "dataset" in s]
  read = list(dict.fromkeys([config.dataset, *evaluated]))  # each once, in order
  unknown = sorted(set(FLAGS.datasets or ()) - set(read))
  if unknown:
    raise errors.ConfigError(
        f"--datasets: the config does not read {', '.join(unknown)}; it reads {', '.join(read)}."
    )
  for dataset in FLAGS.datasets or read:
    if dataset.startswith(sources.FOLDER_PREFIX):
      continue  # a folder is read as it is
    try:
      if dataset.startswith(sources.WDS_PREFIX):  # shards are read as they are, by their index
        _index_shards(dataset, config)
        continue
      if dataset.startswith(data.HUB_PREFIX):  # into the datasets cache, read offline by runs
        hub.prepare_images(dataset, data.read_options(config), config.data_dir)
        print(f"{dataset}: in the datasets cache", flush=True)
        continue
      prepared = tfds_builders.prepare(
          dataset, data_dir=config.data_dir, manual_dir=FLAGS.manual_dir
      )
    except errors.UserError as e:
      if dataset == config.dataset:
        raise
      print(f"skipped {dataset!r} (its evaluators are skipped too): {e}", flush=True)
      continue
    print(f"{dataset}: {'prepared' if prepared else 'already prepared'}", flush=True)


def _index_shards(dataset: str, config) -> None:
  """Indexes webdataset shards (their checks included), as the first run would."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import data
  from vit_jax.data.image import sources

  source = sources.open_source(
      dataset,
      data_dir=config.data_dir,
      download=config.download,
      read_options=data.read_options(config),
  )
  splits = dict.fromkeys(s for s in (source.train_split, source.eval_split) if s)
  counts = ", ".join(f"{s} {int(source.read(s, 0, 1).cardinality()):,}" for s in splits)
  print(f"{dataset}: shards indexed ({counts} samples; {source.num_classes} classes)", flush=True)


def _prepare_text_dataset(config) -> bool:
  """The TFDS data behind a text config's dataset, unless it is prepared; returns whether the
  dataset has TFDS data."""
  # pylint: disable=g-import-not-at-top
  from vit_jax.data import tfds_builders
  from vit_jax.data.text import datasets

  spec = datasets.TFDS_DATASETS.get(config.dataset)
  if spec is None:
    return False
  prepared = tfds_builders.prepare(
      spec.tfds_name, data_dir=config.data_dir, manual_dir=FLAGS.manual_dir
  )
  print(f"{spec.tfds_name}: {'prepared' if prepared else 'already prepared'}", flush=True)
  return True


def _prepare_token_store(config, task_index: int, num_tasks: int) -> None:
  # pylint: disable=g-import-not-at-top
  from vit_jax.config import checks
  from vit_jax.data.text import store_writer

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


def _exit_without_teardown(run) -> None:
  """Runs `run` (absl's app.run, which ends by sys.exit, an error line's exit 2 included) and ends
  the process with its exit status once its output is flushed and the atexit functions have run,
  skipping the interpreter's teardown: after an hf: dataset is read, pyarrow's and datasets'
  threads can abort it ("terminate called without an active exception", exit -6;
  huggingface/datasets#7566, apache/arrow#34314) after the work is done. An exception that is no
  sys.exit (a bug's traceback) ends the process as Python ends it."""
  try:
    run()
    status = 0
  except SystemExit as e:
    status = e.code
  if status is None:
    status = 0
  elif not isinstance(status, int):  # sys.exit("message"), as Python prints it
    print(status, file=sys.stderr)
    status = 1
  atexit._run_exitfuncs()  # pylint: disable=protected-access  (logging's flush, pools, profiles)
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more can be said
      pass
  os._exit(status)


if __name__ == "__main__":
  _exit_without_teardown(
      lambda: app.run(main, flags_parser=lambda argv: config_args.parse_command_line(FLAGS, argv))
  )
