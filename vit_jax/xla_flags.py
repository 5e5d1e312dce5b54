"""XLA flags the trainer sets for CPU runs, in one place (read when the backend starts).

`--xla_cpu_experimental_ynn_fusion_type=-individual_dot,-individual_convolution`: XLA:CPU by
default hands each lone dot and convolution to the YNNPACK library; for the small GEMMs of
ViT-Ti/S and small GPTs (width 192-384) its own emitted loops with fusion are faster (about 1.2x
on a ViT-Ti/16 train step on 2 cores, issue 13; 2x in a loaded-machine check). The flag is a
CPU-backend option, so GPU and TPU runs ignore it. A value the user already put in XLA_FLAGS wins.
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
