"""`python -m vit_jax.sweep run`: checks before any run, the sweep root's identity, printed
commands, and a tiny real sweep on digits that skips finished runs and resumes an interrupted one.
"""

import json
import os
import shlex

import pytest

from tests.sweep import helpers
from vit_jax import errors
from vit_jax import workdir as workdir_lib
from vit_jax.sweep import checks
from vit_jax.sweep import collect
from vit_jax.sweep import runner
from vit_jax.sweep import spec

TINY = {  # a 1-block ViT, 4 steps of 8 digits, checkpoints at steps 2 and 4
    "config": "configs/vit.py:runlocal",
    "fixed": {
        "model.width": 32,
        "model.depth": 1,
        "model.num_heads": 2,
        "model.mlp_dim": 64,
        "augment.randaugment_layers": 0,
        "augment.mixup_alpha": 0.0,
        "progress": "lines",
        "prefetch_batches": 0,
    },
    "grid": {"train_split": ["train[:50%]", "train"]},
    "name": "{train_split}",
}


@pytest.fixture(autouse=True)
def digits_by_default(digits_dir, monkeypatch):
  """`run` checks each run's splits, opening (and if need be building) its dataset: the digits
  prepared for the tests, not a copy in the user's TFDS folder. The CLI subprocesses inherit it.
  """
  monkeypatch.setenv("TFDS_DATA_DIR", digits_dir)


def test_unknown_override_key_is_refused_before_any_run(tmp_path):
  sweep = {**TINY, "runs": [{}, {"model.widht": 8}], "name": "r{index}-{train_split}"}
  path = helpers.write_sweep(tmp_path / "bad.py", sweep)
  with pytest.raises(
      errors.ConfigError, match=r"run 'r2-train_50pct': unknown config key 'model.w"
  ):
    checks.check_all(spec.load(path))
  root = tmp_path / "root"
  result = helpers.cli("run", path, f"--root={root}")
  assert result.returncode == 2, result.stderr
  assert result.stderr.startswith("error: run 'r2-train_50pct': unknown config key 'model.widht'")
  assert "'width'" in result.stderr  # the keys the model block does have
  assert not root.exists()  # nothing started, nothing written


@pytest.mark.parametrize(
    "split,named",
    [("train[:5000]", "incompatible with 1442 examples"), ("train[:150%]", "[-100, 100]")],
)
def test_a_subset_larger_than_its_split_is_refused_before_any_run(
    tmp_path, digits_dir, split, named
):
  sweep = {**TINY, "fixed": {**TINY["fixed"], "data_dir": digits_dir}}
  sweep["grid"] = {"train_split": ["train[:50%]", split]}
  path = helpers.write_sweep(tmp_path / "too_big.py", sweep)
  root = tmp_path / "root"
  result = helpers.cli("run", path, f"--root={root}")
  assert result.returncode == 2, result.stderr[-3000:]
  (line,) = result.stderr.strip().splitlines()  # one line: the run, the split and its size
  run_name = spec.safe_name(split)
  assert line.startswith(f"error: run {run_name!r}: --config.train_split={split!r}"), line
  assert named in line and "train (1442 examples)" in line
  assert not root.exists()  # nothing started, nothing written


@pytest.mark.parametrize(
    "args,named",
    [(["--bogus=1"], "unrecognized arguments: --bogus=1"), (["--bootstrap=0"], "must be >= 1")],
)
def test_a_bad_command_line_is_one_line_before_anything_runs(tmp_path, args, named):
  path = helpers.write_sweep(tmp_path / "tiny.py", TINY)
  root = tmp_path / "root"
  result = helpers.cli("all", path, f"--root={root}", *args)
  assert result.returncode == 2, result.stderr[-3000:]
  (line,) = result.stderr.strip().splitlines()  # no argparse usage block
  assert line.startswith("error: ") and named in line, line
  assert not root.exists()


def test_bad_values_name_the_run(tmp_path):
  sweep = spec.expand({**TINY, "runs": [{"optimizer.lr": -1.0}]})
  with pytest.raises(errors.ConfigError, match=r"run 'train_50pct': --config.optimizer.lr=-1.0"):
    checks.check_all(sweep)
  sweep = spec.expand({**TINY, "runs": [{"model.dropout_rate": "high"}]})
  with pytest.raises(errors.ConfigError, match=r"run .train_50pct.: .*model.dropout_rate"):
    checks.check_all(sweep)


def test_print_commands_prints_one_command_per_run_and_runs_nothing(tmp_path):
  path = helpers.write_sweep(tmp_path / "tiny.py", TINY)
  root = tmp_path / "root"
  result = helpers.cli("run", path, f"--root={root}", "--print_commands")
  assert result.returncode == 0, result.stderr
  lines = result.stdout.strip().splitlines()
  assert len(lines) == 2
  for line, name, split in zip(lines, ["train_50pct", "train"], ["train[:50%]", "train"]):
    argv = shlex.split(line)
    assert argv[:3] == ["python", "-m", "vit_jax.main"]
    assert f"--config.train_split={split}" in argv and "--config.model.width=32" in argv
    assert argv[-1] == f"--workdir={root / name}"
  assert sorted(os.listdir(root)) == [workdir_lib.SWEEP_FILE]  # no run started


def test_a_root_of_another_sweep_is_refused_untouched(tmp_path):
  root = tmp_path / "root"
  runner.check_root(spec.expand(TINY), str(root), create=True)
  (root / "train").mkdir()
  (root / "train" / "metrics.jsonl").write_text('{"step": 1}\n')
  before = helpers.snapshot(root)
  other = {**TINY, "grid": {"seed": [0, 1]}, "name": "s{seed}"}
  other = helpers.write_sweep(tmp_path / "other.py", other)
  for args in (["run"], ["run", "--print_commands"], ["collect"]):
    result = helpers.cli(args[0], other, f"--root={root}", *args[1:])
    assert result.returncode == 2
    assert "holds runs of another sweep" in result.stderr
    assert "runs only there: train, train_50pct" in result.stderr
  assert helpers.snapshot(root) == before


def test_a_folder_that_is_no_sweep_root_is_refused(tmp_path):
  (tmp_path / "notes.txt").write_text("mine")
  with pytest.raises(errors.WorkdirError, match="no sweep.json"):
    runner.check_root(spec.expand(TINY), str(tmp_path), create=True)
  assert os.listdir(tmp_path) == ["notes.txt"]


def test_run_all_skips_finished_resumes_the_rest_and_goes_on_past_failures(
    tmp_path, monkeypatch, capsys
):
  sweep = spec.expand({**TINY, "grid": {"seed": [0, 1, 2, 3]}, "name": "s{seed}"})
  configs = checks.check_all(sweep)
  assert {c.total_steps for c in configs.values()} == {4}  # runlocal
  root = str(tmp_path / "root")
  runner.check_root(sweep, root, create=True)
  done = {"step": 4, "eval/accuracy": 0.5}
  helpers.fake_run(f"{root}/s0", config={}, info=None, rows=[{"step": 2}, done])
  helpers.fake_run(f"{root}/s1", config={}, info=None, rows=[{"step": 2, "eval/accuracy": 0.4}])
  os.makedirs(f"{root}/s1/checkpoints/2")
  calls = []

  def fake_trainer(argv, workdir, log_path):
    name = os.path.basename(workdir)
    calls.append(name)
    assert argv[1:3] == ["-m", "vit_jax.main"] and argv[-1] == f"--workdir={workdir}"
    assert log_path == workdir_lib.train_log_path(workdir)
    if name == "s1":  # resumes and finishes
      helpers.fake_run(workdir, config={}, info=None, rows=[done])
      return 0
    if name == "s2":  # crashes
      with open(log_path, "w", encoding="utf-8") as f:
        f.write("Traceback ...\nValueError: boom\n")
      return 1
    return 0  # s3: exits cleanly before total_steps (preempted)

  monkeypatch.setattr(runner, "_run", fake_trainer)
  assert runner.run_all(sweep, configs, root) == 1
  out = capsys.readouterr().out
  assert calls == ["s1", "s2", "s3"]  # s0 was finished: never started again
  assert "[1/4] s0: finished, skipped." in out
  assert "[2/4] s1: resuming" in out and "[2/4] s1: done" in out
  assert "[3/4] s2: starting" in out and "[3/4] s2: FAILED" in out and "exit code 1" in out
  assert "ValueError: boom" in out  # the end of the failed run's log
  assert "[4/4] s3: FAILED" in out and "stopped before step 4" in out
  assert "2 of 4 runs finished (1 skipped as already finished); failed: s2, s3." in out


def metrics(workdir):
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f]


@pytest.mark.slow  # 3 real trainings (~1 min on a quiet machine); the fast test above fakes them
def test_tiny_sweep_runs_skips_finished_and_resumes_interrupted(tmp_path, digits_dir):
  path = helpers.write_sweep(
      tmp_path / "tiny.py", {**TINY, "fixed": {**TINY["fixed"], "data_dir": digits_dir}}
  )
  root = tmp_path / "root"
  first = helpers.cli("run", path, f"--root={root}")
  assert first.returncode == 0, first.stdout + first.stderr
  assert "2 of 2 runs finished" in first.stdout
  half, full = root / "train_50pct", root / "train"

  # What the trainer records for collect: parameter count, FLOPs, train-set size, wall time.
  info = json.loads((half / "run_info.json").read_text())
  info_full = json.loads((full / "run_info.json").read_text())
  assert info_full["train_examples"] == 2 * info["train_examples"] > 0  # the slice is counted
  assert info["num_params"] == info_full["num_params"] > 0
  assert info["train_flops_per_example"] > 3 * 2 * info["num_params"] * 0.5
  assert (info["batch_size"], info["total_steps"]) == (8, 4)
  assert all(r["elapsed_s"] > 0 for r in metrics(full))

  # Interrupt `train` after step 2: its step-4 checkpoint and every record after step 2 gone.
  kept = [r for r in metrics(full) if r["step"] <= 2]
  (full / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
  for name in os.listdir(full / "checkpoints"):
    if name == "4":
      os.system(f"rm -rf {shlex.quote(str(full / 'checkpoints' / name))}")
  untouched = helpers.snapshot(half)

  second = helpers.cli("run", path, f"--root={root}")
  assert second.returncode == 0, second.stdout + second.stderr
  assert "[1/2] train_50pct: finished, skipped." in second.stdout
  assert "[2/2] train: resuming" in second.stdout
  assert (
      "Resumed from" in (full / "train.log").read_text()
      and "at step 2" in (full / "train.log").read_text()
  )
  assert helpers.snapshot(half) == untouched
  rows = metrics(full)
  assert runner.is_finished(str(full), 4)
  before = max(r["elapsed_s"] for r in kept)
  assert all(r["elapsed_s"] > before for r in rows[len(kept) :])  # wall time adds up over resumes

  third = helpers.cli("collect", path, f"--root={root}")
  assert third.returncode == 0 and "2 of 2 runs finished" in third.stdout


@pytest.mark.slow  # 2 real trainings
def test_a_budgets_sweep_runs_the_long_run_then_its_branch_and_counts_what_each_trained(
    tmp_path, digits_dir
):
  budgets = {
      **TINY,
      "fixed": {**TINY["fixed"], "data_dir": digits_dir, "optimizer.schedule": "rsqrt"},
      "grid": {},
      "runs": [{"budgets": [{"total_steps": 5, "eval_every": 5}, {"total_steps": 10}]}],
      "name": "s{total_steps}",
  }
  path = helpers.write_sweep(tmp_path / "budgets.py", budgets)
  root, out = tmp_path / "root", tmp_path / "out"
  done = helpers.cli("run", path, f"--root={root}")
  assert done.returncode == 0, done.stdout + done.stderr
  assert "[1/2] s10: starting" in done.stdout and "[2/2] s5: starting" in done.stdout
  assert (
      f"Branched from {root / 's10' / 'checkpoints' / '4'}"
      in (root / "s5" / "train.log").read_text()
  )
  collected = helpers.cli("collect", path, f"--root={root}", f"--out={out}")
  assert collected.returncode == 0, collected.stdout + collected.stderr
  rows = {r["run"]: r for r in collect.read_csv(str(out / "runs.csv"))}
  assert rows["s5"]["status"] == rows["s10"]["status"] == "finished"
  assert (rows["s5"]["branched_at"], rows["s10"]["branched_at"]) == (4, 0)
  # The branch trained 1 step of its 5; its budget (flops) counts all 5.
  assert rows["s5"]["own_flops"] == pytest.approx(rows["s5"]["flops"] / 5)
  assert rows["s10"]["own_flops"] == rows["s10"]["flops"]
