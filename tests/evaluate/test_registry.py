"""Evaluator settings from the command line: a key that defaults to None takes a value."""

from vit_jax.sweep import checks as sweep_checks
from vit_jax.sweep import spec


def parsed_config(*overrides):
  """The config `vit_jax.main` would train with (its flag parsing: config_flags, locked)."""
  return sweep_checks.run_config(spec.Run("run", "configs/gpt.py:dataset=embedded", overrides))


def test_an_unset_stride_can_be_set_on_the_command_line():
  assert parsed_config().evals.eval.stride is None  # documents: no stride of its own
  assert parsed_config(("evals.eval.stride", 32)).evals.eval.stride == 32
