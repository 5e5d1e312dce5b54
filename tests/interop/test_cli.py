"""`python -m vit_jax.convert`: conversions through our workdirs, and errors as exit code 2."""

import json
import os
import subprocess
import sys

import numpy as np

from tests.interop import helpers
from vit_jax import convert
from vit_jax import interop

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VIT = dict(name="vit", variant="Ti/8", width=32, depth=2, num_heads=4, mlp_dim=64, num_classes=5)
IMAGES = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype(np.float32)


def test_command_line_to_workdir_and_back(tmp_path):
  ckpt, _ = helpers.init_ours(VIT, IMAGES)
  interop.save(ckpt, str(tmp_path / "vit.npz"), to="npz")
  workdir = str(tmp_path / "workdir")
  run = subprocess.run(
      [
          sys.executable,
          "-m",
          "vit_jax.convert",
          str(tmp_path / "vit.npz"),
          workdir,
          "--to",
          "orbax",
          "--model",
          json.dumps({"num_classes": 3}),
          "--reinit-head",
      ],
      capture_output=True,
      text=True,
      cwd=ROOT,
      timeout=300,
      env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"),
  )
  assert run.returncode == 0, run.stderr
  assert "note: head/kernel: checkpoint (32, 5) -> model (32, 3), re-initialized" in run.stdout
  assert f"wrote {workdir} (orbax)" in run.stdout
  assert os.path.isdir(os.path.join(workdir, "checkpoints", "0", "state"))

  # The workdir holds the model config: it converts on without --model, and init_from reads it.
  assert convert.main([workdir, str(tmp_path / "hf"), "--to", "hf"]) == 0
  assert (
      convert.main(
          [str(tmp_path / "hf"), str(tmp_path / "bv.npz"), "--to", "npz", "--layout", "big_vision"]
      )
      == 0
  )
  final = interop.load(str(tmp_path / "bv.npz"))
  assert final.model["num_classes"] == 3
  from_workdir = interop.load(workdir)
  assert from_workdir.model["num_classes"] == 3  # the config inferred from the .npz, recorded
  assert from_workdir.module().shape() == ckpt.module().shape()
  assert set(interop.read_params(workdir)) == set(from_workdir.params)
  for key in ckpt.params:
    if not key.startswith("head/"):
      np.testing.assert_array_equal(from_workdir.params[key], ckpt.params[key], err_msg=key)
  run_final = final.module().apply({"params": final.tree()}, IMAGES)
  run_workdir = from_workdir.module().apply({"params": from_workdir.tree()}, IMAGES)
  assert helpers.max_diff(run_final, run_workdir) == 0.0


def test_errors_exit_2_and_write_nothing(tmp_path, capsys):
  ckpt, _ = helpers.init_ours(VIT, IMAGES)
  interop.save(ckpt, str(tmp_path / "vit.npz"), to="npz")
  dst = str(tmp_path / "out.npz")
  cases = [
      (["--model", '{"num_classes": 3}'], "shape mismatch: head/kernel"),
      (["--model", "{num_classes: 3"], "--model must be JSON"),
      (["--model", '{"colour": "red"}'], "Unknown option(s) ['colour'] for model 'vit'"),
  ]
  for extra, message in cases:
    assert convert.main([str(tmp_path / "vit.npz"), dst, "--to", "npz", *extra]) == 2
    assert message in capsys.readouterr().err
  assert convert.main([str(tmp_path / "missing.npz"), dst, "--to", "npz"]) == 2
  assert "does not exist" in capsys.readouterr().err
  assert sorted(os.listdir(tmp_path)) == ["vit.npz"]
