"""A damaged latest checkpoint: readers fall back to the newest intact step, and a resumed run
moves the damaged step to checkpoints/damaged/STEP and ends bit-identical to a straight run."""

import os
import shutil

import numpy as np
import pytest

from tests.survival import conftest
from tests.training import helpers
from vit_jax import interop


def damage(step_dir, how):
  state = os.path.join(step_dir, "state")
  if how == "no_model_record":
    shutil.rmtree(os.path.join(step_dir, "model"))
    return
  if how == "no_manifest":
    os.remove(os.path.join(state, "manifest.ocdbt"))
    return
  files = [os.path.join(r, f) for r, _, fs in os.walk(state) for f in fs if "/d/" in r + "/"]
  biggest = max(files, key=os.path.getsize)
  with open(biggest, "r+b") as f:
    f.truncate(0 if how == "zero_length" else os.path.getsize(biggest) // 2)


@pytest.mark.parametrize("how", ["truncated", "zero_length", "no_manifest"])
def test_reader_falls_back_to_the_intact_step(trained_copy, trained, how, capsys):
  damage(str(trained_copy / "checkpoints" / "4"), how)
  before = conftest.snapshot(trained_copy)
  params = interop.read_params(str(trained_copy))
  expected = interop.read_params(str(trained / "checkpoints" / "2"))
  assert params.keys() == expected.keys()
  for key in params:
    np.testing.assert_array_equal(params[key], expected[key], err_msg=key)
  warning = capsys.readouterr().err
  assert "checkpoints/4 is unreadable" in warning and "using step 2" in warning
  assert conftest.snapshot(trained_copy) == before  # readers move nothing


def test_convert_falls_back_past_a_missing_model_record(trained_copy, tmp_path):
  damage(str(trained_copy / "checkpoints" / "4"), "no_model_record")
  from vit_jax import convert  # pylint: disable=g-import-not-at-top

  assert convert.main([str(trained_copy), str(tmp_path / "out.npz"), "--to", "npz"]) == 0
  assert (tmp_path / "out.npz").is_file()


def test_resume_past_a_damaged_step_is_bit_identical(trained_copy, trained, digits_dir):
  damage(str(trained_copy / "checkpoints" / "4"), "truncated")
  result = helpers.run(conftest.tiny_command(trained_copy, digits_dir))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "checkpoints/4 is unreadable" in result.stderr
  assert "at step 2" in result.stdout
  assert (trained_copy / "checkpoints" / "damaged" / "4" / "state").is_dir()  # kept, not deleted
  straight = interop.read_params(str(trained / "checkpoints" / "4"))
  resumed = interop.read_params(str(trained_copy / "checkpoints" / "4"))
  for key in straight:
    np.testing.assert_array_equal(straight[key], resumed[key], err_msg=key)
