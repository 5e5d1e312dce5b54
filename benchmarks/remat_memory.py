"""Peak train-step memory of ViT-S/16 with each remat policy (XLA's plan; nothing is run).

  python benchmarks/remat_memory.py [--batch_size 64]

Prints the temporaries (activations kept for the backward pass) per policy, with and without
scanned layers, and the ratio to the plain model. Figures in the README come from this command
on the CPU backend.
"""

import argparse

from vit_jax import memory
from vit_jax.models import transformer


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--batch_size", type=int, default=64)
  parser.add_argument("--variant", default="S/16")
  args = parser.parse_args()
  base = None
  print(f"ViT-{args.variant}, batch {args.batch_size}, 224 px: train-step temporaries")
  for scan in (False, True):
    for policy in transformer.REMAT_POLICIES:
      config = {"name": "vit", "variant": args.variant, "num_classes": 1000, "remat": policy,
                "scan_layers": scan}
      temp = memory.train_step_temp_bytes(config, args.batch_size)
      base = base or temp
      print(f"  scan_layers={scan!s:<5} remat={policy:<14} {temp / 2**20:9.1f} MiB"
            f"   x{temp / base:.2f}", flush=True)


if __name__ == "__main__":
  main()
