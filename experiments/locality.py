"""Why attention: can a model tell whether two marks d px apart have the same colour? A CNN with a
7-px receptive field against a ViT of the same compute, test accuracy against d.

  python -m experiments.locality --root=workdirs/locality --out=experiments/results/locality_cpu

Trains both runs of experiments/sweeps/locality_cpu.py on `marks_pair` (built on first use) with
`vit_jax.sweep`'s runner, each an ordinary `python -m vit_jax.main` in ROOT/RUN_NAME (finished
runs are skipped, interrupted ones resume), then writes to --out:

  locality.csv   one row per model and distance: test examples, correct, accuracy and its 95%
                 Wilson interval
  locality.json  the same per model, with parameters, forward FLOPs per image, steps, wall time,
                 the CNN's receptive field, the bounds, and a sentence stating the result
  locality.png   accuracy (%) against d for both models, with those intervals
  runs.csv, evals.csv   the sweep's own tables (vit_jax/sweep/collect.py)

Bad input (an unknown flag, a missing --root or --out, an --out that is a file, a --root that
holds other runs) is one `error:` line and exit code 2, before anything is trained or written.
"""

import argparse
import json
import math
import os
import re
import sys
import textwrap

from vit_jax import errors
from vit_jax import startup
from vit_jax.sweep import checks
from vit_jax.sweep import collect as collect_lib
from vit_jax.sweep import runner
from vit_jax.sweep import spec

SWEEP_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweeps", "locality_cpu.py")
CSV, JSON, PNG = "locality.csv", "locality.json", "locality.png"
CSV_COLUMNS = ["run", "model", "distance", "examples", "correct", "accuracy", "low", "high"]
Z_95 = 1.959964  # two-sided 95% normal quantile
_DISTANCE_METRIC = re.compile(r"d(\d+)/accuracy")


class _Parser(argparse.ArgumentParser):
  """argparse, but a bad command line is one `error:` line (a ConfigError), not usage + error."""

  def error(self, message):
    raise errors.ConfigError(
        f"{message}; usage: python -m experiments.locality --root=DIR --out=DIR"
    )


def parse_args(argv):
  parser = _Parser(prog="python -m experiments.locality", description=__doc__.splitlines()[0])
  parser.add_argument("--root", required=True, help="folder holding one workdir per run")
  parser.add_argument("--out", required=True, help="where the CSVs, JSON and PNG go")
  args = parser.parse_args(argv)
  if os.path.exists(args.out) and not os.path.isdir(args.out):
    raise errors.ConfigError(f"--out={args.out} is a file; name a folder.")
  return args


def wilson(correct: int, examples: int, z: float = Z_95) -> tuple[float, float]:
  """The Wilson score interval of a binomial proportion (good near 0 and 1, unlike p +- 2 SE)."""
  p, n = correct / examples, examples
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  return max(0.0, centre - half), min(1.0, centre + half)


def accuracy_by_distance(records: list[dict]) -> dict[int, dict]:
  """{d: {examples, correct, accuracy, low, high}} from the last record that has the per-distance
  evaluators' metrics (`dNN/accuracy`, `dNN/examples`)."""
  last = next((r for r in reversed(records) if any(map(_DISTANCE_METRIC.fullmatch, r))), {})
  result = {}
  for key, accuracy in last.items():
    match = _DISTANCE_METRIC.fullmatch(key)
    if not match:
      continue
    examples = int(last[f"d{match.group(1)}/examples"])
    correct = round(accuracy * examples)
    low, high = wilson(correct, examples)
    result[int(match.group(1))] = dict(
        examples=examples, correct=correct, accuracy=correct / examples, low=low, high=high
    )
  return dict(sorted(result.items()))


def summarize(runs: list[dict], root: str) -> dict:
  """The per-model results and the bounds, from collect's run rows and each run's metrics."""
  # pylint: disable-next=g-import-not-at-top  (TFDS and Flax load only once runs are done)
  from vit_jax.data.image import marks_pair
  from vit_jax.models import local_cnn  # pylint: disable=g-import-not-at-top

  models = {}
  for row in runs:
    if row.get("status") != "finished":
      raise errors.DataError(f"run {row['run']} under {root} did not finish; rerun the command.")
    entry = {
        "model": row["model_name"],
        "label": row["model"],
        "params": row["params"],
        "forward_mflops_per_image": row["flops"] / row["examples_seen"] / 3 / 1e6,
        "steps": row["steps_done"],
        "batch_size": row["batch_size"],
        "lr": row["lr"],
        "wall_s": row["wall_s"],
    }
    if row["model_name"] == "local_cnn":
      field = local_cnn.receptive_field(row["depth"])
      entry.update(
          receptive_field=field,
          # A field-wide window holds whole marks up to d = field - mark, a pixel of each up to
          # d = field + mark - 2; beyond that the CNN's score is a sum of per-mark terms.
          both_marks_whole_up_to=field - marks_pair.MARK_SIZE,
          a_pixel_of_both_up_to=field + marks_pair.MARK_SIZE - 2,
      )
    entry["accuracy"] = accuracy_by_distance(runner.read_metrics(os.path.join(root, row["run"])))
    models[row["run"]] = entry
  result = {
      "dataset": marks_pair.NAME,
      "image_size": marks_pair.IMAGE_SIZE,
      "mark_size": marks_pair.MARK_SIZE,
      "colours": marks_pair.NUM_COLOURS,
      "chance": 0.5,
      "additive_bound": marks_pair.ADDITIVE_BOUND,
      "symmetric_additive_bound": marks_pair.SYMMETRIC_BOUND,
      "models": models,
  }
  result["finding"] = finding(result)
  return result


def _cnn_and_vit(result: dict) -> tuple[dict, dict]:
  by_model = {m["model"]: m for m in result["models"].values()}
  return by_model["local_cnn"], by_model["vit"]


def finding(result: dict) -> str:
  """One sentence of what the numbers show, with the CNN's worst inside and best outside its
  field and the ViT's worst anywhere."""
  cnn, vit = _cnn_and_vit(result)
  limit = cnn["a_pixel_of_both_up_to"]
  inside = {d: a for d, a in cnn["accuracy"].items() if d <= cnn["both_marks_whole_up_to"]}
  outside = {d: a for d, a in cnn["accuracy"].items() if d > limit}

  def pct(a):
    return f"{100 * a['accuracy']:.1f}% [{100 * a['low']:.1f}, {100 * a['high']:.1f}]"

  worst_in = min(inside.items(), key=lambda kv: kv[1]["accuracy"])
  best_out = max(outside.items(), key=lambda kv: kv[1]["accuracy"])
  worst_vit = min(vit["accuracy"].items(), key=lambda kv: kv[1]["accuracy"])
  return (
      f"The CNN ({cnn['receptive_field']}-px receptive field) compares the marks only while one "
      f"window holds both: at least {pct(worst_in[1])} up to d = {max(inside)} (worst at d = "
      f"{worst_in[0]}), at most {pct(best_out[1])} beyond d = {limit} (best at d = "
      f"{best_out[0]}), where no rule summing one term per mark can pass "
      f"{100 * result['additive_bound']:.0f}%; the ViT is at least {pct(worst_vit[1])} at "
      f"every distance (worst at d = {worst_vit[0]})."
  )


def caption(result: dict) -> str:
  """The figure's sentence: the CNN's range inside and beyond its field, the ViT's range (works
  on the JSON's string keys too)."""
  cnn, vit = _cnn_and_vit(result)
  whole, limit = cnn["both_marks_whole_up_to"], cnn["a_pixel_of_both_up_to"]

  def span(model, keep):
    values = [100 * a["accuracy"] for d, a in model["accuracy"].items() if keep(int(d))]
    low, high = f"{min(values):.0f}", f"{max(values):.0f}"
    return f"{low}%" if low == high else f"{low}-{high}%"

  inside, beyond = span(cnn, lambda d: d <= whole), span(cnn, lambda d: d > limit)
  return (
      f"The CNN compares the marks while one of its windows holds both (d <= {whole}: {inside}) "
      f"and falls to {beyond} once none holds a pixel of each (d > {limit}), chance being 50%; "
      f"the ViT, whose every token attends to every other, is at {span(vit, lambda d: True)} at "
      "every distance."
  )


def write_csv(result: dict, path: str) -> None:
  rows = [
      {"run": run, "model": m["model"], "distance": d, **a}
      for run, m in result["models"].items()
      for d, a in m["accuracy"].items()
  ]
  collect_lib.write_csv(path, CSV_COLUMNS, rows)


def plot(result: dict, path: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top  (matplotlib only where a plot is made)

  matplotlib.use("Agg")  # files only, no display
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  cnn, vit = _cnn_and_vit(result)
  limit = cnn["a_pixel_of_both_up_to"]
  fig, ax = plt.subplots(figsize=(8, 5))
  distances = sorted(set(cnn["accuracy"]) | set(vit["accuracy"]))
  ax.axvspan(limit + 0.5, max(distances) + 1, color="0.92", zorder=0)
  ax.text(
      limit + 0.8,
      103,
      f"no {cnn['receptive_field']}x{cnn['receptive_field']} CNN window holds a pixel of both "
      "marks",
      fontsize=8,
      va="bottom",
  )
  ax.axhline(100 * result["chance"], color="0.4", ls=":", lw=1, label="chance (50%)")
  ax.axhline(
      100 * result["additive_bound"],
      color="C3",
      ls="--",
      lw=1,
      label="best any sum of one term per mark can do (75%)",
  )
  for model, colour, marker in ((vit, "C0", "o"), (cnn, "C1", "s")):
    ds = sorted(model["accuracy"])
    acc = [100 * model["accuracy"][d]["accuracy"] for d in ds]
    low = [a - 100 * model["accuracy"][d]["low"] for a, d in zip(acc, ds)]
    high = [100 * model["accuracy"][d]["high"] - a for a, d in zip(acc, ds)]
    name = "ViT, 4x4 patches" if model is vit else f"CNN, {cnn['receptive_field']}-px field"
    label = (
        f"{name} ({model['params'] / 1e3:.0f}k params, "
        f"{model['forward_mflops_per_image']:.1f} MFLOPs/img)"
    )
    ax.errorbar(ds, acc, yerr=[low, high], fmt=f"{marker}-", color=colour, capsize=3, label=label)
  ax.set_xlim(min(distances) - 1, max(distances) + 1)
  ax.set_ylim(35, 108)
  ax.set_xticks(distances)
  ax.set_xlabel("distance between the two marks d (px, Chebyshev)")
  ax.set_ylabel("test accuracy (%), 95% intervals")
  examples = cnn["accuracy"][distances[0]]["examples"]
  ax.set_title(
      f"Same colour or not? Two 3x3 marks d px apart ({result['dataset']}, "
      f"{result['image_size']} px, {examples:,} test images per d)",
      fontsize=10,
  )
  ax.grid(True, alpha=0.3)
  ax.legend(fontsize=8, loc="center right", bbox_to_anchor=(1.0, 0.38))
  fig.text(0.01, 0.01, textwrap.fill(caption(result), 125), fontsize=7.5, va="bottom")
  fig.tight_layout(rect=(0, 0.07, 1, 1))
  fig.savefig(path, dpi=110)
  plt.close(fig)


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  sweep = spec.load(SWEEP_FILE)
  configs = checks.check_all(sweep)  # every run's config, before anything starts
  if runner.run_all(sweep, configs, args.root):
    return 1  # the runner has named the failed runs; rerunning resumes them
  runs, _ = collect_lib.collect(sweep, args.root, args.out)
  result = summarize(runs, args.root)
  write_csv(result, os.path.join(args.out, CSV))
  with open(os.path.join(args.out, JSON), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
  plot(result, os.path.join(args.out, PNG))
  print(f"locality: wrote {CSV}, {JSON} and {PNG} to {args.out}")
  print(result["finding"])
  return 0


def run() -> None:
  startup.quiet_startup()  # before the config checks load JAX; the runs inherit the setting
  with errors.exit_on_user_error():
    code = main()
  sys.exit(code)


if __name__ == "__main__":
  run()
