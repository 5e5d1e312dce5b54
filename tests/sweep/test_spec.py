"""Sweep files -> runs: grid x list expansion, names, command lines and the sweep's identity."""

import re
import shlex

import pytest

from tests.sweep import helpers
from vit_jax import errors
from vit_jax.sweep import spec

BASE = {
    "config": "configs/vit.py:runlocal",
    "fixed": {"total_steps": 4},
    "runs": [{"model.width": 32, "model.num_heads": 2}, {"model.width": 64, "model.num_heads": 4}],
    "grid": {"train_split": ["train[:25%]", "train"], "seed": [0, 1]},
}


def test_grid_times_list_in_order_with_fixed_added():
  sweep = spec.expand(BASE)
  assert len(sweep.runs) == 2 * 2 * 2
  first, last = dict(sweep.runs[0].overrides), dict(sweep.runs[-1].overrides)
  assert first == {
      "total_steps": 4,
      "model.width": 32,
      "model.num_heads": 2,
      "train_split": "train[:25%]",
      "seed": 0,
  }
  assert (last["model.width"], last["train_split"], last["seed"]) == (64, "train", 1)
  # Default names: the keys that vary, by their last component, made folder-safe.
  assert sweep.runs[0].name == "width=32-num_heads=2-train_split=train_25pct-seed=0"
  assert len({r.name for r in sweep.runs}) == 8


def test_name_rule_with_format_specs_and_index():
  sweep = spec.expand({**BASE, "name": "w{model.width:03d}-{train_split}-s{seed}-{index}"})
  assert [r.name for r in sweep.runs[:2]] == ["w032-train_25pct-s0-0", "w032-train_25pct-s1-1"]


def test_bad_sweeps_are_config_errors_naming_the_problem():
  with pytest.raises(errors.ConfigError, match="share the name"):
    spec.expand({**BASE, "name": "w{model.width}"})
  with pytest.raises(errors.ConfigError, match="does not set"):
    spec.expand({**BASE, "name": "{optimizer.lr}"})
  with pytest.raises(errors.ConfigError, match=r"\['total_steps'\] set in more than one"):
    spec.expand({**BASE, "grid": {"total_steps": [4, 8]}})
  with pytest.raises(errors.ConfigError, match="unknown sweep key"):
    spec.expand({**BASE, "grids": {}})
  with pytest.raises(errors.ConfigError, match="metric"):
    spec.expand({**BASE, "metric": "accuracy"})
  with pytest.raises(errors.ConfigError, match="fits"):
    spec.expand({**BASE, "fits": ("flops",)})
  with pytest.raises(errors.ConfigError, match="cannot be passed"):
    spec.expand({**BASE, "fixed": {"eval_max_batches": None}}).runs[0].flags()


def test_command_line_of_a_run(tmp_path):
  run = spec.expand({**BASE, "fixed": {"optimizer.lr": 3e-4, "augment.flip": False}}).runs[0]
  argv = shlex.split(shlex.join(run.argv(str(tmp_path / "root"))))
  assert argv[:3] == ["python", "-m", "vit_jax.main"]
  assert argv[3] == "--config=configs/vit.py:runlocal"  # exists relative to the repo root
  assert "--config.optimizer.lr=0.0003" in argv and "--config.augment.flip=false" in argv
  assert "--config.train_split=train[:25%]" in argv
  assert argv[-1] == f"--workdir={tmp_path / 'root' / run.name}"


def test_identity_changes_with_any_run_and_only_then(tmp_path):
  a = spec.load(helpers.write_sweep(tmp_path / "a.py", BASE)).identity()
  b = spec.load(helpers.write_sweep(tmp_path / "b.py", BASE)).identity()
  assert a["sweep_hash"] == b["sweep_hash"] and a["sweep_file"] != b["sweep_file"]
  c = spec.expand({**BASE, "fixed": {"total_steps": 5}}).identity()
  assert c["sweep_hash"] != a["sweep_hash"]


def test_train_slice_and_safe_names():
  assert spec.train_slice(0.125) == "train[:12.5%]"
  assert spec.train_slice(1.0) == "train"
  with pytest.raises(errors.ConfigError):
    spec.train_slice(0)
  assert spec.safe_name("variant=S/16") == "variant=S_16"
  assert spec.safe_name("train[:12.5%]") == "train_12.5pct"


def test_a_runs_entry_may_replace_the_base_config():
  sweep = spec.expand(
      {
          "config": "configs/vit.py:runlocal",
          "runs": [{"model.name": "vit"}, {"config": "configs/resnet.py:runlocal"}],
          "grid": {"seed": [0, 1]},
      }
  )
  assert [r.config for r in sweep.runs] == ["configs/vit.py:runlocal"] * 2 + [
      "configs/resnet.py:runlocal"
  ] * 2
  assert all("config" not in dict(r.overrides) for r in sweep.runs)
  assert "configs/resnet.py" in " ".join(sweep.runs[-1].argv("/root"))


def test_steps_for_epochs_rounds_up_and_keeps_a_floor():
  assert spec.steps_for_epochs(10, 50_000, 128) == 3907  # 3906.25: the last epoch completed
  assert spec.steps_for_epochs(2, 640, 128) == 10
  assert spec.steps_for_epochs(2, 640, 128, min_steps=300) == 300  # a tiny subset: many epochs
  assert spec.steps_for_epochs(0.5, 1_000, 100) == 5
  for bad in [(0, 640, 128), (2, 0, 128), (2, 640, 0)]:
    with pytest.raises(errors.ConfigError, match="steps_for_epochs"):
      spec.steps_for_epochs(*bad)


BUDGETS = {
    "config": "configs/vit.py:runlocal",
    "fixed": {"optimizer.schedule": "rsqrt"},
    "runs": [
        {"model.width": 32, "budgets": [{"total_steps": 20, "budget_flops": 2e9}, 10, 40]},
        {"model.width": 64, "budgets": [30]},
    ],
    "name": "w{model.width}-s{total_steps}",
    "cooldown_fraction": 0.25,
}


def test_budgets_become_one_long_run_and_a_cooldown_branch_per_smaller_budget(tmp_path):
  sweep = spec.expand(BUDGETS)
  runs = {r.name: r for r in sweep.runs}
  assert list(runs) == ["w32-s40", "w32-s10", "w32-s20", "w64-s30"]  # the long run first
  long_run = dict(runs["w32-s40"].overrides)
  assert long_run["optimizer.cooldown_steps"] == 10 and runs["w32-s40"].branch_from is None
  assert long_run["keep_checkpoint_steps"] == (8, 15)  # where the branches start
  for name, (cooldown, point) in {"w32-s10": (2, 8), "w32-s20": (5, 15)}.items():
    assert dict(runs[name].overrides)["optimizer.cooldown_steps"] == cooldown
    assert runs[name].branch_from == f"w32-s40:{point}"
    assert f"--config.branch_from={tmp_path / 'w32-s40'}:{point}" in runs[name].argv(str(tmp_path))
  assert runs["w32-s20"].budget_flops == 2e9 and runs["w32-s10"].budget_flops is None
  assert "keep_checkpoint_steps" not in dict(runs["w64-s30"].overrides)  # a single budget
  # The identity knows each run's parent.
  other = {**BUDGETS, "cooldown_fraction": 0.2}
  assert spec.expand(other).identity() != sweep.identity()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"runs": [{"budgets": [10, 10]}]}, "must be distinct total_steps >= 1"),
        ({"runs": [{"budgets": []}]}, "must be distinct total_steps >= 1"),
        ({"cooldown_fraction": 1.0}, "cooldown_fraction=1.0 must be in (0, 1)"),
    ],
)
def test_bad_budgets_are_config_errors(change, message):
  with pytest.raises(errors.ConfigError, match=re.escape(message)):
    spec.expand({**BUDGETS, **change})
