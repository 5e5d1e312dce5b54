"""A digits model trained by the real command line, shared by the evaluate tests."""

import pytest

from tests import helpers

# configs/vit.py:runlocal learning quickly: plain inputs, a higher learning rate, 60 steps.
DIGITS_60_STEPS = [
    "--config.total_steps=60",
    "--config.batch_size=64",
    "--config.eval_every=60",
    "--config.checkpoint_every=60",
    "--config.augment.randaugment_layers=0",
    "--config.augment.mixup_alpha=0.0",
    "--config.augment.label_smoothing=0.0",
    "--config.model.dropout_rate=0.0",
    "--config.optimizer.lr=0.003",
    "--config.optimizer.warmup_steps=5",
    "--config.progress=lines",
]


@pytest.fixture(scope="session")
def trained_digits(tmp_path_factory, digits_dir):
  """(workdir, stdout of the `python -m vit_jax.main` run that trained it)."""
  workdir = str(tmp_path_factory.mktemp("evaluate") / "digits")
  command = helpers.main_command(
      workdir, "runlocal", f"--config.data_dir={digits_dir}", *DIGITS_60_STEPS
  )
  result = helpers.run(command)
  assert result.returncode == 0, result.stderr[-3000:]
  return workdir, result.stdout
