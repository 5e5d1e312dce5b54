"""`python -m vit_jax.evaluate`: a trained workdir's metrics are the trainer's, an exported .npz
gives the same, a trained model's probe beats an untrained one's, and bad input is one line."""

import json
import re
import sys

import pytest

from tests import helpers
from tests.evaluate import conftest
from tests.survival import conftest as survival


def run_evaluate(*args):
  return helpers.run([sys.executable, "-m", "vit_jax.evaluate", *args])


def trainer_final(stdout: str, name: str) -> dict:
  """{metric: value} of the trainer's `Final NAME: metric=value ...` line (4 significant digits)."""
  (line,) = [line for line in stdout.splitlines() if line.startswith(f"Final {name}: ")]
  return {k: float(v) for k, v in re.findall(r"([\w@]+)=(\S+)", line)}


def test_a_workdir_evaluates_to_what_the_trainer_printed(trained_digits, tmp_path):
  workdir, trainer_stdout = trained_digits
  output = tmp_path / "metrics.json"
  result = run_evaluate(f"--checkpoint={workdir}", f"--output={output}")
  assert result.returncode == 0, result.stderr[-3000:]
  metrics = json.loads(output.read_text())["metrics"]
  printed = re.search(r"Final eval accuracy: ([\d.]+)%", trainer_stdout).group(1)
  assert f"{100 * metrics['eval/accuracy']:.2f}" == printed
  for name in ("eval", "fewshot"):  # every metric of both evaluators, as the trainer printed it
    for metric, value in trainer_final(trainer_stdout, name).items():
      assert f"{metrics[f'{name}/{metric}']:.4g}" == f"{value:.4g}", (name, metric)
  rows = [line.split() for line in result.stdout.splitlines() if not line.startswith("checkpoint")]
  table = {tuple(row[:2]): row[2] for row in rows[1:]}
  assert float(table[("eval", "accuracy")]) == pytest.approx(metrics["eval/accuracy"], rel=1e-5)


def test_an_exported_npz_evaluates_the_same_with_a_config(trained_digits, tmp_path, digits_dir):
  workdir, _ = trained_digits
  npz = str(tmp_path / "digits.npz")
  exported = helpers.run([sys.executable, "-m", "vit_jax.convert", workdir, npz, "--to", "npz"])
  assert exported.returncode == 0, exported.stderr[-3000:]
  own, imported = tmp_path / "own.json", tmp_path / "imported.json"
  assert run_evaluate(f"--checkpoint={workdir}", "--evals=eval", f"--output={own}").returncode == 0
  result = run_evaluate(
      f"--checkpoint={npz}",
      f"--config={helpers.VIT_CONFIG}:runlocal",
      f"--config.data_dir={digits_dir}",
      "--batch_size=64",  # the trained run's, so that the 2 eval batches hold the same images
      "--evals=eval",
      f"--output={imported}",
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads(imported.read_text())["metrics"] == json.loads(own.read_text())["metrics"]


def test_a_trained_models_10_shot_probe_is_far_above_an_untrained_ones(
    trained_digits, tmp_path, digits_dir
):
  _, trainer_stdout = trained_digits
  trained = trainer_final(trainer_stdout, "fewshot")["10shot_accuracy"]
  # The same model and seed at step 0 (`total_steps=0` evaluates the initialized model).
  untrained_run = helpers.run(
      helpers.main_command(
          tmp_path / "untrained",
          "runlocal",
          f"--config.data_dir={digits_dir}",
          *conftest.DIGITS_60_STEPS,
          "--config.total_steps=0",
      )
  )
  assert untrained_run.returncode == 0, untrained_run.stderr[-3000:]
  untrained = trainer_final(untrained_run.stdout, "fewshot")["10shot_accuracy"]
  assert trained > untrained + 0.15, (trained, untrained)  # measured: 0.596 vs 0.379


def test_a_config_of_another_model_is_refused(trained_digits, tmp_path, digits_dir):
  workdir, _ = trained_digits
  output = tmp_path / "metrics.json"
  result = run_evaluate(
      f"--checkpoint={workdir}",
      f"--config={helpers.VIT_CONFIG}:runlocal",
      f"--config.data_dir={digits_dir}",
      "--config.model.width=64",
      f"--output={output}",
  )
  assert result.returncode == 2
  survival.assert_one_line_error(result.stderr, workdir, "is not the config's", "(96,)", "(64,)")
  assert not output.exists()


def test_an_evaluator_the_config_lacks_is_refused(trained_digits):
  workdir, _ = trained_digits
  result = run_evaluate(f"--checkpoint={workdir}", "--evals=eval,linear")
  assert result.returncode == 2
  survival.assert_one_line_error(result.stderr, "linear", "eval, fewshot")
