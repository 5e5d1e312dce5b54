"""vit_jax/training/device_memory.py: a train step that cannot fit its device stops before step 1
in one line. This machine's CPU reports no memory limit, so the GPU/TPU figure is given by a
fake device limit; the program's own figure is XLA's, for the trainer's real step."""

import jax
import pytest

from tests import helpers
from vit_jax import errors
from vit_jax import tasks
from vit_jax.training import device_memory
from vit_jax.training import setup as setup_lib
from vit_jax.training import train

GIB = device_memory.GIB


@pytest.fixture(scope="module")
def step():
  """(setup, jitted train step, abstract state, abstract batch) of the ViT runlocal config."""
  config = helpers.vit_config("runlocal", num_classes=10, batch_size=8)
  setup = setup_lib.prepare(config, tasks.build_task_without_data(config))
  return (setup, train.jit_update_step(config, setup), *setup.abstract_inputs(config.batch_size))


def test_a_step_over_the_device_s_limit_stops_naming_both_figures_and_what_to_change(
    step, monkeypatch
):
  setup, train_step, state, batch = step
  needed = device_memory.program_bytes(train_step.lower(state, batch).compile().memory_analysis())
  assert needed > 0
  monkeypatch.setattr(device_memory, "device_limit", lambda device: needed - 1)  # a GPU's figure
  with pytest.raises(device_memory.DoesNotFitError) as raised:
    device_memory.check_fits(train_step, state, batch, setup)
  message = str(raised.value)
  assert isinstance(raised.value, errors.UserError) and "\n" not in message
  assert message.startswith(
      f"the train step needs {needed / GIB:.2f} GiB per device but a cpu has "
      f"{(needed - 1) / GIB:.2f} GiB for it; try --config.model.remat=full"
  )
  assert "--config.grad_accum_steps=2" in message and "--config.batch_size=4" in message
  monkeypatch.setattr(device_memory, "device_limit", lambda device: needed)
  device_memory.check_fits(train_step, state, batch, setup)  # fits exactly


def test_on_cpu_nothing_is_compiled_ahead_or_said(step, capsys):
  setup, _, state, batch = step
  assert device_memory.device_limit(jax.devices()[0]) is None  # the CPU reports no limit

  class Unlowerable:

    def lower(self, *args):
      raise AssertionError("compiled ahead on CPU")

  device_memory.check_fits(Unlowerable(), state, batch, setup)
  assert capsys.readouterr() == ("", "")


def test_xla_refusing_to_compile_for_memory_is_one_line(step, monkeypatch):
  setup, _, state, batch = step
  monkeypatch.setattr(device_memory, "device_limit", lambda device: 16 * GIB)
  refusal = "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 20.3G of 15.75G hbm."

  class Refused:  # as XLA:TPU answers a program over the chip's HBM

    def lower(self, *args):
      return self

    def compile(self):
      raise jax.errors.JaxRuntimeError(refusal)

  with pytest.raises(device_memory.DoesNotFitError, match=f"does not fit a cpu .XLA: {refusal}"):
    device_memory.check_fits(Refused(), state, batch, setup)


def test_running_out_at_run_time_is_one_line_and_a_full_disk_is_not_memory():
  gpu_oom = jax.errors.JaxRuntimeError(
      "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9663676416 bytes."
  )
  assert device_memory.out_of_memory(gpu_oom)
  disk_full = ValueError('RESOURCE_EXHAUSTED: Error writing local file "/d/w/x": No space left')
  assert not device_memory.out_of_memory(disk_full)  # TensorStore's words for ENOSPC
  config = helpers.vit_config("runlocal")
  message = str(device_memory.ran_out(config, gpu_oom))
  assert message.startswith("a cpu ran out of memory (XLA: RESOURCE_EXHAUSTED: Out of memory")
  assert "--config.grad_accum_steps=2" in message and "\n" not in message
