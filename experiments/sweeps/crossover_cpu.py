"""The ViT-vs-ResNet data-size crossover on `synthetic_shapes`: a BiT ResNet-v2 of about the same
training compute as the largest ViT of experiments/sweeps/vit_shapes_cpu.py, on the same five
training-set sizes (1/16 .. all of the 50k, 16x) with the same training recipe.

  python -m vit_jax.sweep all experiments/sweeps/crossover_cpu.py --root=workdirs/crossover \
      --out=experiments/results/crossover_cpu
  python -m experiments.crossover --vit=experiments/results/vit_shapes_cpu \
      --resnet=experiments/results/crossover_cpu --out=experiments/results/crossover_cpu

The ResNet: three stages of one bottleneck unit, width 32 (8 GroupNorm groups), BiT's 7x7/2 root
and max pool: 12.4 MFLOPs forward per 32-px image and 0.50 M parameters, against the ViT-w96d4's
11.1 MFLOPs and 0.32 M. The second command plots test accuracy vs training-set size for both
(the ViT's runs come from the scaling sweep, run with identical settings). Results:
experiments/results/crossover_cpu/README.md.
"""

import ml_collections

from vit_jax.config import args
from vit_jax.sweep import spec

RESNET = {
    "model.block_counts": (1, 1, 1),
    "model.width": 32,
    "model.num_groups": 8,
    "model.stem": "imagenet",
}


def get_sweep():
  scaling = args.load_beside(__file__, "vit_shapes_cpu.py")
  return ml_collections.ConfigDict(
      dict(
          config="configs/resnet.py:dataset=synthetic_shapes",
          fixed={**scaling.SHAPES_TRAINING, **RESNET},
          grid={"train_split": [spec.train_slice(f) for f in scaling.ALL_FRACTIONS]},
          name="resnet-w32-{train_split}",
          metric="error",
          fits=("data",),
      ),
      allow_dotted_keys=True,
  )
