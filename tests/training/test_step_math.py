"""The update step's arithmetic, through the real trainer: gradient accumulation and the guard."""

import jax
import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs as configs
from vit_jax import tasks
from vit_jax.training import optimizer as optimizer_lib
from vit_jax.training import train


def flat(tree) -> dict:
  return {
      jax.tree_util.keystr(p): np.asarray(v)
      for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]
  }


def halves_totals(config, workdir):
  """The task's loss normalizers of each half of the first training batch."""
  task = tasks.build_task(config, str(workdir))
  batch = next(iter(task.train_batches(0, 0, 1)))
  half = config.batch_size // 2
  return [
      {k: float(v) for k, v in task.totals({k: x[s] for k, x in batch.items()}).items()}
      for s in (slice(None, half), slice(half, None))
  ]


# seq2seq's halves hold different token counts; the ViT's equal halves are the easier case.
@pytest.mark.parametrize("family", ["seq2seq", pytest.param("vit", marks=pytest.mark.slow)])
def test_two_microbatches_give_the_full_batch_step(tmp_path, digits_dir, family):
  """One SGD step with grad_accum_steps=2 equals the step on the whole batch, to 1e-6.

  SGD without clipping makes the update proportional to the gradient, so a gradient scaled by
  the number of microbatches (each divided by its own count) or a mean of microbatch means
  (halves with different token counts) moves the params elsewhere.
  """
  make = (
      (lambda: configs.tiny_seq2seq(1))
      if family == "seq2seq"
      else (lambda: configs.tiny_vit(digits_dir, 1))
  )
  if family == "seq2seq":
    halves = halves_totals(make(), tmp_path / "probe")
    assert halves[0]["tokens"] != halves[1]["tokens"], halves
  params = {}
  for accum in (1, 2):
    config = configs.sgd(make())
    config.grad_accum_steps = accum
    params[accum] = flat(
        train.train_and_evaluate(config, str(tmp_path / f"accum{accum}"))["final_params"]
    )
  for key, whole in params[1].items():
    np.testing.assert_allclose(params[2][key], whole, rtol=0, atol=1e-6, err_msg=key)


def nan_run(digits_dir, workdir, mode):
  """Adam, a checkpoint after every step, and a NaN injected at step 3 of 4."""
  config = configs.tiny_vit(digits_dir, 4)
  config.optimizer.update(warmup_steps=0, schedule="constant")
  config.checkpoint_every, config.keep_checkpoints = 1, 10
  config.debug_nan_at_step, config.nonfinite = 3, mode
  return train.train_and_evaluate(config, str(workdir))


def saved_steps(workdir):
  return sorted(int(d.name) for d in (workdir / "checkpoints").iterdir() if d.name.isdigit())


def test_nonfinite_step_changes_no_param_or_optimizer_state(tmp_path, digits_dir):
  skip_dir, stop_dir = tmp_path / "skip", tmp_path / "stop"
  nan_run(digits_dir, skip_dir, "skip")
  before, after, later = (configs.read_state(skip_dir, s) for s in (2, 3, 4))
  assert after["['step']"] == 3
  for key in before:
    if key != "['step']":  # params and every optimizer slot (Adam's moments and count)
      np.testing.assert_array_equal(after[key], before[key], err_msg=key)
  assert any(not np.array_equal(later[k], after[k]) for k in after if "params" in k)
  last = [r for r in helpers.read_metrics(skip_dir) if "train_loss" in r][-1]
  assert last["skipped_steps"] == 1

  with pytest.raises(train.NonFiniteError, match="at step 3"):
    nan_run(digits_dir, stop_dir, "stop")
  assert saved_steps(stop_dir) == [1, 2]  # the bad step's state was never saved
  stopped = configs.read_state(stop_dir, 2)
  for key in before:
    np.testing.assert_array_equal(stopped[key], before[key], err_msg=key)


def test_a_logged_record_averages_every_step_since_the_last_one(tmp_path, digits_dir):
  """A checkpoint between two log steps does not cut the logged window short."""
  losses = {}
  for name, log_every, checkpoint_every in (("every", 1, 4), ("saves", 4, 2)):
    config = configs.tiny_vit(digits_dir, 4)
    config.log_every, config.checkpoint_every, config.keep_checkpoints = (
        log_every,
        checkpoint_every,
        10,
    )
    train.train_and_evaluate(config, str(tmp_path / name))
    records = [r for r in helpers.read_metrics(tmp_path / name) if "train_loss" in r]
    losses[name] = {r["step"]: r["train_loss"] for r in records}
  assert list(losses["saves"]) == [4]
  expected = np.mean([losses["every"][s] for s in (1, 2, 3, 4)])
  np.testing.assert_allclose(losses["saves"][4], expected, rtol=1e-6)


def test_the_logged_learning_rate_is_the_applied_one_after_a_skipped_step(tmp_path, digits_dir):
  """A skipped step does not advance the optimizer's count, so the rate of each later step is
  the schedule at that count (read from the checkpoint before it), not at the step."""
  config = configs.tiny_vit(digits_dir, 4)
  config.optimizer.update(warmup_steps=4, schedule="linear")  # a rate that changes every step
  config.checkpoint_every, config.keep_checkpoints = 1, 10
  config.debug_nan_at_step, config.nonfinite = 3, "skip"
  train.train_and_evaluate(config, str(tmp_path))
  schedule = optimizer_lib.learning_rate_schedule(config.optimizer, config.total_steps)
  logged = {
      r["step"]: r["learning_rate"] for r in helpers.read_metrics(tmp_path) if "train_loss" in r
  }
  for step in (2, 3, 4):
    state = configs.read_state(tmp_path, step - 1)
    (count,) = {int(v) for k, v in state.items() if "count" in k}  # Adam's and the schedule's
    np.testing.assert_allclose(logged[step], float(schedule(count)), rtol=1e-6, err_msg=step)
  assert logged[4] == logged[3]  # step 3 was skipped: step 4 applies the rate step 3 would have
