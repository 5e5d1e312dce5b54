"""The sweep's PNGs: error vs compute (one colour per model size, the frontier and its fit, the
joint fit's compute-optimal loss), error vs training-set size per model size, error vs model size
(log-log), and the IsoFLOP profiles with the optimal model size per budget."""

import math

import matplotlib

matplotlib.use("Agg")  # files only, no display
# pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np

from vit_jax import storage
from vit_jax.sweep import fits as fits_lib
from vit_jax.sweep import joint

_DPI = 110


def _groups(rows: list[dict]) -> list[tuple[str, list[dict]]]:
  """Rows by model, smallest model first, each label with its parameter count."""
  by_model = {}
  for row in rows:
    by_model.setdefault(row["model"], []).append(row)
  ordered = sorted(by_model.items(), key=lambda kv: (kv[1][0].get("params") or 0, kv[0]))
  labelled = []
  for model, members in ordered:
    params = members[0].get("params")
    labelled.append((f"{model} ({params / 1e6:.3g}M params)" if params else model, members))
  return labelled


def _colours(count: int):
  return plt.get_cmap("viridis")(np.linspace(0.05, 0.85, max(count, 1)))


def _fit_line(ax, entry: dict | None, x_values):
  if not entry:
    return
  low, high = entry["ci95"]["b"]
  x, y = fits_lib.curve(entry, min(x_values) / 1.5, max(x_values) * 1.5)
  label = (
      f"fit: {entry['formula']}\nexponent b = {entry['constants']['b']:.3g} [{low:.3g}, {high:.3g}]"
  )
  ax.plot(x, y, "k--", linewidth=1.3, label=label)


def _joint_line(ax, entry: dict | None, x_values):
  """The joint fit's loss at the compute-optimal N*(C), D*(C)."""
  if not entry:
    return
  compute, loss = fits_lib.joint_curve(entry, min(x_values) / 1.5, max(x_values) * 1.5)
  opt = entry["optimal"]
  low, high = opt["ci95"]["a"]
  label = (
      f"joint fit at the compute-optimal size: L(N*(C), D*(C))\n{entry['formula']}\n"
      f"N*(C) ~ C^a, a = {opt['a']:.3g} [{low:.3g}, {high:.3g}]"
  )
  ax.plot(compute, loss, "-", color="tab:red", linewidth=1.6, label=label)


def _finish(ax, fig, x_label: str, y_label: str, title: str, path: str) -> str:
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel(x_label)
  ax.set_ylabel(y_label)
  ax.set_title(title, fontsize=10)
  ax.grid(True, which="both", alpha=0.25)
  low, high = ax.get_ylim()
  if high < 10 * low:  # under a decade, log ticks leave the axis nearly bare: use round values
    ticks = matplotlib.ticker.MaxNLocator(nbins=8).tick_values(low, high)
    ax.set_yticks([t for t in ticks if low <= t <= high and t > 0])
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
  low, high = ax.get_xlim()
  if high < 100 * low:  # two decades or less: label 2x and 5x only (all minor labels collide)
    ax.xaxis.set_minor_formatter(
        matplotlib.ticker.FuncFormatter(
            lambda v, _: f"{v:g}" if round(v / 10 ** math.floor(math.log10(v))) in (2, 5) else ""
        )
    )
  decimals = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.3g}")
  ax.yaxis.set_major_formatter(decimals)  # errors read better as 0.2 than as 2 x 10^-1
  ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
  _save(fig, path)
  return path


def compute_plot(evals, metric: str, fit: dict | None, path: str, title: str) -> str | None:
  rows = [r for r in evals if r.get(metric) is not None and r.get("flops")]
  if not rows:
    return None
  fig, ax = plt.subplots(figsize=(7.5, 5))
  groups = _groups(rows)
  for (label, members), colour in zip(groups, _colours(len(groups))):
    for i, run in enumerate(sorted({r["run"] for r in members})):
      points = sorted((r for r in members if r["run"] == run), key=lambda r: r["step"])
      x, y = [r["flops"] for r in points], [r[metric] for r in points]
      ax.plot(x, y, "-", color=colour, alpha=0.35, linewidth=1)
      ax.plot(x, y, ".", color=colour, markersize=4, label=label if i == 0 else None)
      ends = [r for r in points if r["final"]]
      ax.plot([r["flops"] for r in ends], [r[metric] for r in ends], "o", color=colour, ms=6)
  entry = (fit or {}).get("fits", {}).get("compute")
  frontier = entry["points"] if entry else []
  if frontier:
    ax.plot(
        [p["x"] for p in frontier],
        [p["y"] for p in frontier],
        "o",
        mfc="none",
        mec="black",
        ms=9,
        label="frontier (points fitted)",
    )
  _fit_line(ax, entry, [r["flops"] for r in rows])
  _joint_line(ax, (fit or {}).get("fits", {}).get("joint"), [r["flops"] for r in rows])
  label = fits_lib.METRIC_LABELS[metric]
  x_label = "training compute (FLOPs = 3 x forward FLOPs per example x examples seen)"
  return _finish(ax, fig, x_label, label, title + " (large dots: end of run)", path)


def axis_plot(evals, metric: str, axis: str, fit: dict | None, path: str, title: str):
  """Best final error vs `axis` ("data" or "params"), one line per model (data) or one line."""
  column, _, _, x_label = fits_lib.AXES[axis]
  finals = [r for r in evals if r["final"] and r.get(metric) is not None and r.get(column)]
  if len({r[column] for r in finals}) < 2:
    return None
  if axis == "data":
    groups = _groups(finals)
  else:  # model size on the largest training set (or all runs when sizes are unknown)
    largest = max((r.get("train_examples") or 0) for r in finals)
    chosen = [r for r in finals if (r.get("train_examples") or 0) == largest]
    if len({r[column] for r in chosen}) < 2:  # one model on the largest set: no line to draw
      return None
    groups = [("best run per model size", chosen)]
  fig, ax = plt.subplots(figsize=(7.5, 5))
  for (label, members), colour in zip(groups, _colours(len(groups))):
    best = {}
    for r in members:
      if r[column] not in best or r[metric] < best[r[column]]:
        best[r[column]] = r[metric]
    x = sorted(best)
    ax.plot(x, [best[v] for v in x], "o-", color=colour, label=label)
  _fit_line(ax, (fit or {}).get("fits", {}).get(axis), [r[column] for r in finals])
  return _finish(ax, fig, x_label, fits_lib.METRIC_LABELS[metric], title, path)


def isoflop_plot(fit: dict | None, metric: str, path: str, title: str) -> str | None:
  """Left: final loss vs N per budget, its parabola and minimum. Right: N_opt vs C, the isoflop
  power law and, if fitted, the joint fit's N*(C)."""
  entry = (fit or {}).get("fits", {}).get("isoflop")
  if not entry:
    return None
  fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
  budgets = entry["budgets"]
  for b, colour in zip(budgets, _colours(len(budgets))):
    n = np.array([p["N"] for p in b["points"]])
    left.plot(
        n,
        [p["y"] for p in b["points"]],
        "o",
        color=colour,
        label=f"C = {b['budget_flops']:.3g} FLOPs",
    )
    x = np.linspace(np.log10(n.min()) - 0.1, np.log10(n.max()) + 0.1, 100)
    left.plot(10**x, np.polynomial.polynomial.polyval(x, b["parabola"]), "-", color=colour, lw=1)
    low, high = b["N_opt_ci95"]
    left.errorbar(
        b["N_opt"],
        b["loss_opt"],
        xerr=[[max(0.0, b["N_opt"] - low)], [max(0.0, high - b["N_opt"])]],
        fmt="*",
        color=colour,
        mec="black",
        ms=13,
        capsize=3,
    )
  left.plot(
      [],
      [],
      "k*",
      ms=10,
      label="parabola minimum N_opt\n(bar: 95% bootstrap interval,\nclipped at the axes)",
  )
  left.set_xscale("log")
  sizes = [p["N"] for b in budgets for p in b["points"]]
  size_range = (min(sizes) / 3, max(sizes) * 3)  # an interval's far end may leave the plot
  left.set_xlim(*size_range)
  left.set_xlabel("model size N (parameters)")
  left.set_ylabel(fits_lib.METRIC_LABELS[metric])
  left.set_title(f"{title}: IsoFLOP profiles (final evals)", fontsize=10)
  left.grid(True, which="both", alpha=0.25)
  left.legend(fontsize=7)

  compute = np.array([b["budget_flops"] for b in budgets])
  n_opt = np.array([b["N_opt"] for b in budgets])
  errors_2xB = np.array(
      [
          [max(0.0, o - b["N_opt_ci95"][0]), max(0.0, b["N_opt_ci95"][1] - o)]
          for o, b in zip(n_opt, budgets)
      ]
  ).T
  right.errorbar(
      compute,
      n_opt,
      yerr=errors_2xB,
      fmt="o",
      color="black",
      capsize=3,
      label="N_opt per budget (isoflop; bar: 95% bootstrap interval)",
  )
  c_line = np.logspace(np.log10(compute.min() / 2), np.log10(compute.max() * 2), 50)
  low, high = entry["ci95"]["a"]
  right.plot(
      c_line,
      entry["G"] * c_line ** entry["a"],
      "k--",
      lw=1.2,
      label=f"isoflop: N_opt = {entry['G']:.3g} C^{entry['a']:.3g}, a in [{low:.3g}, {high:.3g}]",
  )
  joint_entry = fit["fits"].get("joint")
  if joint_entry:
    opt, c = joint_entry["optimal"], joint_entry["constants"]
    n_star, _ = joint.optimal_size(
        c_line, joint_entry["k_flops_per_param_example"], c["A"], c["B"], c["alpha"], c["beta"]
    )
    low, high = opt["ci95"]["a"]
    right.plot(
        c_line,
        n_star,
        "-",
        color="tab:red",
        lw=1.4,
        label=f"joint fit: N*(C) = G (C/k)^a, a = {opt['a']:.3g} [{low:.3g}, {high:.3g}]",
    )
  right.set_xscale("log")
  right.set_yscale("log")
  right.set_ylim(*size_range)
  right.set_xlabel("training compute C (FLOPs)")
  right.set_ylabel("compute-optimal model size (parameters)")
  right.set_title("optimal model size vs compute", fontsize=10)
  right.grid(True, which="both", alpha=0.25)
  right.legend(fontsize=7)
  fig.tight_layout()
  _save(fig, path)
  return path


def _save(fig, path: str) -> None:
  with storage.open(path, "wb") as f:
    fig.savefig(f, format="png", dpi=_DPI, bbox_inches="tight")
  plt.close(fig)


def plot_all(sweep, evals: list[dict], fit: dict | None, out: str) -> list[str]:
  name = storage.name(sweep.path).removesuffix(".py")
  made = [
      compute_plot(evals, sweep.metric, fit, storage.join(out, "compute.png"), name),
      axis_plot(evals, sweep.metric, "data", fit, storage.join(out, "data.png"), name),
      # Best loss per model size means nothing across compute budgets: isoflop.png instead.
      None
      if any(r.get("budget_flops") for r in evals)
      else axis_plot(evals, sweep.metric, "params", fit, storage.join(out, "params.png"), name),
      isoflop_plot(fit, sweep.metric, storage.join(out, "isoflop.png"), name),
  ]
  return [p for p in made if p]
