"""Plots the ViT-vs-ResNet data-size crossover: final test accuracy vs training-set size.

  python -m experiments.crossover --vit=experiments/results/vit_shapes_cpu \
      --resnet=experiments/results/crossover_cpu --out=experiments/results/crossover_cpu

Reads the `runs.csv` that `python -m vit_jax.sweep collect` wrote for each sweep: the ViT side is
the largest ViT of the scaling sweep, the ResNet side every run of the crossover sweep. Writes
crossover.png and crossover.json (accuracy per training-set size per model, and where, if
anywhere, the ViT overtakes the ResNet).
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
# pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.pyplot as plt

from vit_jax.sweep import collect


def curve(rows: list[dict]) -> dict:
  """{train_examples: final accuracy} of finished runs, and the model's label."""
  done = [r for r in rows if r["status"] == "finished" and r.get("final_error") is not None]
  points = {r["train_examples"]: 1.0 - r["final_error"] for r in done}
  first = done[0]
  flops = first["flops"] / first["examples_seen"] / 3  # forward FLOPs per example
  label = f"{first['model']} ({first['params'] / 1e6:.2f}M params, {flops / 1e6:.1f} MFLOPs/img)"
  return {"label": label, "accuracy": dict(sorted(points.items()))}


def crossover(vit: dict, resnet: dict) -> int | None:
  """The smallest training-set size from which the ViT is at least as accurate at every size."""
  sizes = sorted(set(vit["accuracy"]) & set(resnet["accuracy"]))
  for i, size in enumerate(sizes):
    if all(vit["accuracy"][s] >= resnet["accuracy"][s] for s in sizes[i:]):
      return size
  return None


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--vit", required=True, help="out dir of the ViT scaling sweep")
  parser.add_argument("--resnet", required=True, help="out dir of the crossover sweep")
  parser.add_argument("--out", required=True)
  args = parser.parse_args(argv)
  paths = [os.path.join(d, collect.RUNS_CSV) for d in (args.vit, args.resnet)]
  for path in paths:
    if not os.path.isfile(path):
      print(f"error: {path} not found; run `python -m vit_jax.sweep all` first.", file=sys.stderr)
      return 2
  vit_rows, resnet_rows = (collect.read_csv(p) for p in paths)
  largest = max(r["params"] for r in vit_rows if r.get("params"))
  vit = curve([r for r in vit_rows if r.get("params") == largest])
  resnet = curve(resnet_rows)
  if len(vit["accuracy"]) < 2 or len(resnet["accuracy"]) < 2:
    print("error: need at least two finished runs per model to draw a curve.", file=sys.stderr)
    return 2

  fig, ax = plt.subplots(figsize=(7.5, 4.8))
  for model, style in ((vit, "o-"), (resnet, "s--")):
    sizes = list(model["accuracy"])
    ax.plot(sizes, [100 * a for a in model["accuracy"].values()], style, label=model["label"])
  ax.set_xscale("log", base=2)
  ax.set_xlabel("training-set size (examples, log scale)")
  ax.set_ylabel("test accuracy (%)")
  ax.set_title("ViT vs ResNet on synthetic_shapes, same steps and batch")
  ax.grid(True, which="both", alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  os.makedirs(args.out, exist_ok=True)
  png = os.path.join(args.out, "crossover.png")
  fig.savefig(png, dpi=110)
  result = {"vit": vit, "resnet": resnet, "vit_at_least_as_good_from": crossover(vit, resnet)}
  with open(os.path.join(args.out, "crossover.json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
  start = result["vit_at_least_as_good_from"]
  found = "no crossover" if start is None else f"ViT at least as accurate from {start} examples on"
  print(f"wrote {png}; {found}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
