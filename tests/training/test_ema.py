"""The EMA of the params (`config.ema_decay`, training/optimizer.py): its recursion and warmup
through the jitted update step (a skipped non-finite step included), exact resume, both evals in one
metrics row, turning it on mid-run, and refusing to drop it."""

import os

import jax
import ml_collections
import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs as configs
from vit_jax import checkpoint
from vit_jax import interop
from vit_jax import tasks
from vit_jax.config import checks
from vit_jax.interop import orbax_format
from vit_jax.sweep import runner
from vit_jax.training import optimizer as optimizer_lib
from vit_jax.training import setup as setup_lib
from vit_jax.training import train


def flat(tree) -> dict:
  return {
      jax.tree_util.keystr(p): np.array(v) for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]
  }


def ema_config(digits_dir, steps: int, decay: float | None = 0.5):
  """The tiny ViT with a constant rate (a run cut in two takes the same steps), only the
  test-split eval (the few-shot probe is slow and adds nothing here), and one compilation cache
  for every run of the session (each run compiles the same steps)."""
  config = configs.tiny_vit(digits_dir, steps)
  config.compilation_cache_dir = os.path.join(digits_dir, "compilation_cache")
  config.optimizer.update(warmup_steps=0, schedule="constant")
  config.evals = ml_collections.ConfigDict({"eval": config.evals.eval.to_dict()})
  config.ema_decay = decay
  return config


def test_decay_warms_up_as_tensorflow_num_updates():
  assert float(optimizer_lib.ema_decay_at(0, 0.999)) == pytest.approx(0.1)
  assert float(optimizer_lib.ema_decay_at(90, 0.999)) == pytest.approx(0.91)
  assert float(optimizer_lib.ema_decay_at(10**6, 0.999)) == pytest.approx(
      0.999
  )  # capped by ema_decay
  assert float(optimizer_lib.ema_decay_at(0, 0.05)) == pytest.approx(0.05)


# The select is the TPU's guard (the branch elsewhere): the same arithmetic, checked in -m slow.
@pytest.mark.parametrize("by_select", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_update_step_follows_the_recursion_and_skips_a_nonfinite_step(
    tmp_path, digits_dir, by_select
):
  """Four jitted steps, the third NaN: ema = d(t) ema + (1 - d(t)) params after each applied
  step, with d(t) = min(ema_decay, (1 + t) / (10 + t)); the skipped step changes nothing."""
  config = ema_config(digits_dir, 4, decay=0.2)  # warmup below 0.2 at t=0, 0.2 from t=1
  config.debug_nan_at_step = 3
  task = tasks.build_task(config, str(tmp_path))
  setup = setup_lib.prepare(config, task)
  step_fn = train.jit_update_step(config, setup, guard_by_select=by_select)
  state = jax.jit(setup.init_state, out_shardings=setup.state_shardings)(setup.init_rng)
  expected = flat(state["params"])
  for key, value in flat(state[checkpoint.EMA_PARAMS]).items():
    np.testing.assert_array_equal(value, expected[key], err_msg=key)  # it starts at the params
  batches = iter(task.train_batches(0, 0, 1))
  for t in range(4):
    before = flat(state[checkpoint.EMA_PARAMS])
    state, metrics = step_fn(state, next(batches))
    ema_now, params = flat(state[checkpoint.EMA_PARAMS]), flat(state["params"])
    if t == 2:
      assert float(metrics["finite"]) == 0.0
      for key in before:
        np.testing.assert_array_equal(ema_now[key], before[key], err_msg=key)
      continue
    decay = min(0.2, (1 + t) / (10 + t))
    for key in expected:
      expected[key] = decay * expected[key] + (1 - decay) * params[key]
      np.testing.assert_allclose(ema_now[key], expected[key], rtol=1e-6, atol=1e-7, err_msg=key)
  assert any(not np.allclose(ema_now[k], params[k]) for k in params)  # an average, not a copy


def test_resume_restores_the_ema_exactly_and_evals_log_both(tmp_path, digits_dir):
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"
  train.train_and_evaluate(ema_config(digits_dir, 4), str(straight))
  first = ema_config(digits_dir, 2)
  first.checkpoint_every = 2
  train.train_and_evaluate(first, str(resumed))
  train.train_and_evaluate(ema_config(digits_dir, 4), str(resumed))
  a, b = configs.read_state(straight, 4), configs.read_state(resumed, 4)
  assert any("['ema_params']" in key for key in a)
  for key in a:
    np.testing.assert_array_equal(b[key], a[key], err_msg=key)

  rows = [r for r in helpers.read_metrics(straight) if "eval/accuracy" in r]
  assert [r["step"] for r in rows] == [4]
  assert {"eval_ema/accuracy", "eval_ema/loss"} <= set(rows[0])
  assert rows[0]["eval_ema/loss"] != rows[0]["eval/loss"]
  # The sweep tools read the raw params' "eval/..." keys; an EMA-only row is not theirs.
  assert (
      runner.is_eval(rows[0]) and runner.eval_metric(rows[0], "eval/loss") == rows[0]["eval/loss"]
  )
  assert not runner.is_eval({"step": 4, "eval_ema/loss": 1.0})
  assert runner.is_eval({"step": 4, "eval_loss": 1.0})  # an older workdir's name

  # The workdir exports its EMA, as saved (convert --ema).
  exported = interop.load(str(straight), ema=True).params
  saved = orbax_format.read_state_dir(str(straight / "checkpoints" / "4" / "state"))
  assert set(exported) == set(interop.flatten(saved["ema_params"]))
  for key, value in interop.flatten(saved["ema_params"]).items():
    np.testing.assert_array_equal(exported[key], np.asarray(value), err_msg=key)


def test_turning_the_ema_on_when_resuming_starts_it_from_the_restored_params(
    tmp_path, digits_dir, capsys
):
  first = ema_config(digits_dir, 2, decay=None)
  train.train_and_evaluate(first, str(tmp_path))
  train.train_and_evaluate(ema_config(digits_dir, 3, decay=0.9), str(tmp_path))
  assert "checkpoint step 2 has no EMA of the params; it starts from them now" in (
      capsys.readouterr().out
  )
  at_2, at_3 = configs.read_state(tmp_path, 2), configs.read_state(tmp_path, 3)
  decay = min(0.9, 3 / 12)  # the update after step 2
  for key in (k for k in at_2 if k.startswith("['params']")):
    averaged = decay * at_2[key] + (1 - decay) * at_3[key]
    ema_key = "['ema_params']" + key[len("['params']") :]
    np.testing.assert_allclose(at_3[ema_key], averaged, rtol=1e-6, atol=1e-7, err_msg=key)


def test_resuming_an_ema_workdir_without_ema_decay_is_refused(tmp_path, digits_dir):
  train.train_and_evaluate(ema_config(digits_dir, 1), str(tmp_path))
  before = helpers.snapshot(tmp_path / "checkpoints")
  with pytest.raises(checkpoint.CheckpointMismatchError, match=r"holds ema_params.*ema_decay"):
    train.train_and_evaluate(ema_config(digits_dir, 2, decay=None), str(tmp_path))
  assert helpers.snapshot(tmp_path / "checkpoints") == before


@pytest.mark.parametrize("decay", [0, 1, 1.5, -0.1, "0.9", True])
def test_ema_decay_outside_0_1_is_one_problem_naming_the_key(decay):
  config = helpers.vit_config("")
  assert config.ema_decay is None and not checks.config_problems(config)
  values = {k: v for k, v in config.to_dict().items() if k != "evals"}  # any type, as a dict
  problems = checks.config_problems({**values, "ema_decay": decay})
  assert problems == [f"--config.ema_decay={decay!r} must be in (0, 1)"]


def test_an_evaluator_named_like_another_ones_ema_metrics_is_refused():
  config = helpers.vit_config("")
  config.evals.eval_ema = config.evals.eval.to_dict()
  assert not checks.config_problems(config)
  config.ema_decay = 0.999
  (problem,) = checks.config_problems(config)
  assert problem.startswith("--config.evals.eval_ema: with --config.ema_decay set")
