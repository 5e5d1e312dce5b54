"""`total_steps=0` saves the initialized model as step 0, which convert then exports."""

import os

import numpy as np

from tests import helpers
from vit_jax import interop
from vit_jax.training import train


def test_total_steps_zero_saves_the_fresh_model_and_convert_exports_it(tmp_path, digits_dir):
  workdir = str(tmp_path / "fresh")
  config = helpers.vit_config("runlocal", data_dir=digits_dir, progress="lines", total_steps=0)
  result = train.train_and_evaluate(config, workdir)
  assert os.listdir(os.path.join(workdir, "checkpoints")) == ["0"]
  assert not any("train_loss" in row for row in helpers.read_metrics(workdir))
  assert "eval/accuracy" in result  # the fresh model is still evaluated

  exported = interop.convert(workdir, str(tmp_path / "fresh.npz"), to="npz")
  assert exported.model["num_classes"] == 10
  with np.load(tmp_path / "fresh.npz", allow_pickle=False) as npz:
    assert len(npz.files) == len(exported.params)
  saved = interop.read_params(workdir)  # step 0, as orbax wrote it
  in_memory = interop.flatten(result["final_params"])
  reread = interop.load(str(tmp_path / "fresh.npz")).params
  assert saved.keys() == reread.keys() == in_memory.keys()
  for key, value in saved.items():
    np.testing.assert_array_equal(reread[key], value, err_msg=key)
    np.testing.assert_array_equal(np.asarray(in_memory[key]), value, err_msg=key)
