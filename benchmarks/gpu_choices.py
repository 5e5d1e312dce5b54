"""Our GPU speed choices, each undone in turn: what it changes in the compiled step, and its time.

  # Any machine: each variant compiled for an H100 here (no GPU needed), what its program moves.
  JAX_PLATFORMS=cpu .venv-cuda/bin/python -m benchmarks.gpu_choices --program [--only gpt2]
  # On a GPU: each variant timed beside the recipe in interleaved rounds.
  python -m benchmarks.gpu_choices --time [--only gpt2 vit_b16] [--rounds 3] [--steps 10]

The choices (each named where it is made), and the variant that undoes it:
  guard as a branch    train.GUARD_BY_SELECT_PLATFORMS: the non-finite guard is a `where` per
                       leaf on GPU; undone, a lax.cond between the update and the old state.
  vocabulary unpadded  gpt.VOCAB_PAD_MULTIPLE: the LM head's products run over 50,304 rows.
  optax's loss         tasks/token_cross_entropy.py: one pass over the logits forward, one
                       elementwise kernel backward; undone, optax's softmax cross-entropy and
                       argmax, as the tasks computed them before.
  XLA attention        attention "auto" is cuDNN's fused kernel, ViT's 197 tokens padded to 198.
  no packing mask      (GPT-2, not a choice: the price of the documents' mask) the rows' segment
                       ids left out, so cuDNN runs causal attention with no bias.

`--program` compiles each variant ahead of time for the H100 that h100_target_config.txtpb
describes (published in openxla/xla PR 25919) on this machine's CPU, with jax[cuda13] installed
(`python3 -m venv .venv-cuda && .venv-cuda/bin/pip install "jax[cuda13]==0.10.2" -e .`), and
reports XLA's cost analysis of the optimized program (bytes accessed: every kernel's operands
and results), its kernels (top-level instructions that launch work), and its temporary memory.
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
import optax  # noqa: E402  # pylint: disable=wrong-import-position

sys.path.insert(0, ROOT)

from benchmarks import gpu_steps  # noqa: E402
from benchmarks import step_timing  # noqa: E402
from vit_jax import tasks  # noqa: E402
from vit_jax.models import gpt  # noqa: E402
from vit_jax.tasks import causal_lm  # noqa: E402
from vit_jax.tasks import token_cross_entropy  # noqa: E402
from vit_jax.tpu_planning import pod_table  # noqa: E402
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


def program_row(flags, step_options, patches) -> dict:
  """The variant's step compiled for an H100 on this machine: bytes, kernels, temporary GiB."""
  # pylint: disable=g-import-not-at-top
  from jax._src.lib import _jax
  from jax.experimental import topologies
  from jaxlib import _hlo

  with open(TARGET_CONFIG) as f:
    target = f.read()
  topology = topologies.get_topology_desc(platform="cuda", topology="1x1x1", target_config=target)
  config = pod_table.config_of(flags, ROOT)
  with patched(patches):
    setup = train.prepare(config, tasks.build_task_without_data(config), topology.devices)
    state, batch = setup.abstract_inputs(config.batch_size)
    with jax.set_mesh(setup.mesh):
      compiled = train.jit_update_step(config, setup, **step_options).lower(state, batch).compile()
  text = compiled.as_text()
  module = _hlo.hlo_module_from_text(text)
  cost = _jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module)
  entry = text[text.index("\nENTRY ") :]
  entry = entry[: entry.index("\n}\n")]
  launches = re.findall(r"= \S+ (fusion|custom-call|copy|scatter|gather|reduce)\(", entry)
  return {
      "bytes accessed, GB": cost["bytes accessed"] / 1e9,
      "kernels": len(launches),
      "copies": launches.count("copy"),
      "temporaries, GiB": compiled.memory_analysis().temp_size_in_bytes / 2**30,
  }


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


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  mode = parser.add_mutually_exclusive_group(required=True)
  mode.add_argument("--program", action="store_true", help="compile for an H100 here: bytes")
  mode.add_argument("--time", action="store_true", help="time on this machine's GPU")
  parser.add_argument("--only", nargs="+", choices=tuple(VARIANTS), help="these only")
  parser.add_argument("--quick", action="store_true", help="two blocks, tiny batches: a smoke run")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=10)
  options = parser.parse_args()
  if options.program and not os.path.isfile(TARGET_CONFIG):
    print(f"error: {TARGET_CONFIG} is missing", file=sys.stderr)
    sys.exit(2)
  for name in VARIANTS:
    if options.only and name not in options.only:
      continue
    flags = workload_flags(name, options.quick)
    began = time.time()
    if options.program:
      rows = {
          v: program_row((*flags, *spec[0]), spec[1], spec[2]) for v, spec in VARIANTS[name].items()
      }
    else:
      rows = time_rows(name, flags, options.rounds, options.steps)
    columns = list(next(iter(rows.values())))
    where = (
        "compiled for an H100 on this machine" if options.program else jax.devices()[0].device_kind
    )
    print(f"\n{name}, {where} ({time.time() - began:.0f} s)\n")
    print("| variant | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for variant, row in rows.items():
      cells = " | ".join(f"{v:.2f}" if isinstance(v, float) else f"{v}" for v in row.values())
      print(f"| {variant} | {cells} |", flush=True)


if __name__ == "__main__":
  main()
