"""Which input shards each process reads: exactly the rows its devices hold, for any layout."""

import jax
import numpy as np
import pytest

from vit_jax import errors
from vit_jax.training import host_input
from vit_jax.training import mesh as mesh_lib


def plans(held, slices, batch_size=16, input_shards=None):
  """{process: (shard_count, shards)} of every process of a layout."""
  out = {}
  for process in held:
    plan = host_input.plan_for_layout(held, slices, batch_size, input_shards, process)
    assert plan.batch_size == batch_size
    out[process] = (plan.shard_count, plan.shards)
  return out


def rows_read(plan_of_process, batch_size=16):
  count, shards = plan_of_process
  q = batch_size // count
  return [row for shard in shards for row in range(shard * q, (shard + 1) * q)]


def rows_held(slices_held, slices, batch_size=16):
  r = batch_size // slices
  return [row for s in slices_held for row in range(s * r, (s + 1) * r)]


# 4 processes x 2 devices, as scripts/launch_local.py lays them out (devices in process order).
LAYOUTS = {
    "data:8": ({0: (0, 1), 1: (2, 3), 2: (4, 5), 3: (6, 7)}, 8),
    "model:4": ({0: (0,), 1: (0,), 2: (1,), 3: (1,)}, 2),  # data:2, each group over 2 processes
    "fsdp:4,model:2": ({0: (0,), 1: (1,), 2: (2,), 3: (3,)}, 4),
    "model:8": ({0: (0,), 1: (0,), 2: (0,), 3: (0,)}, 1),
    # A torus-ordered mesh: each process's devices hold slices that are not neighbours.
    "interleaved": ({0: (0, 2), 1: (1, 3), 2: (4, 6), 3: (5, 7)}, 8),
    # 2 processes x 3 devices, data:3,model:2: the middle slice spans both processes.
    "overlapping": ({0: (0, 1), 1: (1, 2)}, 3),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_process_reads_exactly_its_devices_rows(name):
  held, slices = LAYOUTS[name]
  batch_size = 24 if slices == 3 else 16
  got = plans(held, slices, batch_size)
  for process, slices_held in held.items():
    assert rows_read(got[process], batch_size) == rows_held(slices_held, slices, batch_size)
  assert len({count for count, _ in got.values()}) == 1


def test_default_is_one_shard_per_group_of_processes_holding_the_same_rows():
  assert plans(*LAYOUTS["data:8"])[3] == (4, (3,))  # one per process, as with data:-1 before
  assert plans(*LAYOUTS["model:4"]) == {0: (2, (0,)), 1: (2, (0,)), 2: (2, (1,)), 3: (2, (1,))}
  assert plans(*LAYOUTS["model:8"])[2] == (1, (0,))
  assert plans(*LAYOUTS["interleaved"])[1] == (8, (1, 3))  # no coarser shards fit
  assert plans({0: tuple(range(8))}, 8)[0] == (1, (0,))  # one process: one shard


def test_a_fixed_shard_count_gives_the_same_global_batch_on_any_layout_it_feeds():
  # 8 shards: every layout reads them (shard i is the same rows everywhere).
  for name, (held, slices) in LAYOUTS.items():
    if name != "overlapping":
      for process, plan in plans(held, slices, 16, input_shards=8).items():
        assert rows_read(plan) == rows_held(held[process], slices), name


def test_a_shard_count_that_cannot_feed_the_mesh_is_refused_naming_one_that_can():
  held, slices = LAYOUTS["fsdp:4,model:2"]
  with pytest.raises(errors.ConfigError, match=r"input_shards=2 cannot feed .*input_shards=4 "):
    plans(held, slices, 16, input_shards=2)
  with pytest.raises(errors.ConfigError, match=r"batch_size=16 must be divisible by"):
    plans(held, slices, 16, input_shards=3)


def test_the_plan_of_a_real_mesh_and_its_global_batch():
  mesh = mesh_lib.make_mesh("data:-1")
  plan = host_input.plan_input(mesh, 8)
  assert plan == host_input.InputPlan(8, 1, (0,))  # one process holds every row
  assert mesh_lib.batch_slices_by_process(mesh) == {0: tuple(range(jax.device_count()))}
  batch = mesh_lib.global_batch({"x": np.arange(8.0)}, mesh, plan.batch_size)
  np.testing.assert_array_equal(np.asarray(batch["x"]), np.arange(8.0))


def test_model_axis_left_out_data_takes_the_rest():
  assert mesh_lib.parse_mesh("model:4", 8) == {"dcn": 1, "data": 2, "fsdp": 1, "model": 4}
  assert mesh_lib.parse_mesh("fsdp:4,model:2", 8)["data"] == 1
  assert mesh_lib.parse_mesh("fsdp:-1,model:2", 8) == {"dcn": 1, "data": 1, "fsdp": 4, "model": 2}
  with pytest.raises(errors.ConfigError, match="does not divide 8 devices"):
    mesh_lib.parse_mesh("model:3", 8)
