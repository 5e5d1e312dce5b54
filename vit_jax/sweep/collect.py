"""Run dirs -> two CSVs: `runs.csv` (one row per run) and `evals.csv` (one row per eval point).

Everything comes from what the trainer wrote in each workdir: `config.json`, `metrics.jsonl`
(eval records, and `elapsed_s`, the wall time summed over resumes) and `run_info.json` (parameter
count, training FLOPs per example, training-set size). No model is rebuilt.

Training FLOPs = train_flops_per_example x examples seen, where train_flops_per_example is 3x the
model's forward matmul FLOPs on one example (vit_jax/training/flops.py) and examples seen =
step x batch_size. Errors are 1 - eval/accuracy: the metrics are those of the run's default
evaluator, "eval" (the task's own metrics on its eval split).
"""

import csv
import io
import json
import math

from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.sweep import runner
from vit_jax.sweep import spec

RUNS_CSV, EVALS_CSV = "runs.csv", "evals.csv"
DESCRIBE = [
    "run",
    "model",
    "model_name",
    "variant",
    "width",
    "depth",
    "params",
    "train_split",
    "train_examples",
    "batch_size",
    "total_steps",
    "lr",
    "seed",
    "budget_flops",  # the run's compute budget, from the sweep file (IsoFLOP sweeps)
]
METRIC_KEYS = {
    "error": "eval/accuracy",
    "prec1_error": "eval/prec@1",
    "loss": "eval/loss",
    "bits_per_char": "eval/bits_per_char",
}
EVAL_COLUMNS = DESCRIBE + ["step", "examples_seen", "epochs", "flops", "wall_s"]
EVAL_COLUMNS += list(METRIC_KEYS) + ["final"]
# branched_at: the parent's step a cooldown branch started from (0: trained from scratch);
# own_flops: what the run itself trained, its steps after branched_at (a sweep's cost is their sum).
RUN_COLUMNS = DESCRIBE + ["status", "steps_done", "examples_seen", "flops", "wall_s"]
RUN_COLUMNS += ["branched_at", "own_flops"]
RUN_COLUMNS += [f"{w}_{m}" for m in METRIC_KEYS for w in ("final", "best")]


def metric_values(row: dict) -> dict:
  """{error, prec1_error, loss, bits_per_char} of one eval record (None where the task does not
  log it)."""
  acc = runner.eval_metric(row, METRIC_KEYS["error"])
  prec1 = runner.eval_metric(row, METRIC_KEYS["prec1_error"])
  return {
      "error": None if acc is None else 1.0 - acc,
      "prec1_error": None if prec1 is None else 1.0 - prec1,
      "loss": runner.eval_metric(row, METRIC_KEYS["loss"]),
      "bits_per_char": runner.eval_metric(row, METRIC_KEYS["bits_per_char"]),
  }


def describe(name: str, workdir: str) -> dict | None:
  """The run's settings from config.json and run_info.json; None if it never started."""
  config_path = workdir_lib.config_path(workdir)
  if not storage.isfile(config_path):
    return None
  config = json.loads(storage.read_text(config_path))
  info = {}
  info_path = workdir_lib.run_info_path(workdir)
  if storage.isfile(info_path):
    info = json.loads(storage.read_text(info_path))
  model = config["model"]
  label = " ".join(str(model[k]) for k in ("name", "variant") if model.get(k))
  if model.get("block_counts"):  # custom stages override the ResNet variant's
    blocks = "-".join(str(n) for n in model["block_counts"])
    label = f"{model.get('name')} blocks {blocks}"
  label += "".join(f" {k[0]}{model[k]}" for k in ("width", "depth") if model.get(k))
  return {
      "run": name,
      "model": label,
      "model_name": model.get("name"),
      "variant": model.get("variant"),
      "width": model.get("width"),
      "depth": model.get("depth"),
      "params": info.get("num_params"),
      "train_split": config["train_split"],
      "train_examples": info.get("train_examples"),
      "batch_size": config["batch_size"],
      "total_steps": config["total_steps"],
      "lr": config["optimizer"]["lr"],
      "seed": config["seed"],
      "_flops_per_example": info.get("train_flops_per_example"),
      "_branched_at": int(config["branch_from"].rpartition(":")[2])
      if config.get("branch_from")
      else 0,
  }


def run_rows(name: str, workdir: str, budget_flops: float | None = None) -> tuple[dict, list[dict]]:
  """(the run's summary row, its eval rows); `budget_flops` from the sweep file, if it has one."""
  desc = describe(name, workdir)
  if desc is None:
    return {"run": name, "status": "not started", "budget_flops": budget_flops}, []
  desc["budget_flops"] = budget_flops
  per_example = desc.pop("_flops_per_example")
  branched_at = desc.pop("_branched_at")
  records = runner.read_metrics(workdir)
  evals = []
  for record in records:
    if not runner.is_eval(record):
      continue
    seen = record["step"] * desc["batch_size"]
    evals.append(
        {
            **desc,
            "step": record["step"],
            "examples_seen": seen,
            "epochs": seen / desc["train_examples"] if desc["train_examples"] else None,
            "flops": per_example * seen if per_example is not None else None,
            "wall_s": record.get("elapsed_s"),
            **metric_values(record),
            "final": record["step"] == desc["total_steps"],
        }
    )
  evals = _last_per_step(evals)  # a resumed run may have evaluated a step twice
  done = max((r["step"] for r in records), default=0)
  summary = {
      **desc,
      "status": "finished" if any(e["final"] for e in evals) else "partial",
      "steps_done": done,
      "examples_seen": done * desc["batch_size"],
      "flops": per_example * done * desc["batch_size"] if per_example is not None else None,
      "wall_s": max((r.get("elapsed_s", 0.0) for r in records), default=None),
      "branched_at": branched_at,
      "own_flops": (
          per_example * max(done - branched_at, 0) * desc["batch_size"]
          if per_example is not None
          else None
      ),
  }
  for metric in METRIC_KEYS:
    values = [e[metric] for e in evals if e[metric] is not None]
    finals = [e[metric] for e in evals if e["final"] and e[metric] is not None]
    summary[f"final_{metric}"] = finals[-1] if finals else None
    summary[f"best_{metric}"] = min(values) if values else None
  return summary, evals


def _last_per_step(evals: list[dict]) -> list[dict]:
  by_step = {e["step"]: e for e in evals}
  return [by_step[s] for s in sorted(by_step)]


def collect(sweep: spec.Sweep, root: str, out: str) -> tuple[list[dict], list[dict]]:
  """Writes OUT/runs.csv and OUT/evals.csv for every run of `sweep` under `root`."""
  runner.check_root(sweep, root, create=False)
  runs, evals = [], []
  for run in sweep.runs:
    summary, rows = run_rows(run.name, storage.join(root, run.name), run.budget_flops)
    runs.append(summary)
    evals.extend(rows)
  storage.makedirs(out)
  write_csv(storage.join(out, RUNS_CSV), RUN_COLUMNS, runs)
  write_csv(storage.join(out, EVALS_CSV), EVAL_COLUMNS, evals)
  return runs, evals


def write_csv(path: str, columns: list[str], rows: list[dict]) -> None:
  text = io.StringIO(newline="")
  writer = csv.DictWriter(text, columns, extrasaction="ignore")
  writer.writeheader()
  for row in rows:
    writer.writerow({k: _cell(row.get(k)) for k in columns})
  storage.write_bytes(path, text.getvalue().encode("utf-8"))  # csv's own \r\n line ends


def _cell(value):
  if value is None:
    return ""
  if isinstance(value, float):
    return repr(value) if math.isfinite(value) else ""
  return value


def read_csv(path: str) -> list[dict]:
  """Rows of a CSV written here, numbers as numbers, empty cells as None, final as bool."""
  rows = csv.DictReader(io.StringIO(storage.read_bytes(path).decode("utf-8"), newline=""))
  return [{k: _parse(k, v) for k, v in row.items()} for row in rows]


def _parse(key: str, text: str):
  if text == "":
    return None
  if key == "final":
    return text == "True"
  if key in ("run", "model", "model_name", "variant", "train_split", "status"):
    return text
  try:
    return int(text)
  except ValueError:
    try:
      return float(text)
    except ValueError:
      return text
