"""Compiling the trainer's step ahead of time for a TPU slice (or the local devices): memory,
FLOPs and collectives per device, and from the chip's published figures bounds on step time, MFU
and the run's chip-hours, before any pod hour is spent.

libtpu's compiler runs on any machine: `topologies.get_topology_desc` gives a slice's devices
(of several slices, with `num_slices`) without the hardware, and `jit(...).lower(abstract
inputs).compile()` over a mesh of them compiles what the slice would run. No data is read and no
array allocated.

The bounds are a roofline: per device, compute takes at least XLA's FLOPs over the chip's peak
bf16 FLOP/s (XLA counts no Pallas kernel, so this is low), HBM traffic XLA's estimate of the bytes
its ops read and write over the HBM bandwidth, and each collective its bytes sent
(collectives.py) over the ICI or DCN bandwidth one chip sends at (chips.py). A
step takes at least the largest of these (everything overlapped); the sum max(compute, HBM) +
ICI + DCN is the estimate for collectives that do not overlap compute. The MFU bound and the
chip-hours follow from the lower bound. They are bounds from published peaks, never measurements.
"""

import dataclasses
import math
import os
import re
import tempfile

import jax

from vit_jax import errors
from vit_jax.config import args as config_args
from vit_jax.tpu_planning import chips
from vit_jax.tpu_planning import collectives as collectives_lib
from vit_jax.tpu_planning import peak_buffers
from vit_jax.training import device_memory
from vit_jax.training import flops
from vit_jax.training import mesh as mesh_lib

GIB = 2**30
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


@dataclasses.dataclass(frozen=True)
class Topology:
  name: str  # as given, e.g. "v5p-64"
  generation: str  # v4, v5e, v5p, v6e
  shape: str  # chips per torus axis, e.g. "2x4x4"

  @property
  def chips(self) -> int:
    return math.prod(int(n) for n in self.shape.split("x"))

  def devices(self, num_slices: int = 1) -> list:
    """The devices (one per chip) of `num_slices` such slices, from libtpu's compiler: no TPU
    needed. Each carries its `slice_index`."""
    from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

    # Compiling only: other processes may hold libtpu too (e.g. compiles run side by side).
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

    # v4 chips are one device of two cores (megacore), as on a v4 VM.
    extra = {"chip_config_name": "megacore"} if self.generation == "v4" else {}
    if self.chips < 4:  # smaller than a host's 2x2 chips (libtpu's default host bounds)
      extra["chips_per_host_bounds"] = ([int(n) for n in self.shape.split("x")] + [1, 1])[:3]
    try:
      desc = topologies.get_topology_desc(
          topology_name=f"{self.generation}:{self.shape}",
          platform="tpu",
          num_slices=num_slices,
          **extra,
      )
    except (RuntimeError, ValueError) as e:
      if "TPU support not installed" in str(e):
        raise errors.ConfigError(
            "Compiling for a TPU slice needs libtpu: pip install 'jax[tpu]' in a separate venv "
            "(scripts/test_tpu_compile.sh), or leave out --topology to compile for local devices."
        ) from e
      if "INVALID_ARGUMENT" in str(e):
        raise errors.ConfigError(
            f"libtpu cannot lay out the TPU topology {self.name!r} ({str(e).strip()[:200]}); "
            "use one of Cloud TPU's slice names, e.g. v5p-8, v5e-4."
        ) from e
      raise
    return list(desc.devices)


def parse_topology(name: str) -> Topology:
  """'v5p-64' (Cloud TPU's slice name) or 'v5p:2x4x4' (the torus) -> Topology."""
  generation, sep, size = name.partition("-")
  if sep and generation in chips.BY_GENERATION and config_args.is_digits(size):
    count = int(size)
    shapes = SHAPES_2D if generation in ("v5e", "v6e") else SHAPES_3D
    if count % CORES_PER_CHIP[generation] == 0 and count // CORES_PER_CHIP[generation] in shapes:
      return Topology(name, generation, shapes[count // CORES_PER_CHIP[generation]])
  generation, sep, shape = name.partition(":")
  if sep and generation in chips.BY_GENERATION and re.fullmatch(r"\d+(x\d+){1,2}", shape, re.ASCII):
    return Topology(name, generation, shape)
  sizes = sorted({c * CORES_PER_CHIP["v5p"] for c in SHAPES_3D})
  raise errors.ConfigError(
      f"Unknown TPU topology {name!r}: use a slice name such as v5p-64, v4-32, v5e-16 or v6e-16 "
      f"(v4/v5p sizes count cores: {', '.join(map(str, sizes[:6]))}, ...; v5e/v6e count chips: "
      f"{', '.join(map(str, SHAPES_2D))}) or a torus such as v5p:2x4x4."
  )


def hbm_bytes(device) -> int | None:
  """Memory of one device: a TPU chip's HBM, the runtime's limit elsewhere (None: CPU)."""
  chip = chips.by_device_kind(device.device_kind)
  if chip:
    return chip.hbm_gib * GIB
  return device_memory.device_limit(device)


def count_kernels(hlo_text: str) -> int:
  """Pallas (Mosaic) kernels in a compiled TPU module, e.g. splash attention's forward and
  backward passes."""
  return hlo_text.count('custom_call_target="tpu_custom_call"')


def _flop(count: float) -> str:
  return f"{count / 1e12:.2f} TFLOP" if count >= 1e11 else f"{count / 1e9:.2f} GFLOP"


def format_bytes(count: float) -> str:
  if count >= GIB / 10:
    return f"{count / GIB:.2f} GiB"
  return f"{count / 2**20:.1f} MiB" if count >= 2**20 / 10 else f"{count / 2**10:.1f} KiB"


def format_seconds(count: float) -> str:
  for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
    if count >= scale:
      return f"{count / scale:.3g} {unit}"
  return f"{count / 1e-9:.3g} ns"


def format_count(count: float) -> str:
  """3 significant digits, or whole with thousands separated from 100: 0.0123, 12.3, 12,345."""
  return f"{count:,.0f}" if count >= 100 else f"{count:.3g}"


@dataclasses.dataclass(frozen=True)
class Roofline:
  """Per-step time bounds of one device from its chip's published peaks (seconds)."""

  compute: float  # XLA's FLOPs over the peak bf16 FLOP/s
  hbm: float  # XLA's bytes accessed over the HBM bandwidth
  ici: float  # bytes sent within the slice over what a chip sends on ICI
  dcn: float | None  # bytes sent to other slices over DCN; None: the chip has no DCN figure

  @property
  def lower_bound(self) -> float:
    """No step is faster: every part overlapped with the slowest."""
    return max(self.compute, self.hbm, self.ici, self.dcn or 0.0)

  @property
  def without_overlap(self) -> float:
    """The estimate for collectives that do not overlap compute."""
    return max(self.compute, self.hbm) + self.ici + (self.dcn or 0.0)


@dataclasses.dataclass
class Report:
  """What one device holds and does in one train step, and bounds on the run from them."""

  device_kind: str
  num_devices: int  # over all slices
  num_slices: int
  mesh: dict
  batch_size: int
  total_steps: int
  state_bytes: int  # params + optimizer state
  batch_bytes: int
  temp_bytes: int
  total_bytes: int
  hbm_bytes: int | None
  hbm_headroom: float  # the share of HBM a step must leave free to fit
  xla_flops: float | None  # per device, what the compiled step runs (remat included)
  xla_bytes_accessed: float | None  # per device, XLA's estimate of its ops' reads and writes
  model_flops: float  # per device, the model's own count (training/flops.py)
  collectives: dict  # kind -> collectives.Traffic, per device and step
  kernels: int  # Pallas kernel calls (splash attention on TPU)
  advice: list
  peak: peak_buffers.Peak | None = None  # what is live at the peak, from XLA's memory files

  @property
  def usable_bytes(self) -> float | None:
    return None if self.hbm_bytes is None else self.hbm_bytes * (1 - self.hbm_headroom)

  @property
  def fits(self) -> bool:
    return self.hbm_bytes is None or self.total_bytes <= self.usable_bytes

  @property
  def chip(self) -> chips.Chip | None:
    return chips.by_device_kind(self.device_kind)

  def roofline(self) -> Roofline | None:
    """None where the device has no published figures (CPU, GPU) or XLA gave no cost."""
    chip = self.chip
    if chip is None or self.xla_flops is None:
      return None
    ici = sum(t.ici_bytes for t in self.collectives.values())
    dcn = sum(t.dcn_bytes for t in self.collectives.values())
    return Roofline(
        compute=self.xla_flops / chip.bf16_flops,
        hbm=(self.xla_bytes_accessed or 0.0) / chip.hbm_bandwidth,
        ici=ici / chip.ici_send,
        dcn=None if chip.dcn_send is None else dcn / chip.dcn_send,
    )

  def mfu_bound(self) -> float | None:
    """Upper bound on MFU: the model's FLOPs over the peak in the lower-bound step time."""
    roofline = self.roofline()
    if roofline is None or roofline.lower_bound <= 0:
      return None
    return min(1.0, self.model_flops / (self.chip.bf16_flops * roofline.lower_bound))

  def chip_hours_bound(self) -> float | None:
    """Lower bound on the run's chip-hours: total_steps at the lower-bound step time."""
    roofline = self.roofline()
    if roofline is None:
      return None
    return self.num_devices * self.total_steps * roofline.lower_bound / 3600

  def text(self) -> str:
    mesh = ",".join(f"{k}:{v}" for k, v in self.mesh.items() if v > 1) or "one device"
    slices = f" in {self.num_slices} slices" if self.num_slices > 1 else ""
    if self.hbm_bytes is None:
      limit, verdict = "no device limit known", "fits"
    else:
      limit = (
          f"of {format_bytes(self.usable_bytes)} usable ({format_bytes(self.hbm_bytes)} HBM less "
          f"{self.hbm_headroom:.0%} headroom)"
      )
      verdict = "fits" if self.fits else "DOES NOT FIT"
      if not self.fits and self.total_bytes <= self.hbm_bytes:
        verdict += " the headroom"
    flops_line = f"model's own count {_flop(self.model_flops)}"
    if self.xla_flops:
      ratio = self.xla_flops / self.model_flops if self.model_flops else float("nan")
      flops_line = f"XLA {_flop(self.xla_flops)}, {flops_line} (XLA/model {ratio:.2f})"
    lines = [
        f"{self.num_devices} x {self.device_kind}{slices}, mesh {mesh}, "
        f"global batch {self.batch_size}",
        "per device:",
        f"  params + optimizer state  {format_bytes(self.state_bytes)}",
        f"  batch                     {format_bytes(self.batch_bytes)}",
        f"  temporaries               {format_bytes(self.temp_bytes)}",
        f"  total                     {format_bytes(self.total_bytes)} {limit}: {verdict}",
        f"  FLOPs per step            {flops_line}",
    ]
    if self.xla_bytes_accessed:
      lines.append(
          f"  memory traffic per step   {format_bytes(self.xla_bytes_accessed)} read and written "
          "(XLA's estimate)"
      )
    ran = {k: t for k, t in self.collectives.items() if t.ops}
    sent = sum(t.ici_bytes + t.dcn_bytes for t in ran.values())
    dcn = sum(t.dcn_bytes for t in ran.values())
    summary = f">= {format_bytes(sent)} sent by each device" + (
        f", {format_bytes(dcn)} of it between slices" if dcn else ""
    )
    lines.append(f"  collectives per step      {summary if ran else 'none'}")
    for kind, traffic in ran.items():
      between = f" ({format_bytes(traffic.dcn_bytes)} between slices)" if traffic.dcn_bytes else ""
      total = format_bytes(traffic.ici_bytes + traffic.dcn_bytes)
      lines.append(f"    {kind:<24}{traffic.ops} ops, >= {total}{between}")
    lines.append(f"  Pallas kernels            {self.kernels}")
    if self.peak:
      lines.append(self.peak.text())
    else:
      not_listed = "not listed (the step came from the compilation cache)"
      lines.append(f"  largest buffers live at the peak: {not_listed}")
    return "\n".join(lines + self._bounds_text())

  def _bounds_text(self) -> list[str]:
    roofline, chip = self.roofline(), self.chip
    if roofline is None:
      why = f"no published peak figures for a {self.device_kind}" if chip is None else "no XLA cost"
      return [f"no bounds on step time: {why}"]
    dcn = "DCN not published" if chip.dcn_send is None else f"{chip.dcn_send / 1e9:g} GB/s DCN"
    parts = [f"compute {format_seconds(roofline.compute)}", f"HBM {format_seconds(roofline.hbm)}"]
    parts.append(f"ICI {format_seconds(roofline.ici)}")
    if self.num_slices > 1:
      dcn_time = (
          "left out (no published figure)" if roofline.dcn is None else format_seconds(roofline.dcn)
      )
      parts.append(f"DCN {dcn_time}")
    return [
        f"bounds from TPU {chip.generation}'s published peaks ({chip.source}), not measurements:",
        f"  per chip                  {chip.bf16_flops / 1e12:g} TFLOP/s bf16, "
        f"{chip.hbm_bandwidth / 1e9:g} GB/s HBM, sends {chip.ici_send / 1e9:.4g} GB/s ICI, {dcn}",
        f"  step time                 >= {format_seconds(roofline.lower_bound)} lower bound, the "
        f"largest of {', '.join(parts)}",
        f"                            ~ {format_seconds(roofline.without_overlap)} estimate if "
        "collectives do not overlap compute",
        f"  MFU                       <= {format_count(100 * self.mfu_bound())}% upper bound",
        f"  chip-hours                >= {format_count(self.chip_hours_bound())} lower bound, "
        f"{self.total_steps:,} steps on {self.num_devices} chip" + "s" * (self.num_devices > 1),
    ]


def _compile_uncached(lowered, options):
  """XLA writes its memory files only when it compiles: a step loaded from the persistent
  compilation cache (whose key leaves dump options out) would have none."""
  from jax.experimental.compilation_cache import compilation_cache  # pylint: disable=g-import-not-at-top

  cached = jax.config.jax_enable_compilation_cache
  # JAX decides once whether its cache is on: reset, so it asks again after each update.
  compilation_cache.reset_cache()
  jax.config.update("jax_enable_compilation_cache", False)
  try:
    return lowered.compile(compiler_options=options)
  finally:
    jax.config.update("jax_enable_compilation_cache", cached)
    compilation_cache.reset_cache()


def compile_report(setup, train_step, batch_size: int, list_peak_buffers: bool = True) -> Report:
  """Compiles the jitted `train_step` (training/train.py `jit_update_step`) for the mesh of
  `setup` (a training.setup.Setup) with abstract inputs; returns per-device figures.

  XLA lists the buffers live at the peak only when it compiles: with `list_peak_buffers` the step
  is compiled whatever the persistent compilation cache holds; without, a step found there is
  loaded (the trainer's check, whose step is compiled again to run) and its report lists none."""
  state, batch = setup.abstract_inputs(batch_size)
  devices = setup.mesh.devices.flatten()
  try:
    # The mesh in context tells attention_impl=auto the target platform (splash on a TPU slice).
    with jax.set_mesh(setup.mesh):
      lowered = train_step.lower(state, batch)
    with tempfile.TemporaryDirectory() as dump_dir:  # XLA's memory files, read before they go
      options = {**peak_buffers.DUMP_OPTIONS, "xla_dump_to": dump_dir}
      if list_peak_buffers:
        compiled = _compile_uncached(lowered, options)
      else:
        compiled = lowered.compile(compiler_options=options)
      peak = peak_buffers.read(dump_dir)
  except jax.errors.JaxRuntimeError as e:  # XLA:TPU refuses a program over the chip's HBM
    if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
      raise
    fixes = device_memory.advice(setup.task.config, 0, None, dict(setup.mesh.shape))
    reason = str(e).strip().splitlines()[0][:300]
    raise DoesNotFitError(
        f"the train step does not fit a {devices[0].device_kind} (XLA: {reason}); try "
        + "; or ".join(fixes)
        + "."
    ) from e
  memory = compiled.memory_analysis()
  cost = compiled.cost_analysis()
  cost = (cost[0] if isinstance(cost, (list, tuple)) else cost) or {}  # older JAX: one per module
  num_devices = len(devices)
  num_slices = mesh_lib.num_slices(devices)
  state_bytes = shard_bytes(setup.abstract_state, setup.state_shardings)
  batch_bytes = shard_bytes(batch, jax.tree.map(lambda b: b.sharding, batch))
  total = device_memory.program_bytes(memory)
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
      num_slices=num_slices,
      mesh=dict(setup.mesh.shape),
      batch_size=batch_size,
      total_steps=config.total_steps,
      state_bytes=state_bytes,
      batch_bytes=batch_bytes,
      temp_bytes=memory.temp_size_in_bytes,
      total_bytes=total,
      hbm_bytes=hbm,
      hbm_headroom=config.hbm_headroom,
      xla_flops=cost.get("flops"),
      xla_bytes_accessed=cost.get("bytes accessed"),
      model_flops=model_flops,
      collectives=collectives_lib.collective_traffic(hlo, num_slices),
      kernels=count_kernels(hlo),
      advice=device_memory.advice(config, state_bytes, hbm, dict(setup.mesh.shape)),
      peak=peak,
  )


def shard_bytes(abstract_tree, shardings) -> int:
  """Bytes of the largest device's shard of every leaf, added up."""
  total = 0
  for leaf, sharding in zip(jax.tree.leaves(abstract_tree), jax.tree.leaves(shardings)):
    shape = sharding.shard_shape(leaf.shape)
    total += math.prod(shape) * leaf.dtype.itemsize
  return total


DoesNotFitError = device_memory.DoesNotFitError


def require_fit(report: Report) -> None:
  if report.fits:
    return
  needs = f"the train step needs {report.total_bytes / GIB:.2f} GiB per device"
  hbm = f"a {report.device_kind} has {report.hbm_bytes / GIB:.0f} GiB"
  if report.total_bytes <= report.hbm_bytes:
    needs += (
        f": {hbm}, but {report.hbm_headroom:.0%} of it is kept free (--config.hbm_headroom) for "
        f"XLA's runtime and fragmentation, leaving {report.usable_bytes / GIB:.2f} GiB"
    )
  else:
    needs += f" but {hbm}"
  raise DoesNotFitError(f"{needs}; try " + "; or ".join(report.advice) + ".")
