"""Cloud TPU chips' published figures, one row per generation with its source page: peak bf16
FLOP/s, HBM capacity and bandwidth, and what one chip can send per second over the chip
interconnect (ICI) and the data-center network (DCN). `vit_jax.compile` bounds a step's time with
them (tpu_planning/aot.py); the trainer's MFU divides by the peak (training/flops.py).

The pages give ICI bandwidth in both directions together; a chip sends at half of it. Where a
page gives only a pod-wide figure, the row divides it by the pod's chips, as its comment says.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Chip:
  generation: str  # as in slice names: v5p-64
  device_kind: str  # as JAX names its devices
  bf16_flops: float  # peak FLOP/s
  hbm_gib: int
  hbm_bandwidth: float  # bytes/s
  ici_send: float  # bytes/s one chip sends over ICI, all its links together
  dcn_send: float | None  # bytes/s one chip sends to other slices; None: not published
  source: str


TPUS = (
    Chip(  # "Peak compute per chip 275 teraflops (bf16 or int8)", "HBM2 capacity and bandwidth
        # 32 GiB, 1200 GBps". No per-chip ICI figure: "All-reduce bandwidth per Pod 1.1 PB/s"
        # over the pod's 4096 chips (on v5e and v6e that quotient is half the per-chip
        # bidirectional figure). No DCN figure.
        generation="v4",
        device_kind="TPU v4",
        bf16_flops=275e12,
        hbm_gib=32,
        hbm_bandwidth=1200e9,
        ici_send=1.1e15 / 4096,
        dcn_send=None,
        source="https://cloud.google.com/tpu/docs/v4",
    ),
    Chip(  # 197 TFLOPs bf16, "HBM2 capacity and bandwidth 16 GB, 819 GBps", "Bidirectional
        # inter-chip interconnect (ICI) bandwidth (per chip) 400 GBps", "Data center network
        # bandwidth per Pod 6.4 Tbps" over its 256 chips (25 Gbps each).
        generation="v5e",
        device_kind="TPU v5 lite",
        bf16_flops=197e12,
        hbm_gib=16,
        hbm_bandwidth=819e9,
        ici_send=400e9 / 2,
        dcn_send=6.4e12 / 8 / 256,
        source="https://cloud.google.com/tpu/docs/v5e",
    ),
    Chip(  # 459 TFLOPs bf16, HBM 95 GiB at 2765 GBps, bidirectional ICI 1200 GBps per chip,
        # "Data center network (DCN) bandwidth per chip (Gbps) 50".
        generation="v5p",
        device_kind="TPU v5",
        bf16_flops=459e12,
        hbm_gib=95,
        hbm_bandwidth=2765e9,
        ici_send=1200e9 / 2,
        dcn_send=50e9 / 8,
        source="https://cloud.google.com/tpu/docs/v5p",
    ),
    Chip(  # 918 TFLOPs bf16, HBM 32 GB at 1640 GBps, ICI 3200 Gbps (400 GBps) each way per
        # chip, "Data center network bandwidth per Pod 25.6 Tbps" over its 256 chips (100 Gbps).
        generation="v6e",
        device_kind="TPU v6 lite",
        bf16_flops=918e12,
        hbm_gib=32,
        hbm_bandwidth=1640e9,
        ici_send=3200e9 / 8,
        dcn_send=25.6e12 / 8 / 256,
        source="https://cloud.google.com/tpu/docs/v6e",
    ),
)
BY_GENERATION = {chip.generation: chip for chip in TPUS}
# Dense bf16 peak FLOP/s per GPU, by a substring of its device_kind; the first match wins, so
# more specific names come first.
GPU_PEAK_BF16 = (
    ("H100 PCIe", 756e12),
    ("H100", 989e12),
    ("H200", 989e12),
    ("A100", 312e12),
)
# Other device_kind spellings of the same chips, seen across libtpu versions.
_ALIASES = {"TPU v5e": "v5e", "TPU v5p": "v5p", "TPU v6e": "v6e"}


def by_device_kind(device_kind: str) -> Chip | None:
  """The chip a JAX device_kind names (e.g. "TPU v5 lite" is a v5e); None for other devices."""
  for chip in sorted(TPUS, key=lambda c: -len(c.device_kind)):  # "TPU v5 lite" before "TPU v5"
    if device_kind == chip.device_kind or device_kind.startswith(chip.device_kind + " "):
      return chip
  for spelling, generation in _ALIASES.items():
    if device_kind == spelling or device_kind.startswith(spelling + " "):
      return BY_GENERATION[generation]
  return None


def peak_bf16(device_kind: str) -> tuple[float, str] | None:
  """(dense bf16 peak FLOP/s, its source) of a TPU or GPU device_kind; None if not listed."""
  chip = by_device_kind(device_kind)
  if chip:
    return chip.bf16_flops, f"{device_kind} dense bf16 spec ({chip.source})"
  for name, peak in GPU_PEAK_BF16:
    if name in device_kind:
      return peak, f"{device_kind} dense bf16 spec"
  return None
