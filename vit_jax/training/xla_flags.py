"""XLA flags the trainer sets for CPU runs, in one place (read when the backend starts).

`--xla_cpu_experimental_ynn_fusion_type=-individual_dot,-individual_convolution`: XLA:CPU by
default hands each lone dot and convolution to the YNNPACK library; at the widths of our small
models (192-384) its own emitted loops are faster for those. `python -m benchmarks.flag_ab` on 2
cores: ViT-Ti/16 and ViT-S/16 steps 1.25x and 1.35x, BERT 1.22x, the GPTs 0.95-0.99x, a lone
4096^2 matmul 0.60x (benchmarks/README.md). The flag is a CPU-backend option, so GPU and TPU runs
ignore it. A value the user already put in XLA_FLAGS wins.
"""

import os

CPU_FLAGS = {
    "--xla_cpu_experimental_ynn_fusion_type": "-individual_dot,-individual_convolution",
}


def set_cpu_defaults() -> None:
  """Appends each default to XLA_FLAGS unless the user set that flag; call before jax starts."""
  current = os.environ.get("XLA_FLAGS", "")
  extra = [f"{flag}={value}" for flag, value in CPU_FLAGS.items() if flag not in current]
  if extra:
    os.environ["XLA_FLAGS"] = " ".join([current, *extra]).strip()
