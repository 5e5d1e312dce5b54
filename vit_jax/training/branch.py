"""A cooldown branched off another run: `--config.branch_from=WORKDIR:STEP`.

The branch starts from the parent's checkpoint at STEP (its parameters, optimizer state and step,
and so its data position: the input resumes at a step) and trains on in a workdir of its own to
total_steps, cooling down over the last optimizer.cooldown_steps. The parent is only read. Its
schedule must not depend on total_steps before the cooldown (optimizer.BRANCHABLE_SCHEDULES), and
STEP must come no later than the start of the parent's own cooldown, so up to STEP the branch's
learning rate is the parent's: one long run gives a point of a scaling curve at every budget it
is branched at (Zhai et al. 2022, "Scaling Vision Transformers"; Hägele et al. 2024). A branch of
a mixture run (data/text/mixture.py) may read other weights from STEP on, as mid-training and
annealing mixtures do: its `mixture.weights` repeat the parent's up to STEP and add the stage
from there, which its config (and so its record) holds. Everything else that shapes the steps
(model, data, seed, batch, optimizer, EMA) must be the parent's, so the branch continues exactly
the run it names: the config it is compared with is that of the parent's attempt that saved STEP
(recorded with the step, checkpoint.RUN_CONFIG), each key added since as that run had it.

Once the branch has saved a checkpoint of its own, a rerun resumes from that and no longer reads
the parent.
"""

import json

import orbax.checkpoint as ocp

from vit_jax import checkpoint
from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.config import args as config_args
from vit_jax.config import defaults
from vit_jax.training import optimizer

# The keys a branch may set otherwise than its parent: its length and cooldown, and how it runs,
# saves and reports. None of them changes a step before the cooldown.
MAY_DIFFER = (
    "total_steps",
    "optimizer.cooldown_steps",
    "optimizer.cooldown_shape",
    "branch_from",
    "keep_checkpoint_steps",
    "checkpoint_every",
    "keep_checkpoints",
    "async_checkpoints",
    "eval_every",
    "log_every",
    "log_internals",
    "eval_max_batches",
    "evals",
    "progress",
    "profile_steps",
    "profile_all_processes",
    "compilation_cache_dir",
    "check_memory",
    "storage_outage_s",
    "prefetch_batches",
    "hbm_headroom",
    "target_topology",
    "mesh",
    "nonfinite",
    "debug_nan_at_step",
)


# May differ only from the branch point on (mixture.branch_problem says how).
MIXTURE_WEIGHTS = "mixture.weights"


def parse(branch_from: str) -> tuple[str, int]:
  """ "WORKDIR:STEP" -> (WORKDIR, STEP); the workdir may hold colons (gs://...)."""
  workdir, _, step = branch_from.rpartition(":")
  if not workdir or not config_args.is_digits(step):
    raise errors.ConfigError(
        f"--config.branch_from={branch_from!r} must be WORKDIR:STEP, e.g. "
        "workdirs/long_run:8000 (a checkpoint step of that run)."
    )
  return workdir, int(step)


def step_dir(branch_from: str) -> str:
  parent, step = parse(branch_from)
  return storage.join(workdir_lib.checkpoints_dir(parent), str(step))


def check(config, workdir: str) -> None:
  """Raises a UserError naming the problem unless `config` can branch off its parent into
  `workdir`: the parent's checkpoint at STEP exists, the schedule and the cooldowns (the branch's
  and the parent's) fit the branch point, and every key outside MAY_DIFFER is the parent's."""
  parent, step = parse(config.branch_from)
  if storage.absolute(parent) == storage.absolute(workdir):
    raise errors.ConfigError(
        f"--config.branch_from names the run's own --workdir={workdir}; a branch trains in a "
        "workdir of its own (the parent is only read)."
    )
  saved = [int(storage.name(d)) for d in checkpoint.step_dirs(parent)]
  if step not in saved:
    kept = ", ".join(map(str, sorted(saved))) or "none"
    raise errors.MissingFileError(
        f"--config.branch_from: {parent} has no finished checkpoint at step {step} (its steps: "
        f"{kept}); branch at one of those, or give the parent --config.keep_checkpoint_steps="
        f"({step},) so it saves and keeps that step."
    )
  opt = config.optimizer
  if opt.schedule not in optimizer.BRANCHABLE_SCHEDULES:
    raise errors.ConfigError(
        f"--config.branch_from: the schedule {opt.schedule!r} depends on total_steps, so a "
        f"branch's learning rate would differ from its parent's before the cooldown; train the "
        f"parent with one of {', '.join(optimizer.BRANCHABLE_SCHEDULES)}."
    )
  if not opt.cooldown_steps or config.total_steps - opt.cooldown_steps < step:
    raise errors.ConfigError(
        f"--config.branch_from at step {step} with --config.optimizer.cooldown_steps="
        f"{opt.cooldown_steps} and --config.total_steps={config.total_steps}: the cooldown must "
        f"start at or after the branch point, e.g. --config.total_steps="
        f"{step + max(opt.cooldown_steps, 1)} --config.optimizer.cooldown_steps="
        f"{max(opt.cooldown_steps, 1)}."
    )
  parents = parents_config(config.branch_from)
  cooldown, total = parents["optimizer.cooldown_steps"], parents["total_steps"]
  if cooldown and step > total - cooldown:
    raise errors.ConfigError(
        f"--config.branch_from: {parent} was cooling down at step {step} (its cooldown of "
        f"{cooldown} steps to total_steps={total} starts at step {total - cooldown}), so this "
        f"branch would not be the run trained straight to its length; branch at step "
        f"{total - cooldown} or before (a parent keeps a step with "
        "--config.keep_checkpoint_steps)."
    )
  ours = workdir_lib.flatten(json.loads(config.to_json_best_effort()))
  differ = [
      key
      for key in sorted(set(ours) | set(parents))
      if not any(key == k or key.startswith(k + ".") for k in (*MAY_DIFFER, MIXTURE_WEIGHTS))
      and ours.get(key) != parents.get(key)
  ]
  if differ:
    listing = "; ".join(f"{k}: parent {parents.get(k)!r}, here {ours.get(k)!r}" for k in differ[:3])
    more = f" (and {len(differ) - 3} more)" if len(differ) > 3 else ""
    raise errors.ConfigError(
        f"--config.branch_from: this config differs from the parent's at step {step} ({listing}"
        f"{more}); a branch continues its parent's run, so only its length, cooldown and "
        "reporting may change (and a mixture's weights from the branch point on). Use the "
        "parent's config."
    )
  if ours.get(MIXTURE_WEIGHTS) != parents.get(MIXTURE_WEIGHTS):
    from vit_jax.data.text import mixture  # pylint: disable=g-import-not-at-top  (mixtures only)

    mixture.from_config(config)  # its own form first: a ConfigError naming what is wrong
    problem = mixture.branch_problem(
        config.mixture.stores, parents.get(MIXTURE_WEIGHTS), ours.get(MIXTURE_WEIGHTS), step
    )
    if problem:
      raise errors.ConfigError(f"--config.branch_from: {problem}.")


def announcement(config) -> str:
  """What a branch says when it starts: where it branched from, and the mixture it reads from
  there when a stage of its weights starts at the branch point."""
  text = f"Branched from {step_dir(config.branch_from)}."
  step = parse(config.branch_from)[1]
  if "mixture" in config and config.mixture.weights:
    from vit_jax.data.text import mixture  # pylint: disable=g-import-not-at-top  (mixtures only)

    stage = mixture.stage_from(config, step)
    if stage is not None:
      text += f" From step {step} it reads the mixture {stage.text()}."
  return text


def parents_config(branch_from: str) -> dict:
  """The flattened config of the parent's attempt that saved the branch point, each key added
  since as that run had it (defaults.from_saved): the one the step records, else (a step saved
  before steps recorded it) config.json, the last attempt's, with no EMA where the step holds
  none (the last attempt turned it on after the step)."""
  parent, directory = parse(branch_from)[0], step_dir(branch_from)
  saved = _record(directory).get(checkpoint.RUN_CONFIG)
  if saved is None:
    saved = workdir_lib.saved_config(parent, nested=True)
    if saved is None:
      raise errors.MissingFileError(
          f"--config.branch_from: {parent} has no config.json, so it is no run of vit_jax.main."
      )
    if checkpoint.EMA_PARAMS not in _saved_keys(directory):
      saved["ema_decay"] = None
  return workdir_lib.flatten(defaults.from_saved(saved))


def _record(directory: str) -> dict:
  """The model record saved with a step (its model, parameter shapes and run config)."""
  return ocp.Checkpointer(ocp.JsonCheckpointHandler()).restore(
      storage.join(directory, workdir_lib.MODEL_ITEM)
  )


def _saved_keys(directory: str) -> set:
  """The keys of the train state saved with a step (params, opt_state, step[, ema_params])."""
  return set(checkpoint.saved_state_metadata(storage.join(directory, workdir_lib.STATE_ITEM)))


def restore(config, abstract_state, record: dict):
  """The parent's state at the branch point, sharded as `abstract_state` (less the optional state
  the step lacks, which `check` lets through only where the branch's config lacks it too); the
  parent is only read. A checkpoint of another model is a CheckpointMismatchError."""
  directory = step_dir(config.branch_from)
  problems = checkpoint.describe_mismatch(_record(directory), record)
  if problems:
    raise checkpoint.CheckpointMismatchError(
        f"--config.branch_from: {directory} is of a different model than this config:\n"
        f"{problems}\nNothing was written."
    )
  return ocp.StandardCheckpointer().restore(
      storage.join(directory, workdir_lib.STATE_ITEM),
      checkpoint.without_unsaved_state(abstract_state, _saved_keys(directory)),
  )
