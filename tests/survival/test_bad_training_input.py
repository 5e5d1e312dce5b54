"""Bad input: a clear error, a non-zero exit code, and existing files left untouched."""

import pytest

from tests import helpers


def test_unknown_config_key_exits_2(tmp_path):
  result = helpers.run(helpers.main_command(tmp_path / "w", "", "--config.optimizer.lrr=0.1"))
  assert result.returncode == 2
  assert "lrr" in result.stderr and "error:" in result.stderr
  assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "--config.optimizer.head_weight_decay_mult=-1.0",
            "--config.optimizer.head_weight_decay_mult=-1.0 must be >= 0",
        ),
        (
            "--config.optimizer.name=adafactr",
            "--config.optimizer.name='adafactr' must be one of adamw, sgd, adafactor",
        ),
    ],
)
def test_a_bad_optimizer_value_is_one_line_and_exit_2(tmp_path, override, message):
  result = helpers.run(
      helpers.main_command(tmp_path / "w", "dataset=imagenet21k,variant=g/14", override)
  )
  assert result.returncode == 2
  errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "w").exists()


def test_unknown_config_argument_exits_2(tmp_path):
  result = helpers.run(helpers.main_command(tmp_path / "w", "datset=cifar10"))
  assert result.returncode == 2
  assert "Unknown config argument 'datset'" in result.stderr


def test_malformed_variant(tmp_path, digits_dir):
  result = helpers.run(
      helpers.main_command(tmp_path / "w", "variant=B-16", f"--config.data_dir={digits_dir}")
  )
  assert result.returncode == 2
  assert "Malformed ViT variant 'B-16'" in result.stderr


def test_dataset_not_prepared_says_how_to_prepare(tmp_path):
  empty = tmp_path / "empty_tfds"
  empty.mkdir()
  result = helpers.run(
      helpers.main_command(tmp_path / "w", "dataset=cifar10,runlocal", f"--config.data_dir={empty}")
  )
  assert result.returncode == 2
  # the run's own flags, with vit_jax.prepare: `tfds build` needs Apache Beam, not installed
  assert (
      "python -m vit_jax.prepare --config=" in result.stderr and "tfds build" not in result.stderr
  )
  assert (
      "dataset=cifar10,runlocal" in result.stderr and f"--config.data_dir={empty}" in result.stderr
  )


@pytest.mark.slow
def test_workdir_of_another_model_is_refused_untouched(tmp_path, digits_dir):
  workdir = tmp_path / "w"
  common = [
      f"--config.data_dir={digits_dir}",
      "--config.total_steps=2",
      "--config.batch_size=16",
      "--config.eval_max_batches=1",
      "--config.progress=lines",
  ]
  first = helpers.run(helpers.main_command(workdir, "", *common))
  assert first.returncode == 0, first.stderr[-3000:]
  before = helpers.snapshot(workdir)
  other = helpers.run(
      helpers.main_command(workdir, "variant=S/4", *common, "--config.model.depth=1")
  )
  assert other.returncode == 2
  assert "different model" in other.stderr and "model.variant" in other.stderr
  assert helpers.snapshot(workdir) == before
