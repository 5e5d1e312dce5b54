"""Our commands print only our lines: no TF C++ notices, absl preamble or orbax warnings.

The commands run in subprocesses with the environment a user has (no TF_CPP_MIN_LOG_LEVEL).
"""

import os
import re
import subprocess
import sys

import numpy as np
from PIL import Image
import pytest

from tests.sweep import helpers as sweep_helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOISE = re.compile(
    r"oneDNN|absl::InitializeLog|Metadata file does not exist|cpu_feature_guard"
    r"|^[IWEF]\d{4} \d\d:\d\d:\d\d"  # glog-style lines: TF/XLA C++ and absl's Python handler
    r"|^(WARNING|INFO):(absl|tensorflow):",  # absl/TF Python logging before absl is set up
    re.MULTILINE,
)
TINY_VIT = [
    "--config.model.width=16",
    "--config.model.depth=1",
    "--config.model.num_heads=2",
    "--config.model.mlp_dim=16",
    "--config.batch_size=16",
    "--config.total_steps=2",
    "--config.eval_max_batches=1",
    "--config.progress=lines",
]


def run(args, **env):
  base = {
      k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "VIT_JAX_VERBOSE")
  }
  return subprocess.run(
      [sys.executable, *args],
      env=dict(base, PYTHONPATH=ROOT, **env),
      capture_output=True,
      text=True,
      timeout=600,
      cwd=ROOT,
  )


def assert_quiet(result):
  noise = [m.group(0) for m in NOISE.finditer(result.stdout + result.stderr)]
  assert not noise, f"noise {noise} in:\n{result.stdout}\n{result.stderr}"


LOG_BOTH = (
    "from vit_jax import startup; startup.quiet_startup(); from absl import logging; "
    "logging.warning('library warning'); logging.error('library error')"
)


def test_quiet_startup_keeps_errors_and_hides_warnings():
  result = run(["-c", LOG_BOTH])
  assert result.returncode == 0, result.stderr
  assert "library error" in result.stderr and "library warning" not in result.stderr


def test_verbose_env_keeps_library_warnings():
  result = run(["-c", LOG_BOTH], VIT_JAX_VERBOSE="1")
  assert "library error" in result.stderr and "library warning" in result.stderr


def test_bad_flag_is_one_clear_error():
  result = run(["-m", "vit_jax.generate", "--workdir=w", "--prompt=hi", "--tempreature=0"])
  assert result.returncode != 0 and "tempreature" in result.stderr
  assert_quiet(result)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, digits_dir):
  """A two-step digits workdir, and the output of the `vit_jax.main` run that trained it."""
  workdir = str(tmp_path_factory.mktemp("quiet") / "w")
  train = run(
      [
          "-m",
          "vit_jax.main",
          f"--config={ROOT}/configs/vit.py:runlocal",
          f"--workdir={workdir}",
          f"--config.data_dir={digits_dir}",
          *TINY_VIT,
      ]
  )
  return workdir, train


def test_train_prints_only_our_lines(trained):
  _, train = trained
  assert train.returncode == 0, train.stderr[-3000:]
  assert "Final eval accuracy:" in train.stdout
  assert_quiet(train)


def test_convert_and_generate_print_only_our_lines(trained, tmp_path):
  workdir, _ = trained
  convert = run(["-m", "vit_jax.convert", workdir, str(tmp_path / "vit.npz"), "--to", "npz"])
  assert convert.returncode == 0, convert.stderr
  assert f"wrote {tmp_path / 'vit.npz'} (npz)" in convert.stdout
  assert_quiet(convert)

  # Reads the checkpoint (orbax warns on read-only directories), then refuses: no tokenizer.
  generate = run(["-m", "vit_jax.generate", f"--workdir={workdir}", "--prompt=hi"])
  assert generate.returncode == 2 and "error: No saved tokenizer" in generate.stderr
  assert_quiet(generate)


def test_visualize_and_predict_print_only_our_lines(trained, tmp_path):
  workdir, _ = trained
  image = str(tmp_path / "digit.png")
  Image.fromarray(np.full((16, 16, 3), 200, np.uint8)).save(image)
  out = tmp_path / "visualize"
  checkpoint = f"--checkpoint={workdir}"
  visualize = run(
      ["-m", "vit_jax.visualize", checkpoint, f"--image={image}", f"--output_dir={out}"]
  )
  assert visualize.returncode == 0, visualize.stderr[-3000:]
  assert f"{out / 'summary.json'}" in visualize.stdout
  assert_quiet(visualize)

  predict = run(["-m", "vit_jax.predict", checkpoint, f"--image={image}"])
  assert predict.returncode == 0, predict.stderr[-3000:]
  assert predict.stdout.startswith("digit.png: ")
  assert_quiet(predict)


def test_evaluate_prints_only_our_lines(trained):
  workdir, _ = trained
  evaluate = run(["-m", "vit_jax.evaluate", f"--checkpoint={workdir}"])
  assert evaluate.returncode == 0, evaluate.stderr[-3000:]
  assert "evaluator  metric" in evaluate.stdout and "eval       accuracy" in evaluate.stdout
  assert_quiet(evaluate)


def test_sweep_prints_only_our_lines(tmp_path, digits_dir):
  overrides = dict(arg.removeprefix("--config.").split("=") for arg in TINY_VIT)
  sweep_file = sweep_helpers.write_sweep(
      tmp_path / "one_run.py",
      {
          "config": "configs/vit.py:runlocal",
          "fixed": {**overrides, "data_dir": digits_dir},
          "name": "tiny",
      },
  )
  root = tmp_path / "root"
  for command in ("run", "collect", "plot"):
    result = run(["-m", "vit_jax.sweep", command, sweep_file, f"--root={root}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert_quiet(result)
  # The runs are `vit_jax.main` processes; their output is in each run's train.log.
  (log,) = root.glob("*/train.log")
  assert "Final eval accuracy:" in log.read_text()
  assert not NOISE.search(log.read_text()), log.read_text()
