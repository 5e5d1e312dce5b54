"""Evaluates a checkpoint once with every evaluator of a config, without training:

  python -m vit_jax.evaluate --checkpoint=W                     # a workdir, with its own config
  python -m vit_jax.evaluate --checkpoint=W --evals=fewshot --output=fewshot.json
  python -m vit_jax.evaluate --checkpoint=ViT-B_16.npz \\
      --config=configs/vit.py:dataset=cifar10 --config.image_size=224

--checkpoint: our workdir (its newest intact step) or one step's directory, an original ViT or
  big_vision .npz, or a Hugging Face directory: whatever `vit_jax.convert` reads.
--config: the data and the evaluators (`config.evals`, see vit_jax/evaluate/__init__.py), with
  `--config.key=value` overrides as for training. Default: the config the workdir was trained
  with. For our workdirs the config's model must be the checkpoint's; an imported checkpoint
  brings its own model, and the config then gives only the data and evaluators.
--evals=a,b: run only these evaluators of the config.
--batch_size: the eval batch (default: the config's).
--output=FILE.json: also write the metrics there (the file must not exist yet); a `decoding`
  evaluator NAME writes its decoded lines beside it, in decodes/NAME.json (vit_jax/workdir.py).

Prints one row per metric (evaluator, metric, value): the same numbers, under the same names, as
the trainer logs. Bad input (a checkpoint whose model is not the config's, an unknown evaluator,
a dataset that does not fit the model): one `error:` line, exit code 2.
"""

import json

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from vit_jax import data
from vit_jax import errors
from vit_jax import startup
from vit_jax import storage
from vit_jax.config import args as config_args

startup.set_cpu_xla_defaults()  # before the backend starts; see startup.py

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs: a test that imports `evaluate` beside another
  command (vit_jax.main defines its own --config) would otherwise define them twice."""
  flags.DEFINE_string("checkpoint", None, "Our workdir or step dir, an .npz, or a HF directory.")
  config_flags.DEFINE_config_file(
      "config", None, "Config file (data and evaluators), optionally with :ARGS.", lock_config=True
  )
  flags.DEFINE_list("evals", [], "Names of the config's evaluators to run (default: all).")
  flags.DEFINE_integer("batch_size", None, "Eval batch size (default: the config's).")
  flags.DEFINE_string("output", None, "JSON file for the metrics (must not exist yet).")


def workdir_of(path: str) -> str | None:
  """Our workdir holding `path` (the workdir itself or one of its steps), or None."""
  from vit_jax import workdir as workdir_lib  # pylint: disable=g-import-not-at-top

  for candidate in (path, storage.parent(storage.parent(storage.absolute(path)))):
    if storage.isfile(workdir_lib.config_path(candidate)) and storage.isdir(
        workdir_lib.checkpoints_dir(candidate)
    ):
      return candidate
  return None


def run_config(checkpoint_path: str, config, ckpt, batch_size=None):
  """The config to evaluate with, as a mutable ConfigDict: `config` (from --config) or the
  workdir's; an imported checkpoint's model replaces the config's; `batch_size` (--batch_size)
  replaces the config's if given."""
  # pylint: disable=g-import-not-at-top
  import ml_collections

  from vit_jax import tasks
  from vit_jax import workdir as workdir_lib
  from vit_jax.config import defaults as config_defaults
  from vit_jax.interop import assets

  workdir = workdir_of(checkpoint_path)
  if config is None:
    if workdir is None:
      raise errors.ConfigError(
          f"{checkpoint_path} is not one of our workdirs, so it has no data settings: pass "
          "--config=configs/<family>.py:dataset=NAME (the model is read from the checkpoint)."
      )
    saved = json.loads(storage.read_text(workdir_lib.config_path(workdir)))
    config = ml_collections.ConfigDict(config_defaults.from_saved(saved))
  else:
    config = ml_collections.ConfigDict(config.to_dict())  # unlocked, references resolved
  if workdir is None:  # imported: its architecture is the checkpoint's
    task = tasks.task_of_model(ckpt.model["name"])
    if config.task != task:
      raise errors.ConfigError(
          f"{checkpoint_path} holds a {ckpt.model['name']!r} model ({task}), but --config "
          f"trains {config.task}; pass a {task} config."
      )
    config.model = ml_collections.ConfigDict(ckpt.model)
    if "num_classes" in ckpt.model and "num_classes" in config:
      config.num_classes = ckpt.model["num_classes"]
    hf_tokenizer = storage.join(checkpoint_path, assets.HF_TOKENIZER)
    if not tasks.TASKS[task].reads_images and storage.isfile(hf_tokenizer):
      config.tokenizer.update(path=hf_tokenizer, kind="byte_bpe")  # what tokenizer.json loads as
  if batch_size:
    config.batch_size = batch_size
  config.grad_accum_steps = 1  # the batch need not split into training's microbatches
  return config, workdir


def check_params_fit(setup, ckpt, checkpoint_path: str) -> None:
  """A ConfigError unless the checkpoint's parameters are exactly those of the config's model."""
  from vit_jax import interop  # pylint: disable=g-import-not-at-top

  want = {k: tuple(v.shape) for k, v in interop.flatten(setup.abstract_state["params"]).items()}
  have = {k: tuple(v.shape) for k, v in interop.flatten(ckpt.tree()).items()}
  if want == have:
    return
  problems = [
      f"{k} is {have[k]} in the checkpoint and {want[k]} in the config's model"
      for k in sorted(want.keys() & have.keys())
      if want[k] != have[k]
  ]
  problems += [f"{k} only in the config's model" for k in sorted(want.keys() - have.keys())]
  problems += [f"{k} only in the checkpoint" for k in sorted(have.keys() - want.keys())]
  raise errors.ConfigError(
      f"the model of {checkpoint_path} is not the config's ({len(problems)} parameter(s) differ: "
      f"{'; '.join(problems[:3])}); pass the config it was trained with, or leave out --config "
      "to use its workdir's."
  )


def evaluate(
    checkpoint_path: str, config=None, names=(), files_dir=None, batch_size=None
) -> tuple[dict, list]:
  """({"NAME/metric": value}, notes) of every evaluator (or those named) on the checkpoint.
  `files_dir`: where evaluators that write files beside their metrics write them."""
  # pylint: disable=g-import-not-at-top
  import jax

  from vit_jax import evaluate as evaluators
  from vit_jax import interop
  from vit_jax import tasks
  from vit_jax import workdir as workdir_lib
  from vit_jax.config import checks
  from vit_jax.training import setup as setup_lib

  ckpt = interop.load(checkpoint_path)
  config, workdir = run_config(checkpoint_path, config, ckpt, batch_size)
  evals = evaluators.evals_of(config)
  unknown = [n for n in names if n not in evals]
  if unknown:
    raise errors.ConfigError(
        f"--evals names {', '.join(unknown)}, which the config does not have; its evaluators: "
        f"{', '.join(evals)}."
    )
  config.evals = {n: settings for n, settings in evals.items() if not names or n in names}
  if files_dir is not None:
    for name, settings in config.evals.items():
      path = workdir_lib.decodes_path(files_dir, name, None)
      if settings.kind == "decoding" and storage.exists(path):
        raise errors.ConfigError(
            f"{path} exists (the decoded lines of --evals={name}); choose a new --output folder "
            "(nothing was written)."
        )
  checks.validate_config(config)
  task = tasks.build_task(config, workdir)
  setup = setup_lib.prepare(config, task)
  check_params_fit(setup, ckpt, checkpoint_path)
  built = evaluators.build(config, task, setup, files_dir=files_dir)
  params = jax.device_put(ckpt.tree(), setup.state_shardings["params"])
  metrics = {f"{e.name}/{k}": v for e in built for k, v in e.run(params).items()}
  return metrics, list(ckpt.notes)


def table(metrics: dict) -> str:
  rows = [tuple(key.split("/", 1)) + (f"{value:.6g}",) for key, value in metrics.items()]
  rows.insert(0, ("evaluator", "metric", "value"))
  widths = [max(len(row[i]) for row in rows) for i in range(3)]
  return "\n".join(
      "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows
  )


def main(argv):
  del argv
  startup.quiet_startup()  # before TF, JAX and orbax load
  logging.set_verbosity(logging.WARNING)
  with errors.exit_on_user_error(where=FLAGS.output):
    if not FLAGS.checkpoint:
      raise errors.ConfigError(
          "pass --checkpoint (a workdir, an .npz or a Hugging Face directory)."
      )
    if FLAGS.output and storage.exists(FLAGS.output):
      raise errors.ConfigError(
          f"--output {FLAGS.output} exists; choose a new file (nothing was written)."
      )
    with data.opened_once():  # the evaluators' checks and their reads share each dataset
      files_dir = storage.parent(storage.absolute(FLAGS.output)) if FLAGS.output else None
      metrics, notes = evaluate(
          FLAGS.checkpoint, FLAGS.config, FLAGS.evals, files_dir, FLAGS.batch_size
      )
    for note in notes:
      print(f"checkpoint: {note}")
    print(table(metrics), flush=True)
    if FLAGS.output:
      with storage.open(FLAGS.output, "x", encoding="utf-8") as f:
        json.dump({"checkpoint": FLAGS.checkpoint, "notes": notes, "metrics": metrics}, f, indent=1)


if __name__ == "__main__":
  define_flags()
  app.run(main, flags_parser=lambda argv: config_args.parse_command_line(FLAGS, argv))
