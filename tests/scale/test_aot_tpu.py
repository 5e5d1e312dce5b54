"""The paper recipes' train steps compile for their TPU slices and fit the chip's memory.

libtpu compiles for a slice it does not have, so this runs on any machine where libtpu is
installed: a separate venv (scripts/test_tpu_compile.sh builds .venv-tpu), never the main
one. Elsewhere every test here is skipped. Each compile takes minutes on a small CPU machine.
"""

import importlib.util
import os
import subprocess
import sys

import pytest

from tests import helpers

pytestmark = [
    pytest.mark.tpu_compile,
    pytest.mark.skipif(
        importlib.util.find_spec("libtpu") is None,
        reason="needs libtpu (scripts/test_tpu_compile.sh)",
    ),
]


def compile_command(*args):
  env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=helpers.ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("XLA_FLAGS", None)
  cmd = [sys.executable, "-m", "vit_jax.compile", *args]
  return subprocess.run(
      cmd, env=env, capture_output=True, text=True, timeout=1800, cwd=helpers.ROOT
  )


# The paper configs on their target_topology (the config's default slice): rows of docs/pod.md's
# "Before you spend pod hours" table.
RECIPES = {
    "vit_b16_i1k": [  # the measured row: batch 1024 with the S/16 recipe's head
        f"--config={helpers.ROOT}/configs/vit.py:dataset=imagenet2012,variant=B/16",
        "--config.batch_size=1024",
        "--config.target_topology=v5p-8",
        "--config.model.classifier=gap",
        "--config.model.posemb=sincos2d",
        "--config.model.representation_size=0",
    ],
    "gpt2_124m": [
        f"--config={helpers.ROOT}/configs/gpt.py:variant=gpt2",
        "--config.tokenizer.vocab_size=50257",
        "--config.seq_len=1024",
        "--config.batch_size=512",
    ],
    "bert_base": [  # the recipe's second phase, the longer sequences
        f"--config={helpers.ROOT}/configs/bert.py:variant=base",
        "--config.tokenizer.vocab_size=30522",
        "--config.seq_len=512",
        "--config.batch_size=256",
    ],
}


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_recipe_compiles_for_its_slice_and_fits(recipe):
  out = compile_command(*RECIPES[recipe])
  print(out.stdout)  # the report, shown in CI's log (scripts/test_tpu_compile.sh passes -rP)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
  assert "x TPU v5" in out.stdout  # compiled for the TPU slice, not the local CPU
  assert ": fits" in out.stdout
  total, hbm = out.stdout.split("  total")[1].split("GiB")[:2]
  assert 1 < float(total.split()[-1]) <= float(hbm.split()[-1])
  assert "all-reduce" in out.stdout or "reduce-scatter" in out.stdout  # gradients meet


@pytest.mark.parametrize(
    "args, message",
    [
        (["--topology=v5p-6"], "error: Unknown TPU topology 'v5p-6'"),
        (["--config.mesh=data:3"], "error: mesh='data:3' has 3 slots but there are 4 devices"),
        (["--config.batch_size=6"], "error: batch_size=6 must be divisible by the batch shards"),
    ],
)
def test_bad_input_for_a_slice_is_refused_in_one_line(args, message):
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:runlocal",
      "--config.num_classes=10",
      "--topology=v5p-8",  # 4 chips
      *args,
  )
  assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
  errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
  assert len(errors) == 1 and errors[0].startswith(message), out.stderr[-2000:]
  assert "Traceback" not in out.stderr and "Compiling" not in out.stdout


def test_a_step_that_does_not_fit_names_what_to_change():
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:dataset=imagenet2012,variant=B/16",
      "--topology=v5e-4",
      "--config.batch_size=4096",
  )
  assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
  # Over HBM: XLA either refuses the program, or compiles it and the report says it is too big.
  error = next(line for line in out.stderr.splitlines() if line.startswith("error: "))
  assert error.startswith("error: the train step ") and "model.remat=full" in error
