"""With 8 fake CPU devices, every mesh gives the 1-device losses and really shards the params."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests import helpers

ROOT = helpers.ROOT

SCRIPT = r"""
import json, sys
import jax
jax.config.update("jax_threefry_partitionable", True)
import tensorflow_datasets as tfds
from vit_jax.training import mesh as mesh_lib
from vit_jax.training import train
from vit_jax.config import args
name, arg, workdir, data_dir = sys.argv[1:5]
module = args.load_file(f"configs/{name}.py")
results = {}
for mesh in sys.argv[5:]:  # one process trains on each mesh in turn
  config = module.get_config(arg)
  config.update(dict(mesh=mesh, total_steps=10, log_every=1, eval_every=10, checkpoint_every=10,
                     batch_size=16, progress="lines", eval_max_batches=1, input_shards=1))
  if data_dir != "-":
    config.data_dir = data_dir
  out_dir = f"{workdir}/{mesh.replace(':', '').replace(',', '_')}"
  result = train.train_and_evaluate(config, out_dir)
  specs = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(result["final_params"])[0]:
    specs[mesh_lib.path_string(path)] = [str(a) for a in leaf.sharding.spec]
  losses = [json.loads(l)["train_loss"] for l in open(out_dir + "/metrics.jsonl")
            if "train_loss" in l]
  results[mesh] = {"losses": losses, "specs": specs, "devices": jax.device_count()}
print("RESULT" + json.dumps(results))
"""


def run(name, arg, meshes, devices, workdir, data_dir="-"):
  env = dict(
      os.environ,
      XLA_FLAGS=f"{helpers.TEST_XLA_FLAGS} --xla_force_host_platform_device_count={devices}",
      TF_CPP_MIN_LOG_LEVEL="3",
      PYTHONPATH=ROOT,
      JAX_PLATFORMS="cpu",
  )
  out = subprocess.run(
      [sys.executable, "-c", SCRIPT, name, arg, str(workdir), data_dir, *meshes],
      env=env,
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=900,
  )
  assert out.returncode == 0, out.stderr[-4000:]
  line = next(row for row in out.stdout.splitlines() if row.startswith("RESULT"))
  return json.loads(line[len("RESULT") :])


MODELS = {
    # Widths divisible by 4 (fsdp) and heads by 2 (model), so every rule really shards.
    "vit": ("vit", "runlocal", "Transformer/encoderblock_0/MlpBlock_3/Dense_0/kernel"),
    "gpt": ("gpt", "runlocal,variant=nano", "decoder/h_0/MlpBlock_3/Dense_0/kernel"),
}


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_meshes_match_one_device(tmp_path, model, digits_dir):
  name, arg, mlp_path = MODELS[model]
  data_dir = digits_dir if name == "vit" else "-"
  reference = run(name, arg, ["data:1"], 1, tmp_path / "one", data_dir)["data:1"]
  assert len(reference["losses"]) == 10
  expected = {
      "data:8": ["None", "None"],
      "data:2,fsdp:4": ["fsdp", "None"],
      "data:2,fsdp:2,model:2": ["fsdp", "model"],
  }
  results = run(name, arg, list(expected), 8, tmp_path / "eight", data_dir)
  for mesh, expected_spec in expected.items():
    got = results[mesh]
    assert got["devices"] == 8
    np.testing.assert_allclose(got["losses"], reference["losses"], rtol=2e-5, err_msg=mesh)
    assert got["specs"][mlp_path] == expected_spec, (mesh, got["specs"][mlp_path])
