"""Our GPU speed choices, each undone in turn: what it changes in the compiled step, and its time.

  # Any machine: each variant compiled for an H100 here (no GPU needed), what its program moves.
  JAX_PLATFORMS=cpu .venv-cuda/bin/python -m benchmarks.gpu_choices --program [--only gpt2]
  # On a GPU: each variant timed beside the recipe in interleaved rounds.
  python -m benchmarks.gpu_choices --time [--only gpt2 vit_b16 gpt2_init] [--rounds 3] [--steps 10]

The choices (each named where it is made), and the variant that undoes it:
  guard as a branch    train.GUARD_BY_SELECT_PLATFORMS: the non-finite guard is a `where` per
                       leaf on GPU; undone, a lax.cond between the update and the old state.
  vocabulary unpadded  gpt.VOCAB_PAD_MULTIPLE: the LM head's products run over 50,304 rows.
  optax's loss         tasks/token_cross_entropy.py: one pass over the logits forward, one
                       elementwise kernel backward; undone, optax's softmax cross-entropy and
                       argmax, as the tasks computed them before.
  XLA attention        attention "auto" is cuDNN's fused kernel, ViT's 197 tokens padded to 198.
  bias gradient        attention.cudnn_mask_gradient_skipped: cuDNN's backward computes no
    requested          gradient of the packing mask's bias; undone, the mask goes in as the
                       float bias JAX makes of it, whose gradient every JAX asks for.
  no packing mask      (GPT-2, not a choice: the price of the documents' mask) the rows' segment
                       ids left out, so cuDNN runs causal attention with no bias.
And GPT-2's state initialisation (`gpt2_init`: `Setup.fresh_state`'s program), by the choice of
startup.INIT_THREEFRY_KERNEL_PLATFORMS: its random numbers drawn by JAX's Threefry kernel; undone,
the hash inlined into the program (JAX's default). Its rows give the seconds to trace, lower and
compile it and the optimized program's size; on a GPU also the seconds to run it and whether
both draw the same bits. With `--program`, a dropout of a bf16 (16, 512, 768) array both ways
too: why the update step keeps the default.

`--program` compiles each variant ahead of time for the H100 that h100_target_config.txtpb
describes (published in openxla/xla PR 25919) on this machine's CPU, with jax[cuda13] installed
(`python3 -m venv .venv-cuda && .venv-cuda/bin/pip install "jax[cuda13]==0.10.2" -e .`), and
reports XLA's cost analysis of the optimized program (bytes accessed: every kernel's operands
and results, but for the library calls: XLA does not know what those read), the library calls'
operands and results summed apart from the program's text (cuBLAS's products, cuDNN's
attention), its kernels (top-level instructions that launch work), the cuDNN backward calls
that return a bias gradient, and its temporary memory.
No device means no autotuning: the matrix products run as cuBLAS calls here
(`--xla_gpu_enable_triton_gemm=false`; untuned Triton tilings fail to compile for some shapes),
so the figures are the program's structure, not a GPU's choices or times.
"""

import argparse
import contextlib
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_CONFIG = os.path.join(ROOT, "benchmarks", "h100_target_config.txtpb")
if "--program" in sys.argv:
  flags_now = os.environ.get("XLA_FLAGS", "")
  os.environ["XLA_FLAGS"] = f"{flags_now} --xla_gpu_enable_triton_gemm=false".strip()
else:
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax  # noqa: E402  # pylint: disable=wrong-import-position
import jax.numpy as jnp  # noqa: E402  # pylint: disable=wrong-import-position
import numpy as np  # noqa: E402  # pylint: disable=wrong-import-position
import optax  # noqa: E402  # pylint: disable=wrong-import-position

sys.path.insert(0, ROOT)

from benchmarks import gpu_steps  # noqa: E402
from benchmarks import step_timing  # noqa: E402
from vit_jax import startup  # noqa: E402
from vit_jax import tasks  # noqa: E402
from vit_jax.models import attention  # noqa: E402
from vit_jax.models import gpt  # noqa: E402
from vit_jax.tasks import causal_lm  # noqa: E402
from vit_jax.tasks import token_cross_entropy  # noqa: E402
from vit_jax.tpu_planning import pod_table  # noqa: E402
from vit_jax.training import mesh as mesh_lib  # noqa: E402
from vit_jax.training import setup as setup_lib  # noqa: E402
from vit_jax.training import train  # noqa: E402


def optax_cross_entropy(logits_BxLxV, targets_BxL, weights_BxL):
  """The tasks' loss before tasks/token_cross_entropy.py: optax's, and argmax for the hits."""
  nll_BxL = optax.softmax_cross_entropy_with_integer_labels(
      logits_BxLxV.astype(jnp.float32), targets_BxL
  )
  hits_BxL = (jnp.argmax(logits_BxLxV, -1) == targets_BxL).astype(jnp.float32)
  return jnp.sum(nll_BxL * weights_BxL), jnp.sum(hits_BxL * weights_BxL)


def _no_segments(self, batch):
  del self
  return batch["inputs"], batch["positions"], None


def _mask_as_bias(query, key, value, bias=None, mask=None, **kwargs):
  """jax.nn.dot_product_attention with a boolean mask handed over as the float bias JAX makes of
  it (the same values): cuDNN's backward computes the bias's gradient on every JAX release."""
  # pylint: disable-next=g-import-not-at-top
  from jax._src.cudnn import fused_attention_stablehlo as jax_cudnn

  if mask is not None and bias is None:
    bias, mask = jax_cudnn.combine_bias_and_mask(None, mask, query.dtype), None
  return PLAIN_ATTENTION(query, key, value, bias, mask, **kwargs)


PLAIN_ATTENTION = jax.nn.dot_product_attention


XLA_ATTENTION = ("--config.model.attention_impl=xla",)
# name -> (flags after the workload's, update_step options, [(object, attribute, value)]).
VARIANTS = {
    "gpt2": {
        "the recipe": ((), {}, ()),
        "guard as a branch": ((), {"guard_by_select": False}, ()),
        "vocabulary unpadded": ((), {}, ((gpt, "VOCAB_PAD_MULTIPLE", {}),)),
        "optax's loss": (
            (),
            {},
            ((token_cross_entropy, "weighted_cross_entropy", optax_cross_entropy),),
        ),
        "XLA attention": (XLA_ATTENTION, {}, ()),
        "bias gradient requested": (
            (),
            {},
            (
                (attention, "cudnn_mask_gradient_skipped", contextlib.nullcontext),
                (jax.nn, "dot_product_attention", _mask_as_bias),
            ),
        ),
        "no packing mask": ((), {}, ((causal_lm.CausalLM, "model_inputs", _no_segments),)),
    },
    "vit_b16": {
        "the recipe": ((), {}, ()),
        "guard as a branch": ((), {"guard_by_select": False}, ()),
        "XLA attention": (XLA_ATTENTION, {}, ()),
    },
}


@contextlib.contextmanager
def patched(patches):
  """The attributes set to the variant's values while its step is traced, then restored."""
  saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
  for obj, name, value in patches:
    setattr(obj, name, value)
  try:
    yield
  finally:
    for obj, name, value in saved:
      setattr(obj, name, value)


def workload_flags(name: str, quick: bool):
  return gpu_steps.workloads(quick)[name][2]


def h100_devices():
  """The devices of one H100 that h100_target_config.txtpb describes, to compile for here."""
  # pylint: disable-next=g-import-not-at-top
  from jax.experimental import topologies

  with open(TARGET_CONFIG) as f:
    target = f.read()
  return topologies.get_topology_desc(
      platform="cuda", topology="1x1x1", target_config=target
  ).devices


def program_row(flags, step_options, patches) -> dict:
  """The variant's step compiled for an H100 on this machine: bytes, kernels, temporary GiB."""
  config = pod_table.config_of(flags, ROOT)
  with patched(patches):
    setup = setup_lib.prepare(config, tasks.build_task_without_data(config), h100_devices())
    state, batch = setup.abstract_inputs(config.batch_size)
    with jax.set_mesh(setup.mesh):
      compiled = train.jit_update_step(config, setup, **step_options).lower(state, batch).compile()
  text = compiled.as_text()
  entry = _entry(text)
  launches = re.findall(r"= \S+ (fusion|custom-call|copy|scatter|gather|reduce)\(", entry)
  library_bytes, bias_gradients = library_calls(entry)
  return {
      "bytes accessed, GB": bytes_accessed(text) / 1e9,
      "library calls, GB": library_bytes / 1e9,
      "kernels": len(launches),
      "copies": launches.count("copy"),
      "bias gradients": bias_gradients,
      "temporaries, GiB": compiled.memory_analysis().temp_size_in_bytes / 2**30,
  }


def bytes_accessed(text: str) -> float:
  """XLA's cost analysis of an optimized program (its library calls count -1 each)."""
  # pylint: disable=g-import-not-at-top
  from jax._src.lib import _jax
  from jaxlib import _hlo

  module = _hlo.hlo_module_from_text(text)
  return _jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module)["bytes accessed"]


def _entry(text: str) -> str:
  entry = text[text.index("\nENTRY ") :]
  return entry[: entry.index("\n}\n")]


_ARRAY = re.compile(r"\b(pred|[a-z]+\d+)\[([\d,]*)\]")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\(.*?\)|\S+) ([\w-]+)\((.*?)\)(.*)$")


def _arrays(shape: str) -> list:
  """The bytes of each array a shape's text names, workspaces (s8, u8) left out."""
  sizes = []
  for dtype, dims in _ARRAY.findall(shape):
    if dtype in ("s8", "u8"):
      continue
    itemsize = 1 if dtype == "pred" else int(re.match(r"[a-z]+(\d+)", dtype).group(1)) // 8
    sizes.append(itemsize * int(np.prod([int(d) for d in dims.split(",") if d])))
  return sizes


def library_calls(entry: str) -> tuple[int, int]:
  """(bytes of the library calls' operands and results, cuDNN backward calls that return a bias
  gradient) of a program's entry: cuBLAS's products and cuDNN's attention, which XLA's cost
  analysis leaves out. A backward call's results are dQ, dK, dV and, when asked, the bias's."""
  instructions = [m.groups() for m in map(_INSTRUCTION.match, entry.splitlines()) if m]
  shapes = {name: shape for name, shape, *_ in instructions}
  total = gradients = 0
  for _, shape, op, operands, attributes in instructions:
    if op != "custom-call":
      continue
    results = _arrays(shape)
    total += sum(results)
    total += sum(sum(_arrays(shapes[name])) for name in re.findall(r"%([^\s,]+)", operands))
    target = re.search(r'custom_call_target="([^"]+)"', attributes).group(1)
    gradients += target.startswith("__cudnn$fmha") and "Backward" in target and len(results) > 3
  return total, gradients


def time_rows(name: str, flags, rounds: int, steps: int) -> dict:
  """Each variant's step on this machine's device, ms per step (interleaved rounds, medians)."""
  runners = {}
  for variant, (extra, step_options, patches) in VARIANTS[name].items():
    with patched(patches):
      runner = step_timing.our_runners(
          (*flags, *extra),
          lambda config, setup, o=step_options: {"r": train.jit_update_step(config, setup, **o)},
      )["r"]
      step_timing.wait(runner())  # traced and compiled while patched
    runners[variant] = runner
  seconds = step_timing.measure(runners, warmup=1, rounds=rounds, steps=steps, pipelined=True)
  return {variant: {"ms": s[0] * 1e3} for variant, s in seconds.items()}


def init_rows(flags, devices, run: bool) -> dict:
  """GPT-2's state initialisation as the trainer builds it (`Setup.jitted_init_state`) for
  `devices`, its random numbers by JAX's Threefry kernel (the recipe on a GPU) and inlined:
  seconds to trace, lower and compile (and the compile's CPU seconds), the optimized program's
  size and temporaries; with `run` (on a GPU) the seconds to run it, and whether it drew the
  same bits as the recipe."""
  config = pod_table.config_of(flags, ROOT)
  rows, recipe = {}, None
  for variant, kernel in (
      ("the recipe: Threefry kernel", True),
      ("inlined (JAX's default)", False),
  ):
    setup = setup_lib.prepare(config, tasks.build_task_without_data(config), devices)
    init_rng = setup.init_rng
    abstract_rng = jax.ShapeDtypeStruct(
        init_rng.shape, init_rng.dtype, sharding=mesh_lib.replicated(setup.mesh)
    )
    clock = [time.perf_counter()]
    with jax.set_mesh(setup.mesh), startup.threefry_kernel_lowering(kernel):
      traced = setup.jitted_init_state.trace(abstract_rng)
      clock.append(time.perf_counter())
      lowered = traced.lower()
      clock.append(time.perf_counter())
      cpu = time.process_time()
      compiled = lowered.compile()
      cpu = time.process_time() - cpu
      clock.append(time.perf_counter())
    row = {
        f"{stage}, s": end - start
        for stage, start, end in zip(("trace", "lower", "compile"), clock, clock[1:])
    }
    row["compile, CPU s"] = cpu  # the process's: steadier than the wall on a shared machine
    row["program, M characters"] = len(compiled.as_text()) / 1e6
    row["temporaries, GiB"] = compiled.memory_analysis().temp_size_in_bytes / 2**30
    if run:
      began = time.perf_counter()
      leaves = [np.asarray(x) for x in jax.tree.leaves(compiled(init_rng))]
      row["run, s"] = time.perf_counter() - began
      recipe = recipe or leaves
      row["same bits"] = all(np.array_equal(a, b) for a, b in zip(leaves, recipe))
    rows[variant] = row
  return rows


def dropout_rows() -> dict:
  """A dropout (rate 0.1) of a bf16 (16, 512, 768) array compiled for an H100 here, its mask's
  bits inlined (as the update step draws them) and by the Threefry kernel."""
  replicated = mesh_lib.replicated(jax.sharding.Mesh(h100_devices(), ("x",)))
  x = jax.ShapeDtypeStruct((16, 512, 768), jnp.bfloat16, sharding=replicated)
  key = jax.ShapeDtypeStruct((2,), jnp.uint32, sharding=replicated)

  def dropout(x, key):
    keep = jax.random.bernoulli(key, 0.9, x.shape)
    return jnp.where(keep, x / 0.9, 0).astype(x.dtype)

  rows = {}
  for variant, kernel in (("inlined: the update step's", False), ("Threefry kernel", True)):
    with startup.threefry_kernel_lowering(kernel):
      compiled = jax.jit(dropout).lower(x, key).compile()
    text = compiled.as_text()
    rows[variant] = {
        "bytes accessed, MB": bytes_accessed(text) / 1e6,
        "library calls, MB": library_calls(_entry(text))[0] / 1e6,
        "temporaries, MB": compiled.memory_analysis().temp_size_in_bytes / 1e6,
    }
  return rows


def print_table(title: str, rows: dict) -> None:
  columns = list(next(iter(rows.values())))
  print(f"\n{title}\n")
  print("| variant | " + " | ".join(columns) + " |")
  print("|---|" + "---|" * len(columns))
  for variant, row in rows.items():
    cells = " | ".join(f"{v:.2f}" if isinstance(v, float) else f"{v}" for v in row.values())
    print(f"| {variant} | {cells} |", flush=True)


INIT = "gpt2_init"  # --only's name for GPT-2's state initialisation


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  mode = parser.add_mutually_exclusive_group(required=True)
  mode.add_argument("--program", action="store_true", help="compile for an H100 here: bytes")
  mode.add_argument("--time", action="store_true", help="time on this machine's GPU")
  parser.add_argument("--only", nargs="+", choices=(*VARIANTS, INIT), help="these only")
  parser.add_argument("--quick", action="store_true", help="two blocks, tiny batches: a smoke run")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=10)
  options = parser.parse_args()
  if options.program and not os.path.isfile(TARGET_CONFIG):
    print(f"error: {TARGET_CONFIG} is missing", file=sys.stderr)
    sys.exit(2)
  where = (
      "compiled for an H100 on this machine" if options.program else jax.devices()[0].device_kind
  )
  for name in (*VARIANTS, INIT):
    if options.only and name not in options.only:
      continue
    began = time.time()
    if name == INIT:
      devices = h100_devices() if options.program else jax.devices()[:1]
      rows = init_rows(workload_flags("gpt2", options.quick), devices, run=options.time)
      print_table(f"gpt2's state initialisation, {where} ({time.time() - began:.0f} s)", rows)
      if options.program:
        print_table(
            "a dropout of a bf16 (16, 512, 768) array, compiled for an H100", dropout_rows()
        )
      continue
    flags = workload_flags(name, options.quick)
    if options.program:
      rows = {
          v: program_row((*flags, *spec[0]), spec[1], spec[2]) for v, spec in VARIANTS[name].items()
      }
    else:
      rows = time_rows(name, flags, options.rounds, options.steps)
    print_table(f"{name}, {where} ({time.time() - began:.0f} s)", rows)


if __name__ == "__main__":
  main()
