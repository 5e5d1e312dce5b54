"""Where a GPU train step's time goes: kernel time per step by kind, ours beside the PyTorch peer.

  NANOGPT=/path/to/nanoGPT python -m benchmarks.gpu_profile [--only gpt2 vit_b16] [--steps 5]

Traces `--steps` steps of our recipe's step (benchmarks/gpu_steps.py's first row) with
jax.profiler and of the compiled PyTorch peer (nanoGPT for gpt2, timm for vit_b16) with
torch.profiler, after warm-up, and sums the GPU kernels' time by kind: matrix products, the fused
attention kernel, the optimizer's kernels, copies and memsets, scatters, other elementwise and
reduction kernels. Ours is also split by the part of the model each kernel's HLO op comes from
(its `op_name`, read from the optimized HLO that XLA dumps here), and its ten longest kernels are
named. Kernel time is not step time: the gaps between kernels (launches, the host) are the
difference, printed as "idle".
"""

import argparse
import collections
import glob
import json
import os
import re
import sys
import tempfile

DUMP_DIR = tempfile.mkdtemp(prefix="gpu_profile_hlo_")
# Command buffers off: inside one (CUDA graphs, XLA's default on GPU) every kernel's trace event
# names the buffer, not its HLO op, and the split by part of the model is lost. Launched one by
# one, the kernels run as before; only the gaps between them ("idle") grow.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_dump_to={DUMP_DIR} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*update_step.*"
    + " --xla_gpu_enable_command_buffer="
).strip()
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # room for PyTorch
import jax  # noqa: E402  # pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import checkouts  # noqa: E402
from benchmarks import gpu_steps  # noqa: E402
from benchmarks import step_timing  # noqa: E402
from vit_jax.training import train  # noqa: E402

# Kernel kinds by kernel name, first match wins (cuBLAS, CUTLASS and Triton matmuls; cuDNN's and
# PyTorch's flash attention; PyTorch's multi-tensor and fused optimizers; Inductor's Triton
# kernels and XLA's fusions fall to "elementwise and reductions").
KINDS = (
    ("attention kernel", r"fmha|flash|cudnn|attention|sdpa"),
    (
        "matrix products",
        r"gemm|nvjet|cutlass|xmma|sm90_|sm80_|ampere|cublas|triton_tem|matmul|_mm_",
    ),
    ("optimizer (fused)", r"multi_tensor|adam|foreach"),
    ("scatter and gather", r"scatter|gather|index_put|embedding_dense_backward|indexSelect"),
    ("copies and memsets", r"copy|memcpy|memset|transpose|fill"),
)
# Parts of our model by the HLO op_name of a kernel's op, first match wins.
PARTS = (
    (
        "attention (fused kernel and its layout)",
        r"MultiHeadDotProductAttention_\d+/(?!query|key|value|out)",
    ),
    ("attention projections", r"MultiHeadDotProductAttention"),
    ("MLP", r"MlpBlock"),
    ("LayerNorm", r"LayerNorm|encoder_norm"),
    ("LM head and loss", r"btd,vd->btv|btv,|lm_head|jvp\(\)/|transpose\(jvp\(\)\)|head|reduce_max"),
    ("embeddings and patches", r"wte|wpe|embedding|posembed|conv"),
    ("optimizer, norms, guard", r"update_step"),
)


# A GPU plane's lines that are not streams of kernels: XLA's and the framework's own summaries.
DERIVED_LINES = (
    "XLA Modules",
    "XLA Ops",
    "XLA TraceMe",
    "Steps",
    "Framework Name Scope",
    "Framework Ops",
    "Source code",
    "Launch Stats",
    "TensorFlow Name Scope",
    "TensorFlow Ops",
)


def kind_of(kernel: str) -> str:
  for kind, pattern in KINDS:
    if re.search(pattern, kernel, re.IGNORECASE):
      return kind
  return "elementwise and reductions"


def part_of(op_name: str) -> str:
  for part, pattern in PARTS:
    if re.search(pattern, op_name):
      return part
  return "other"


def _op_names(module_name: str) -> dict:
  """HLO instruction name -> its op_name, from the optimized HLO XLA dumped for the module."""
  names = {}
  for path in glob.glob(os.path.join(DUMP_DIR, f"*{module_name}*after_optimizations.txt")):
    with open(path) as f:
      for line in f:
        match = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = .*op_name=\"([^\"]*)\"", line)
        if match:
          names.setdefault(match.group(1), match.group(2))
  return names


def jax_kernels(run, steps: int) -> list:
  """(kernel name, HLO op, HLO module, seconds) of every GPU kernel in `steps` traced steps."""
  trace_dir = tempfile.mkdtemp(prefix="gpu_profile_trace_")
  with jax.profiler.trace(trace_dir):
    for _ in range(steps):
      metrics = run()
    step_timing.wait(metrics)
  (path,) = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
  kernels = []
  for plane in jax.profiler.ProfileData.from_file(path).planes:
    if not plane.name.startswith("/device:GPU"):
      continue
    for line in plane.lines:
      if line.name in DERIVED_LINES:  # they repeat the streams' kernels
        continue
      for event in line.events:
        stats = dict(event.stats)
        kernels.append(
            (
                event.name,
                stats.get("hlo_op", ""),
                stats.get("hlo_module", ""),
                event.duration_ns / 1e9,
            )
        )
  return kernels


def torch_kernels(step, steps: int) -> list:
  """(kernel name, "", "", seconds) of every CUDA kernel in `steps` profiled steps."""
  import torch  # pylint: disable=g-import-not-at-top

  activities = [torch.profiler.ProfilerActivity.CUDA]
  with torch.profiler.profile(activities=activities) as profiler:
    for _ in range(steps):
      pending = step()
    pending.block_until_ready()
  return [  # kernels only: the operators' own rows add up their kernels again
      (event.key, "", "", event.device_time_total / 1e6)
      for event in profiler.key_averages()
      if event.device_type == torch.autograd.DeviceType.CUDA and event.device_time_total > 0
  ]


def summary(kernels: list, steps: int, wall_s: float, by_part: bool) -> dict:
  """{"kinds": {kind: ms per step}, "parts": {...}, "longest": [(ms, kernel, op_name)]}."""
  kinds, parts, longest = collections.Counter(), collections.Counter(), collections.Counter()
  op_names = {}
  for kernel, op, module, seconds in kernels:
    kinds[kind_of(kernel)] += seconds * 1e3 / steps
    if by_part:
      if module not in op_names:
        op_names[module] = _op_names(module)
      op_name = op_names[module].get(op, op)
      parts[part_of(op_name)] += seconds * 1e3 / steps
      longest[(kernel[:60], op_name[-70:])] += seconds * 1e3 / steps
  kinds["idle (step time minus kernel time)"] = wall_s * 1e3 - sum(kinds.values())
  return {
      "kinds": dict(kinds),
      "parts": dict(parts),
      "longest": [(ms, *key) for key, ms in longest.most_common(10)],
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--only", nargs="+", choices=("gpt2", "vit_b16"), help="these only")
  parser.add_argument("--steps", type=int, default=5, help="steps traced per row")
  parser.add_argument("--quick", action="store_true", help="two blocks, tiny batches: a smoke run")
  parser.add_argument("--json", help="also write the summaries here")
  options = parser.parse_args()
  everything = {}
  checkout = checkouts.checkout_from_environment("nanoGPT")
  for name, (unit, items, flags, peers) in gpu_steps.workloads(options.quick).items():
    if options.only and name not in options.only:
      continue
    del unit, items
    ours = step_timing.our_runners(
        flags, lambda config, setup: {"ours": train.jit_update_step(config, setup)}
    )["ours"]
    rows = {"ours, the recipe": ("jax", ours)}
    peer_row = "timm, torch.compile" if name == "vit_b16" else "nanoGPT, torch.compile"
    if gpu_steps.torch_gpu() and (name == "vit_b16" or checkout):
      rows[peer_row] = ("torch", peers[peer_row][1](checkout))
    results = {}
    for row, (framework, run) in rows.items():
      seconds = step_timing.measure(
          {row: run}, warmup=2, rounds=1, steps=options.steps, pipelined=True
      )
      wall_s = seconds[row][0]
      if framework == "jax":
        kernels = jax_kernels(run, options.steps)
      else:
        kernels = torch_kernels(run, options.steps)
      results[row] = summary(kernels, options.steps, wall_s, by_part=framework == "jax")
      results[row]["ms"] = wall_s * 1e3
    print(f"\n{name}: GPU kernel time per step, ms\n")
    print("| kind | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    kinds = sorted({k for r in results.values() for k in r["kinds"]})
    for kind in kinds:
      cells = " | ".join(f"{r['kinds'].get(kind, 0.0):.1f}" for r in results.values())
      print(f"| {kind} | {cells} |")
    print("| step | " + " | ".join(f"{r['ms']:.1f}" for r in results.values()) + " |")
    ours_result = results["ours, the recipe"]
    print("\nours by part of the model, ms per step:")
    for part, ms in sorted(ours_result["parts"].items(), key=lambda kv: -kv[1]):
      print(f"  {part}: {ms:.2f}")
    print("ours, the ten longest kernels (ms per step, kernel, op_name):")
    for ms, kernel, op_name in ours_result["longest"]:
      print(f"  {ms:.2f}  {kernel}  {op_name}")
    everything[name] = results
  if options.json:
    with open(options.json, "w") as f:
      json.dump(everything, f, indent=1)


if __name__ == "__main__":
  main()
