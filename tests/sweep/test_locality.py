"""experiments/locality.py: intervals, the per-distance table, the whole command on fabricated
finished runs (nothing trains), and its refusals of bad input (one line, exit code 2)."""

import json
import os
import subprocess
import sys

import pytest

from experiments import locality
from tests.sweep import helpers
from vit_jax.sweep import runner
from vit_jax.sweep import spec

CNN_ACCURACY = {3: 0.95, 4: 0.94, 6: 0.85, 8: 0.6, 9: 0.51, 12: 0.49, 21: 0.53}
VIT_ACCURACY = {d: 0.995 for d in CNN_ACCURACY}


def test_wilson_interval():
  low, high = locality.wilson(1000, 2000)
  assert low == pytest.approx(0.4781, abs=1e-4) and high == pytest.approx(0.5219, abs=1e-4)
  low, high = locality.wilson(2000, 2000)  # all right: the interval stays below 1, not at it
  assert high == 1.0 and 0.997 < low < 0.999


def test_accuracy_by_distance_reads_the_last_evaluation():
  records = [
      {"step": 100, "train_loss": 0.6},
      {"step": 100, "d04/accuracy": 0.5, "d04/examples": 10},
      {
          "step": 200,
          "d04/accuracy": 0.8,
          "d04/examples": 10,
          "d12/accuracy": 0.6,
          "d12/examples": 5,
      },
      {"step": 200, "train_loss": 0.4},
  ]
  table = locality.accuracy_by_distance(records)
  assert list(table) == [4, 12]
  assert table[4]["correct"] == 8 and table[12]["examples"] == 5
  assert table[4]["low"] < 0.8 < table[4]["high"]


def _fake_finished_root(root):
  sweep = spec.load(locality.SWEEP_FILE)
  assert [r.name for r in sweep.runs] == ["local_cnn-w32-d3", "vit-w96-d4"]
  runner.check_root(sweep, str(root), create=True)
  for run, accuracy, params, flops in (
      (sweep.runs[0], CNN_ACCURACY, 19458, 3 * 22.2e6),
      (sweep.runs[1], VIT_ACCURACY, 307874, 3 * 24.3e6),
  ):
    model = {"name": run.name.split("-")[0], "width": 32, "depth": 3 if "cnn" in run.name else 4}
    final = {"step": 2000, "eval/accuracy": 0.7, "elapsed_s": 300.0}
    for d, a in accuracy.items():
      final.update({f"d{d:02d}/accuracy": a, f"d{d:02d}/examples": 2000})
    helpers.fake_run(
        os.path.join(root, run.name),
        config={
            "model": model,
            "train_split": "train",
            "batch_size": 64,
            "total_steps": 2000,
            "optimizer": {"lr": 1e-3},
            "seed": 0,
        },
        info={"num_params": params, "train_flops_per_example": flops, "train_examples": 60000},
        rows=[{"step": 1000, "train_loss": 0.5, "elapsed_s": 150.0}, final],
    )


def test_the_command_writes_table_json_and_plot_from_finished_runs(tmp_path):
  root, out = tmp_path / "root", tmp_path / "out"
  _fake_finished_root(root)
  assert locality.main([f"--root={root}", f"--out={out}"]) == 0  # both runs skipped as finished
  with open(out / locality.JSON, encoding="utf-8") as f:
    result = json.load(f)
  cnn = result["models"]["local_cnn-w32-d3"]
  assert cnn["receptive_field"] == 7 and cnn["a_pixel_of_both_up_to"] == 8
  assert cnn["both_marks_whole_up_to"] == 4
  assert cnn["forward_mflops_per_image"] == pytest.approx(22.2)
  assert cnn["accuracy"]["9"]["correct"] == 1020
  assert result["additive_bound"] == 0.75
  # The sentence quotes the CNN's worst inside its field, its best beyond it, the ViT's worst.
  assert "at least 94.0% [92.9, 95.0] up to d = 4" in result["finding"]
  assert "at most 53.0% [50.8, 55.2] beyond d = 8 (best at d = 21)" in result["finding"]
  assert "the ViT is at least 99.5%" in result["finding"]
  sentence = locality.caption(result)  # the figure's
  assert "(d <= 4: 94-95%)" in sentence and "falls to 49-53% once" in sentence
  assert "is at 100% at every distance" in sentence
  rows = (out / locality.CSV).read_text().splitlines()
  assert rows[0] == ",".join(locality.CSV_COLUMNS) and len(rows) == 1 + 2 * len(CNN_ACCURACY)
  assert (out / locality.PNG).stat().st_size > 10_000
  assert (out / "runs.csv").is_file()


def _command(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=helpers.ROOT)
  return subprocess.run(
      [sys.executable, "-m", "experiments.locality", *map(str, args)],
      env=env,
      capture_output=True,
      text=True,
      timeout=300,
      cwd=helpers.ROOT,
  )


@pytest.mark.parametrize(
    "args, says",
    [
        (["--root=R", "--out=O", "--steps=5"], "unrecognized arguments: --steps=5"),
        (["--root=R"], "the following arguments are required: --out"),
        (["--root=R", "--out={file}"], "is a file"),
        (["--root={busy}", "--out=O"], "is not empty and has no sweep.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(tmp_path, args, says):
  (tmp_path / "file").write_text("x")
  (tmp_path / "busy").mkdir()
  (tmp_path / "busy" / "notes.txt").write_text("mine")
  args = [a.format(file=tmp_path / "file", busy=tmp_path / "busy") for a in args]
  done = _command(*args)
  assert done.returncode == 2, done.stderr
  lines = done.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
  assert sorted(os.listdir(tmp_path / "busy")) == ["notes.txt"]  # untouched
  assert not os.path.exists(os.path.join(helpers.ROOT, "R"))
