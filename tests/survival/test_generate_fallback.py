"""vit_jax.generate on a workdir whose latest step is damaged: it falls back to the intact step,
and a prompt with characters the tokenizer never saw is one error line naming them."""

import shutil

import pytest

from tests.survival import conftest
from tests.survival import test_bad_inputs
from tests.training import configs
from vit_jax.training import train


@pytest.fixture(scope="module")
def gpt_workdir(tmp_path_factory):
  """The initialized GPT (total_steps=0 saves it untrained: no train step to compile) as step 0,
  and a copy of it as step 2, damaged."""
  workdir = tmp_path_factory.mktemp("gpt") / "w"
  config = configs.load("gpt", "runlocal")
  config.model.depth, config.total_steps = 1, 0
  train.train_and_evaluate(config, str(workdir))
  shutil.copytree(workdir / "checkpoints" / "0", workdir / "checkpoints" / "2")
  conftest.damage(str(workdir / "checkpoints" / "2"), "zero_length")
  return workdir


@pytest.mark.parametrize("prompt", ["The ", "The \u2603"])
def test_generate_falls_back_past_a_damaged_step(gpt_workdir, prompt):
  before = conftest.snapshot(gpt_workdir)
  result = test_bad_inputs.run_module(
      "vit_jax.generate", f"--workdir={gpt_workdir}", f"--prompt={prompt}", "--max_new_tokens=4"
  )
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  warning, *rest = result.stderr.splitlines()
  assert "checkpoints/2 is unreadable" in warning and "using step 0" in warning
  if prompt.isascii():
    assert result.returncode == 0 and not rest and result.stdout.startswith(prompt)
  else:  # the prompt is refused, naming the character, not silently made UNK
    assert result.returncode == 2 and len(rest) == 1 and "'\u2603'" in rest[0]
  assert conftest.snapshot(gpt_workdir) == before  # readers move nothing
