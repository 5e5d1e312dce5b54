"""XLA flags the trainer sets for CPU runs, in one place (read when the backend starts).

`--xla_cpu_experimental_ynn_fusion_type=-individual_dot,-individual_convolution`: XLA:CPU by
default hands each lone dot and convolution to the YNNPACK library; at the widths of our small
models (192-384) its own emitted loops are faster for those. `python -m benchmarks.flag_ab` on 2
cores: ViT-Ti/16 and ViT-S/16 steps 1.25x and 1.35x, BERT 1.22x, the GPTs 0.95-0.99x, a lone
4096^2 matmul 0.60x (benchmarks/README.md). The flag is a CPU-backend option: runs on GPU or TPU
never get it. A value the user already put in XLA_FLAGS wins.
"""

import importlib.util
import os

CPU_FLAGS = {
    "--xla_cpu_experimental_ynn_fusion_type": "-individual_dot,-individual_convolution",
}


def runs_on_cpu() -> bool:
  """Whether JAX will pick the CPU: JAX_PLATFORMS says so, or no accelerator plugin (libtpu,
  CUDA, ROCm) is installed. Decided before the backend starts, so nothing of JAX is imported."""
  platforms = os.environ.get("JAX_PLATFORMS", "")
  if platforms:
    return platforms.split(",")[0].strip() == "cpu"
  plugins = ("libtpu", "jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm7_plugin")
  return not any(importlib.util.find_spec(name) for name in plugins)


def set_cpu_defaults() -> None:
  """Appends each default to XLA_FLAGS unless the user set that flag, on CPU only; call before
  jax starts."""
  if not runs_on_cpu():
    return
  current = os.environ.get("XLA_FLAGS", "")
  extra = [f"{flag}={value}" for flag, value in CPU_FLAGS.items() if flag not in current]
  if extra:
    os.environ["XLA_FLAGS"] = " ".join([current, *extra]).strip()
