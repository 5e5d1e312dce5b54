"""vit_jax.generate on a workdir whose latest step is damaged: it falls back to the intact step,
and a prompt with characters the tokenizer never saw is one error line naming them."""

import shutil

import pytest

from tests import tiny_configs as configs
from tests.survival import conftest
from tests.survival import test_bad_command_input
from vit_jax.training import train


@pytest.fixture(scope="module")
def gpt_workdir(tmp_path_factory):
  """The initialized GPT (total_steps=0 saves it untrained: no train step to compile) as step 0,
  and copies of it as steps 2 (intact) and 4 (damaged): the fallback must name step 2."""
  workdir = tmp_path_factory.mktemp("gpt") / "w"
  config = configs.load("gpt", "runlocal")
  config.model.depth, config.total_steps = 1, 0
  train.train_and_evaluate(config, str(workdir))
  for step in ("2", "4"):
    shutil.copytree(workdir / "checkpoints" / "0", workdir / "checkpoints" / step)
  conftest.damage(str(workdir / "checkpoints" / "4"), "zero_length")
  return workdir


@pytest.mark.parametrize("prompt", ["The ", "The \u2603"])
def test_generate_falls_back_past_a_damaged_step(gpt_workdir, prompt):
  before = conftest.snapshot(gpt_workdir)
  result = test_bad_command_input.run_module(
      "vit_jax.generate", f"--workdir={gpt_workdir}", f"--prompt={prompt}", "--max_new_tokens=4"
  )
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  warning, *rest = result.stderr.splitlines()
  assert "checkpoints/4 is unreadable" in warning and "using step 2" in warning
  if prompt.isascii():
    assert result.returncode == 0 and not rest and result.stdout.startswith(prompt)
  else:  # the prompt is refused, naming the character, not silently made UNK
    assert result.returncode == 2 and len(rest) == 1 and "'\u2603'" in rest[0]
  assert conftest.snapshot(gpt_workdir) == before  # readers move nothing
