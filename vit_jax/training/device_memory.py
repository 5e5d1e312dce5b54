"""Whether the train step fits the device's memory, known once it is compiled, and what to change
when it does not.

On GPU and TPU the trainer compiles its step for the first batch before running it (`check_fits`;
the call that runs it then reuses that compile) and compares the program's memory per device
(XLA's `memory_analysis()`: arguments, outputs less those aliasing donated arguments,
temporaries and code) with the device's own limit (`memory_stats()["bytes_limit"]`: the
allocator's share of HBM). A step that needs more, or that XLA refuses to compile for want of
memory, stops before step 1 with one line: the two figures and what to change; so does a device
that runs out at run time all the same (`ran_out`: an eval, fragmentation). On CPU, which
reports no limit, nothing is compiled ahead or said. `vit_jax.compile` plans the same for a TPU
slice before any is rented (tpu_planning/aot.py), with the same advice.
"""

import math

import jax

from vit_jax import errors

GIB = 2**30


class DoesNotFitError(errors.UserError):
  """The compiled step needs more memory per device than the device has."""


def device_limit(device) -> int | None:
  """The bytes a program may use on `device`, as its runtime reports them; None where it reports
  none (CPU)."""
  try:
    stats = device.memory_stats()
  except (jax.errors.JaxRuntimeError, RuntimeError, NotImplementedError):
    return None
  return (stats or {}).get("bytes_limit")


def program_bytes(memory) -> int:
  """What a compiled program needs per device, from its `memory_analysis()`: arguments, outputs
  (less those aliasing donated arguments), temporaries and code."""
  return (
      memory.argument_size_in_bytes
      + memory.output_size_in_bytes
      - memory.alias_size_in_bytes
      + memory.temp_size_in_bytes
      + memory.generated_code_size_in_bytes
  )


def out_of_memory(exc: BaseException) -> bool:
  """Whether `exc` is XLA running out of device memory (compiling or running a program)."""
  text = str(exc)
  return isinstance(exc, jax.errors.JaxRuntimeError) and (
      "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()
  )


def advice(config, state_bytes: int, limit: int | None, mesh_shape: dict) -> list[str]:
  """What to change, most effective first, among what the config does not use yet."""
  model, fixes = config.model, []
  devices = math.prod(mesh_shape.values())
  fsdp_fix = f"--config.mesh=fsdp:-1 (shard params and optimizer state over all {devices} devices)"
  if mesh_shape.get("fsdp", 1) < devices and limit and state_bytes > limit / 4:
    fixes.append(fsdp_fix)
  if model.get("remat", "none") == "none":
    fixes.append("--config.model.remat=full (or dots: keep only matmul outputs)")
  if model.get("dtype", "float32") == "float32":
    fixes.append("--config.model.dtype=bfloat16 (activations in half the bytes)")
  fixes.append(f"--config.grad_accum_steps={2 * config.grad_accum_steps} (smaller microbatches)")
  if "scan_layers" in model and not model.scan_layers:
    fixes.append("--config.model.scan_layers=True (one layer's program and buffers, reused)")
  if mesh_shape.get("fsdp", 1) < devices and fsdp_fix not in fixes:
    fixes.append(fsdp_fix)
  if devices > 1 and mesh_shape.get("model", 1) == 1:
    fixes.append(f"--config.mesh={config.mesh},model:2 (each layer split over 2 devices)")
  if config.batch_size % 2 == 0 and config.batch_size // 2 >= devices:
    fixes.append(f"--config.batch_size={config.batch_size // 2} (a smaller batch: another recipe)")
  return fixes


def require_fit(needed: int, limit: int, device_kind: str, fixes: list[str]) -> None:
  """Raises DoesNotFitError (the two figures and `fixes`) when `needed` bytes exceed `limit`."""
  if needed <= limit:
    return
  raise DoesNotFitError(
      f"the train step needs {needed / GIB:.2f} GiB per device but a {device_kind} has "
      f"{limit / GIB:.2f} GiB for it; try " + "; or ".join(fixes) + "."
  )


def check_fits(train_step, state, batch, setup) -> None:
  """Before the first step: compiles `train_step` (training/train.py `jit_update_step`) for
  `state` and `batch` where the device reports its memory, and raises DoesNotFitError if the
  program cannot fit it; nothing on CPU. Call it where the step will be called (the mesh in
  context), so that the call reuses this compile."""
  device = setup.mesh.devices.flat[0]
  limit = device_limit(device)
  if limit is None:
    return
  state_bytes = sum(
      math.prod(s.sharding.shard_shape(s.shape)) * s.dtype.itemsize
      for s in jax.tree.leaves(setup.sharded_abstract_state())
  )
  fixes = advice(setup.task.config, state_bytes, limit, dict(setup.mesh.shape))
  try:
    compiled = train_step.lower(state, batch).compile()
  except jax.errors.JaxRuntimeError as e:  # XLA:TPU refuses a program over the chip's HBM
    if not out_of_memory(e):
      raise
    reason = str(e).strip().splitlines()[0][:300]
    raise DoesNotFitError(
        f"the train step does not fit a {device.device_kind} (XLA: {reason}); try "
        + "; or ".join(fixes)
        + "."
    ) from e
  require_fit(program_bytes(compiled.memory_analysis()), limit, device.device_kind, fixes)


def ran_out(config, exc: BaseException) -> DoesNotFitError:
  """`exc`, XLA out of device memory while the run ran (`out_of_memory`), as one line naming
  what to change."""
  from vit_jax.training import mesh as mesh_lib  # pylint: disable=g-import-not-at-top

  devices = jax.devices()
  shape = mesh_lib.parse_mesh(config.mesh, len(devices), mesh_lib.num_slices(devices))
  reason = str(exc).strip().splitlines()[0][:300]
  kind = devices[0].device_kind
  return DoesNotFitError(
      f"a {kind} ran out of memory (XLA: {reason}); try "
      + "; or ".join(advice(config, 0, None, shape))
      + "."
  )
