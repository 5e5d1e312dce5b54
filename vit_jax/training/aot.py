"""Compiling the trainer's step ahead of time for a TPU slice (or the local devices): memory,
FLOPs and collectives per device, before any pod hour is spent.

libtpu's compiler runs on any machine: `topologies.get_topology_desc` gives a slice's devices
without the hardware, and `jit(...).lower(abstract inputs).compile()` over a mesh of them
compiles what the slice would run. No data is read and no array allocated.
"""

import dataclasses
import math
import os
import re

import jax

from vit_jax import errors
from vit_jax.training import flops

GIB = 2**30
# HBM per chip (GiB), by TPU generation, from the Cloud TPU system architecture pages.
HBM_GIB = {"v4": 32, "v5e": 16, "v5p": 95, "v6e": 32}
# device_kind as libtpu names each generation's chips.
DEVICE_KINDS = {"TPU v4": "v4", "TPU v5 lite": "v5e", "TPU v5": "v5p", "TPU v6 lite": "v6e"}
# The number in a slice name counts TensorCores on v4 and v5p (2 per chip), chips on v5e, v6e.
CORES_PER_CHIP = {"v4": 2, "v5p": 2, "v5e": 1, "v6e": 1}
# Chips -> the slice's torus (Cloud TPU's standard shapes).
SHAPES_3D = {
    4: "2x2x1",
    8: "2x2x2",
    16: "2x2x4",
    32: "2x4x4",
    64: "4x4x4",
    128: "4x4x8",
    256: "4x8x8",
    512: "8x8x8",
    1024: "8x8x16",
    2048: "8x16x16",
    4096: "16x16x16",
}
SHAPES_2D = {
    1: "1x1",
    4: "2x2",
    8: "2x4",
    16: "4x4",
    32: "4x8",
    64: "8x8",
    128: "8x16",
    256: "16x16",
}
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@dataclasses.dataclass(frozen=True)
class Topology:
  name: str  # as given, e.g. "v5p-64"
  generation: str  # v4, v5e, v5p, v6e
  shape: str  # chips per torus axis, e.g. "2x4x4"

  @property
  def chips(self) -> int:
    return math.prod(int(n) for n in self.shape.split("x"))

  def devices(self) -> list:
    """The slice's devices (one per chip), from libtpu's compiler: no TPU needed."""
    from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

    # Compiling only: other processes may hold libtpu too (e.g. compiles run side by side).
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

    # v4 chips are one device of two cores (megacore), as on a v4 VM.
    extra = {"chip_config_name": "megacore"} if self.generation == "v4" else {}
    try:
      desc = topologies.get_topology_desc(
          topology_name=f"{self.generation}:{self.shape}", platform="tpu", **extra
      )
    except (RuntimeError, ValueError) as e:
      if "TPU support not installed" in str(e):
        raise errors.ConfigError(
            "Compiling for a TPU slice needs libtpu: pip install 'jax[tpu]' in a separate venv "
            "(scripts/test_tpu_compile.sh), or leave out --topology to compile for local devices."
        ) from e
      raise
    return list(desc.devices)


def parse_topology(name: str) -> Topology:
  """'v5p-64' (Cloud TPU's slice name) or 'v5p:2x4x4' (the torus) -> Topology."""
  generation, sep, size = name.partition("-")
  if sep and generation in HBM_GIB and size.isdigit():
    count = int(size)
    shapes = SHAPES_2D if generation in ("v5e", "v6e") else SHAPES_3D
    if count % CORES_PER_CHIP[generation] == 0 and count // CORES_PER_CHIP[generation] in shapes:
      return Topology(name, generation, shapes[count // CORES_PER_CHIP[generation]])
  generation, sep, shape = name.partition(":")
  if sep and generation in HBM_GIB and re.fullmatch(r"\d+(x\d+){1,2}", shape):
    return Topology(name, generation, shape)
  sizes = sorted({c * CORES_PER_CHIP["v5p"] for c in SHAPES_3D})
  raise errors.ConfigError(
      f"Unknown TPU topology {name!r}: use a slice name such as v5p-64, v4-32, v5e-16 or v6e-16 "
      f"(v4/v5p sizes count cores: {', '.join(map(str, sizes[:6]))}, ...; v5e/v6e count chips: "
      f"{', '.join(map(str, SHAPES_2D))}) or a torus such as v5p:2x4x4."
  )


def hbm_bytes(device) -> int | None:
  """Memory of one device: HBM by TPU generation, the runtime's limit elsewhere (None: CPU)."""
  for kind, generation in DEVICE_KINDS.items():  # "TPU v5 lite" before "TPU v5"
    if device.device_kind == kind or device.device_kind.startswith(kind + " "):
      return HBM_GIB[generation] * GIB
  if device.platform == "tpu" and device.device_kind.startswith("TPU v5"):
    return HBM_GIB["v5p"] * GIB  # "TPU v5p" on some libtpu versions
  try:
    return (device.memory_stats() or {}).get("bytes_limit")
  except (jax.errors.JaxRuntimeError, RuntimeError, NotImplementedError):
    return None


def count_kernels(hlo_text: str) -> int:
  """Pallas (Mosaic) kernels in a compiled TPU module, e.g. splash attention's forward and
  backward passes."""
  return hlo_text.count('custom_call_target="tpu_custom_call"')


def count_collectives(hlo_text: str) -> dict[str, int]:
  """Collective ops in a compiled module's HLO text (async pairs counted once, by their start;
  an op inside a loop, e.g. a scanned layer's, once)."""
  counts = {}
  for op in COLLECTIVES:
    counts[op] = len(re.findall(rf"\s{op}(?:-start)?\(", hlo_text))
  return counts


def shard_bytes(abstract_tree, shardings) -> int:
  """Bytes of the largest device's shard of every leaf, added up."""
  total = 0
  for leaf, sharding in zip(jax.tree.leaves(abstract_tree), jax.tree.leaves(shardings)):
    shape = sharding.shard_shape(leaf.shape)
    total += math.prod(shape) * leaf.dtype.itemsize
  return total


def _flop(count: float) -> str:
  return f"{count / 1e12:.2f} TFLOP" if count >= 1e11 else f"{count / 1e9:.2f} GFLOP"


@dataclasses.dataclass
class Report:
  """What one device holds and does in one train step."""

  device_kind: str
  num_devices: int
  mesh: dict
  batch_size: int
  state_bytes: int  # params + optimizer state
  batch_bytes: int
  temp_bytes: int
  total_bytes: int
  hbm_bytes: int | None
  xla_flops: float | None  # per device, what the compiled step runs (remat included)
  model_flops: float  # per device, the model's own count (training/flops.py)
  collectives: dict
  kernels: int  # Pallas kernel calls (splash attention on TPU)
  advice: list

  @property
  def fits(self) -> bool:
    return self.hbm_bytes is None or self.total_bytes <= self.hbm_bytes

  def text(self) -> str:
    gib = lambda b: f"{b / GIB:.2f} GiB" if b >= GIB / 10 else f"{b / 2**20:.1f} MiB"
    mesh = ",".join(f"{k}:{v}" for k, v in self.mesh.items() if v > 1) or "one device"
    hbm = "no device limit known" if self.hbm_bytes is None else f"of {gib(self.hbm_bytes)} HBM"
    verdict = "fits" if self.fits else "DOES NOT FIT"
    flops_line = f"model's own count {_flop(self.model_flops)}"
    if self.xla_flops:
      ratio = self.xla_flops / self.model_flops if self.model_flops else float("nan")
      flops_line = f"XLA {_flop(self.xla_flops)}, {flops_line} (XLA/model {ratio:.2f})"
    collectives = ", ".join(f"{k} {v}" for k, v in self.collectives.items() if v) or "none"
    lines = [
        f"{self.num_devices} x {self.device_kind}, mesh {mesh}, global batch {self.batch_size}",
        "per device:",
        f"  params + optimizer state  {gib(self.state_bytes)}",
        f"  batch                     {gib(self.batch_bytes)}",
        f"  temporaries               {gib(self.temp_bytes)}",
        f"  total                     {gib(self.total_bytes)} {hbm}: {verdict}",
        f"  FLOPs per step            {flops_line}",
        f"  collectives in the step   {collectives}",
        f"  Pallas kernels            {self.kernels}",
    ]
    return "\n".join(lines)


def advice(config, state_bytes: int, hbm: int | None, mesh_shape: dict) -> list[str]:
  """What to change, most effective first, among what the config does not use yet."""
  model, fixes = config.model, []
  devices = math.prod(mesh_shape.values())
  fsdp_fix = f"--config.mesh=fsdp:-1 (shard params and optimizer state over all {devices} devices)"
  if mesh_shape.get("fsdp", 1) < devices and hbm and state_bytes > hbm / 4:
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
  return fixes


def compile_report(setup, train_step, batch_size: int) -> Report:
  """Compiles the jitted `train_step` (training/train.py `jit_update_step`) for the mesh of
  `setup` (a train.Setup) with abstract inputs; returns per-device figures."""
  state, batch = setup.abstract_inputs(batch_size)
  devices = setup.mesh.devices.flatten()
  try:
    # The mesh in context tells attention_impl=auto the target platform (splash on a TPU slice).
    with jax.set_mesh(setup.mesh):
      lowered = train_step.lower(state, batch)
    compiled = lowered.compile()
  except jax.errors.JaxRuntimeError as e:  # XLA:TPU refuses a program over the chip's HBM
    if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
      raise
    fixes = advice(setup.task.config, 0, None, dict(setup.mesh.shape))
    reason = str(e).strip().splitlines()[0][:300]
    raise DoesNotFitError(
        f"the train step does not fit a {devices[0].device_kind} (XLA: {reason}); try "
        + "; or ".join(fixes)
        + "."
    ) from e
  memory = compiled.memory_analysis()
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost  # older JAX: one dict per module
  num_devices = len(devices)
  state_bytes = shard_bytes(setup.abstract_state, setup.state_shardings)
  batch_bytes = shard_bytes(batch, jax.tree.map(lambda b: b.sharding, batch))
  total = (
      memory.argument_size_in_bytes
      + memory.output_size_in_bytes
      - memory.alias_size_in_bytes
      + memory.temp_size_in_bytes
      + memory.generated_code_size_in_bytes
  )
  model_flops = (
      flops.train_flops_per_example(setup.model_config, setup.task.init_inputs(1))
      * batch_size
      / num_devices
  )
  hbm = hbm_bytes(devices[0])
  config = setup.task.config
  hlo = compiled.as_text()
  return Report(
      device_kind=devices[0].device_kind,
      num_devices=num_devices,
      mesh=dict(setup.mesh.shape),
      batch_size=batch_size,
      state_bytes=state_bytes,
      batch_bytes=batch_bytes,
      temp_bytes=memory.temp_size_in_bytes,
      total_bytes=total,
      hbm_bytes=hbm,
      xla_flops=(cost or {}).get("flops"),
      model_flops=model_flops,
      collectives=count_collectives(hlo),
      kernels=count_kernels(hlo),
      advice=advice(config, state_bytes, hbm, dict(setup.mesh.shape)),
  )


class DoesNotFitError(errors.UserError):
  """The compiled step needs more memory per device than the device has."""


def require_fit(report: Report) -> None:
  if not report.fits:
    raise DoesNotFitError(
        f"the train step needs {report.total_bytes / GIB:.1f} GiB per device but a "
        f"{report.device_kind} has {report.hbm_bytes / GIB:.0f} GiB; try "
        + "; or ".join(report.advice)
        + "."
    )
