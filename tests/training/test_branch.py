"""A cooldown branched off a run's checkpoint (`--config.branch_from=W:STEP`) is the run that
trains from scratch to the branch's length: the same parameters and optimizer state, because it
restores the parent's state and data position; the parent is only read; a branch that cannot
continue its parent (its cooldown had begun, or its config at STEP differs) is one clear error
before anything is written."""

import json
import os
import shutil

import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs
from vit_jax import errors
from vit_jax.training import branch
from vit_jax.training import train

BRANCH_POINT, PARENT_STEPS, BRANCH_STEPS, BRANCH_COOLDOWN = 6, 12, 9, 3
COOLDOWN_START = 8  # the parent's cooldown of 4 steps to step 12 starts here: a step it keeps
IN_COOLDOWN = 10  # a step the parent keeps after its cooldown began


def config(digits_dir, total_steps, cooldown_steps, **extra):
  c = tiny_configs.tiny_vit(digits_dir, total_steps)
  c.model.dropout_rate = 0.1  # the dropout key follows the step: a wrong step would show
  c.optimizer.update(
      schedule="rsqrt", rsqrt_timescale=4, warmup_steps=2, cooldown_steps=cooldown_steps
  )
  c.update(extra)
  return c


@pytest.fixture(scope="module")
def parent(digits_dir, tmp_path_factory):
  """A 12-step rsqrt run keeping its steps 6, 8 and 10, trained in two attempts: 6 steps without a
  cooldown or an EMA, then resumed to 12 with a cooldown of 4 and an EMA (as a long run is
  extended, and its EMA turned on, along the way)."""
  workdir = str(tmp_path_factory.mktemp("branch") / "parent")
  first = config(digits_dir, BRANCH_POINT, 0, keep_checkpoint_steps=(BRANCH_POINT,))
  train.train_and_evaluate(first, workdir)
  extended = config(
      digits_dir,
      PARENT_STEPS,
      4,
      keep_checkpoint_steps=(BRANCH_POINT, COOLDOWN_START, IN_COOLDOWN),
      keep_checkpoints=1,
      ema_decay=0.9,
  )
  train.train_and_evaluate(extended, workdir)
  return workdir


def test_a_branch_equals_the_run_trained_from_scratch_to_its_length(digits_dir, parent, tmp_path):
  """Branched at a step saved before the parent's last attempt turned its EMA on: the config
  the branch repeats is the one that saved the step, without one."""
  assert sorted(os.listdir(os.path.join(parent, "checkpoints")), key=int) == ["6", "8", "10", "12"]
  untouched = helpers.snapshot(parent)
  straight, branched = str(tmp_path / "straight"), str(tmp_path / "branch")
  train.train_and_evaluate(config(digits_dir, BRANCH_STEPS, BRANCH_COOLDOWN), straight)
  branch_config = config(
      digits_dir, BRANCH_STEPS, BRANCH_COOLDOWN, branch_from=f"{parent}:{BRANCH_POINT}"
  )
  train.train_and_evaluate(branch_config, branched)

  want = tiny_configs.read_state(straight, BRANCH_STEPS)
  got = tiny_configs.read_state(branched, BRANCH_STEPS)
  assert sorted(got) == sorted(want) and any("opt_state" in k for k in got)
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
  # It trained only the steps after the branch point, and logged them from there.
  steps = [r["step"] for r in helpers.read_metrics(branched) if "train_loss" in r]
  assert steps == list(range(BRANCH_POINT + 1, BRANCH_STEPS + 1))
  assert helpers.snapshot(parent) == untouched


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(branch_from="{parent}:5"),
            "has no finished checkpoint at step 5 (its steps: 6, 8, 10, 12); branch at one of "
            "those, or give the parent --config.keep_checkpoint_steps=(5,)",
        ),
        (dict(branch_from="{parent}"), "must be WORKDIR:STEP, e.g. workdirs/long_run:8000"),
        (
            dict(total_steps=8),
            "with --config.optimizer.cooldown_steps=3 and --config.total_steps=8: the cooldown "
            "must start at or after the branch point, e.g. --config.total_steps=9",
        ),
        (dict(seed=1), "differs from the parent's at step 6 (seed: parent 0, here 1)"),
        (dict(schedule="cosine"), "the schedule 'cosine' depends on total_steps"),
        (  # the parent's last attempt had an EMA; the attempt that saved step 6 had none
            dict(ema_decay=0.9),
            "differs from the parent's at step 6 (ema_decay: parent None, here 0.9)",
        ),
        (
            dict(branch_from="{parent}:10", total_steps=13, ema_decay=0.9),
            "was cooling down at step 10 (its cooldown of 4 steps to total_steps=12 starts at "
            "step 8), so this branch would not be the run trained straight to its length; "
            "branch at step 8 or before",
        ),
        (  # extending the finished parent
            dict(branch_from="{parent}:12", total_steps=15, ema_decay=0.9),
            "was cooling down at step 12 (its cooldown of 4 steps to total_steps=12 starts at "
            "step 8)",
        ),
    ],
)
def test_a_branch_that_cannot_continue_its_parent_is_refused_untouched(
    digits_dir, parent, tmp_path, change, message
):
  change = dict(change)
  branch_from = change.pop("branch_from", "{parent}:6").format(parent=parent)
  c = config(
      digits_dir, change.pop("total_steps", BRANCH_STEPS), BRANCH_COOLDOWN, branch_from=branch_from
  )
  if "schedule" in change:
    c.optimizer.schedule = change.pop("schedule")
  c.update(change)
  untouched = helpers.snapshot(parent)
  with pytest.raises(errors.UserError) as raised:
    train.train_and_evaluate(c, str(tmp_path / "branch"))
  assert message in str(raised.value)
  assert not (tmp_path / "branch" / "config.json").exists()
  assert helpers.snapshot(parent) == untouched


def test_a_branch_at_the_start_of_its_parents_cooldown_is_allowed(digits_dir, parent, tmp_path):
  """Both cooldowns start at the branch point: the parent's (step 8 of 12, 4 steps) and the
  branch's (step 8 of 11, 3 steps); the step before the parent's cooldown is still its
  schedule's, so the branch is the run trained straight to its length."""
  c = config(digits_dir, 11, 3, branch_from=f"{parent}:{COOLDOWN_START}", ema_decay=0.9)
  branch.check(c, str(tmp_path / "branch"))  # no error


def test_the_command_line_names_the_problem_in_one_line(parent, tmp_path):
  done = helpers.run(
      helpers.main_command(
          tmp_path / "branch",
          "",
          f"--config.branch_from={parent}:{IN_COOLDOWN}",
          "--config.optimizer.schedule=rsqrt",
          "--config.optimizer.cooldown_steps=3",
          "--config.total_steps=13",
      )
  )
  assert done.returncode == 2
  errors_seen = [line for line in done.stderr.splitlines() if line.startswith("error")]
  assert len(errors_seen) == 1 and "was cooling down at step 10" in errors_seen[0], done.stderr
  assert not (tmp_path / "branch").exists()


def _as_saved_before(parent, tmp_path, steps_record_config: bool):
  """A copy of `parent` as older code left it: without optimizer.head_weight_decay_mult (a key
  added since) in the configs it saved; and, unless `steps_record_config`, without the run config
  in its steps (only config.json, its last attempt's, with the EMA turned on after step 6)."""
  old = tmp_path / "old_parent"
  shutil.copytree(parent, old)
  records = [old / "checkpoints" / step / "model" / "metadata" for step in ("6", "8", "10", "12")]
  for path in [old / "config.json", *records]:
    saved = json.loads(path.read_text())
    if path.name == "config.json":
      del saved["optimizer"]["head_weight_decay_mult"]
    elif steps_record_config:
      saved["run_config"]["optimizer"].pop("head_weight_decay_mult")
    else:
      saved.pop("run_config", None)  # (older code saved none)
    path.write_text(json.dumps(saved))
  return str(old)


@pytest.mark.parametrize("steps_record_config", [True, False])
def test_a_parent_saved_before_a_key_existed_is_read_with_the_keys_added_since(
    digits_dir, parent, tmp_path, steps_record_config
):
  """Its saved configs are read as the evaluator reads them (defaults.from_saved): the key added
  since is what that run trained with, not None; and a step without an EMA had none."""
  old = _as_saved_before(parent, tmp_path, steps_record_config)
  at_6 = lambda **extra: config(
      digits_dir, BRANCH_STEPS, BRANCH_COOLDOWN, branch_from=f"{old}:{BRANCH_POINT}", **extra
  )
  branch.check(at_6(), str(tmp_path / "branch"))
  with pytest.raises(errors.ConfigError, match=r"at step 6 \(ema_decay: parent None, here 0\.9\)"):
    branch.check(at_6(ema_decay=0.9), str(tmp_path / "branch"))


@pytest.mark.slow  # 2 more tiny runs and a bucket
def test_a_branch_reads_its_parent_from_a_bucket(digits_dir, parent, gcs, tmp_path):
  """The parent in gs:// (as a pod job's workdir), the branch local: the same state as the branch
  of the local parent."""
  bucket_parent = gcs.new_dir("parent")
  train.train_and_evaluate(
      config(digits_dir, PARENT_STEPS, 4, keep_checkpoint_steps=(BRANCH_POINT,)), bucket_parent
  )
  local, from_bucket = str(tmp_path / "local"), str(tmp_path / "from_bucket")
  for branch_from, workdir in ((parent, local), (bucket_parent, from_bucket)):
    train.train_and_evaluate(
        config(
            digits_dir, BRANCH_STEPS, BRANCH_COOLDOWN, branch_from=f"{branch_from}:{BRANCH_POINT}"
        ),
        workdir,
    )
  want = tiny_configs.read_state(local, BRANCH_STEPS)
  got = tiny_configs.read_state(from_bucket, BRANCH_STEPS)
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
