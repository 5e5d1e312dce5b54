"""Draws a grid of synthetic_shapes training examples, one row per class, enlarged (no TFDS).

python scripts/plot_synthetic_shapes.py docs/images/synthetic_shapes.png [--per_class 6]
"""

import argparse

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt

from vit_jax.data.image import shape_drawing
from vit_jax.data.image import shapes


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("output", help="PNG path")
  parser.add_argument("--per_class", type=int, default=6)
  args = parser.parse_args()
  rows, cols = shape_drawing.NUM_CLASSES, args.per_class
  fig, axes = plt.subplots(rows, cols, figsize=(cols * 1.0 + 1.4, rows * 1.0), squeeze=False)
  for label, name in enumerate(shape_drawing.CLASS_NAMES):
    for j in range(cols):
      # Training examples label, label + 10, ...: the first `cols` of this class.
      image = shape_drawing.draw(shapes.SPLIT_SEEDS["train"], label + j * shape_drawing.NUM_CLASSES)
      ax = axes[label, j]
      ax.imshow(image, interpolation="nearest")
      ax.set_xticks([])
      ax.set_yticks([])
    axes[label, 0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=10)
  fig.suptitle("synthetic_shapes (train split, 32x32 px)", fontsize=11)
  fig.tight_layout()
  fig.savefig(args.output, dpi=80)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  main()
