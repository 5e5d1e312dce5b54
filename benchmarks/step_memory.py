"""Per-chip memory and memory traffic of a train step, ours beside a peer's, compiled for one TPU
slice with libtpu on any machine (nothing runs).

  JAX_PLATFORMS=cpu BIG_VISION=/path/to/big_vision \\
      .venv-tpu/bin/python benchmarks/step_memory.py [--step vit_b16] [--topology v5p-8]
  JAX_PLATFORMS=cpu NANODO=/path/to/nanodo \\
      .venv-tpu/bin/python benchmarks/step_memory.py --step gpt2

`vit_b16`: the ViT-B/16 ImageNet-1k step at global batch 1024. The peer is big_vision's own step
(its models/vit.py with bf16 matmuls, `dtype_mm="bfloat16"`, and the update of its train.py:
value_and_grad of the sigmoid loss, its optax `make` with configs/vit_i1k.py's optimizer,
apply_updates, the three norms it logs). Ours is the trainer's own step (`vit_jax.compile`) for
configs/vit.py's i1k recipe: as published (bf16, the attention kernel "auto" picks, which at 197
tokens of head width 64 is XLA's: vit_jax/models/splash_attention.py, keeps_more_than_xla), with
splash attention, and in fp32. Both use the same batch, slice, data-parallel mesh, sigmoid
loss and optimizer (Adam with a bf16 first moment, clipping at 1.0, decoupled weight decay).
big_vision's mixup runs inside its step and ours on the host: it is left out of its step here.

`gpt2`: the GPT-2 124M step at the recipe's 16 sequences of 1024 tokens per chip (global batch 64
on a v5p-8). The peer is nanodo's own trainer step (train.py's, in jax_peers.py; its model.py at
GPT-2's shape: 12 layers, width 768, 12 heads, MLP 3072, vocabulary 50257, bf16 compute, and its
optimizer.py with configs/gpt.py's GPT-2 AdamW and schedule: jax_peers.nanodo_optimizer). nanodo
shards parameters over the data axis (FSDP) by default; here `fsdp_enabled=False` replicates them
as our recipe's data-parallel mesh does. Its model has no biases and ties the output layer to the
embedding (as ours does); it runs its step under `optax.MultiSteps`, as its trainer always does.

Without the peer's variable only our rows print. Columns, per chip: peak (arguments + outputs -
donated + temporaries + code, what must fit in HBM), temporaries, XLA's FLOPs and XLA's estimate
of the bytes its ops read and write. Then, for each step, the largest buffers live at its peak
(vit_jax/tpu_planning/peak_buffers.py). Results: benchmarks/README.md.
"""

import argparse
import os
import sys
import tempfile

import jax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import checkouts as checkouts_lib  # noqa: E402
from benchmarks import jax_peers  # noqa: E402
from vit_jax.tpu_planning import aot  # noqa: E402
from vit_jax.tpu_planning import peak_buffers  # noqa: E402
from vit_jax.tpu_planning import pod_table  # noqa: E402
from vit_jax.training import device_memory  # noqa: E402

# Our rows per step: name -> flags after the recipe's. The recipe is docs/pod.md's row.
OURS = {
    "vit_b16": {
        "ours, the recipe (bf16; auto attention: XLA's here)": (),
        "ours, bf16, splash attention": ("--config.model.attention_impl=splash",),
        "ours, fp32, XLA attention": ("--config.model.dtype=float32",),
    },
    "gpt2": {
        "ours, the recipe (bf16; auto attention: splash here)": (),
        "ours, bf16, XLA attention": ("--config.model.attention_impl=xla",),
    },
}
RECIPES = {"vit_b16": "ViT-B/16, ImageNet-1k", "gpt2": "GPT-2 124M"}  # pod_table.ROWS names
BATCH_PER_CHIP = {"vit_b16": 256, "gpt2": 16}  # the recipes' own: 4096 / 16 and 512 / 32 chips
GPT2_SHAPE = dict(D=768, H=12, L=1024, N=12, F=3072)  # nanodo's DoConfig names
GPT2_VOCAB = 50_257
GPT2_FLAGS = dict(pod_table.ROWS)[RECIPES["gpt2"]]  # the recipe's flags, as its table row gives


def gpt2_nanodo_optimizer() -> dict:
  """configs/gpt.py's GPT-2 AdamW and schedule in nanodo's optimizer names."""
  return jax_peers.nanodo_optimizer(pod_table.config_of(GPT2_FLAGS, ROOT))


def _figures(compiled, peak) -> dict:
  memory = compiled.memory_analysis()
  cost = compiled.cost_analysis()
  cost = (cost[0] if isinstance(cost, (list, tuple)) else cost) or {}
  return {
      "peak": device_memory.program_bytes(memory),
      "temp": memory.temp_size_in_bytes,
      "flops": cost.get("flops", 0.0),
      "bytes": cost.get("bytes accessed", 0.0),
      "buffers": peak,
  }


def _compile(lowered, keep_dir=None):
  """The compiled step and its peak buffers; XLA's files stay in `keep_dir` if given."""
  with tempfile.TemporaryDirectory() as dump_dir:
    dump_dir = keep_dir or dump_dir
    compiled = lowered.compile(
        compiler_options={**peak_buffers.DUMP_OPTIONS, "xla_dump_to": dump_dir}
    )
    return compiled, peak_buffers.read(dump_dir)


def ours(step: str, extra_args, topology: str, batch_size: int, keep_dir=None) -> dict:
  # pylint: disable=g-import-not-at-top
  from vit_jax import tasks
  from vit_jax.training import setup as setup_lib
  from vit_jax.training import train

  recipe = dict(pod_table.ROWS)[RECIPES[step]]
  args = (*recipe, f"--config.batch_size={batch_size}", *extra_args)
  config = pod_table.config_of(args, ROOT)
  devices = aot.parse_topology(topology).devices()
  setup = setup_lib.prepare(config, tasks.build_task_without_data(config), devices)
  state, batch = setup.abstract_inputs(batch_size)
  with jax.set_mesh(setup.mesh):
    lowered = train.jit_update_step(config, setup).lower(state, batch)
  return _figures(*_compile(lowered, keep_dir))


def big_vision(checkout: str, topology: str, batch_size: int, keep_dir=None) -> dict:
  """big_vision's update_fn for its vit_i1k.py B/16 config, bf16 matmuls."""
  mesh = jax.sharding.Mesh(aot.parse_topology(topology).devices(), ("data",))
  peer = jax_peers.big_vision(
      checkout, variant="B/16", batch_size=batch_size, dtype_mm="bfloat16", mesh=mesh
  )
  lowered = peer.step.lower(peer.abstract_state, *peer.abstract_inputs)
  return _figures(*_compile(lowered, keep_dir))


def nanodo(checkout: str, topology: str, batch_size: int, keep_dir=None) -> dict:
  """nanodo's trainer step for its model.py at GPT-2 124M's shape, with configs/gpt.py's GPT-2
  optimizer in nanodo's names."""
  mesh = jax.sharding.Mesh(aot.parse_topology(topology).devices(), ("data",))
  peer = jax_peers.nanodo(
      checkout,
      shape=GPT2_SHAPE,
      vocab=GPT2_VOCAB,
      batch_size=batch_size,
      dtype="bfloat16",
      optimizer_overrides=gpt2_nanodo_optimizer(),
      mesh=mesh,
  )
  with jax.set_mesh(mesh):
    lowered = peer.step.lower(peer.abstract_state, *peer.abstract_inputs)
  return _figures(*_compile(lowered, keep_dir))


# Per step: (title, the peer (jax_peers.PEERS), its row, its step's builder).
PEERS = {
    "vit_b16": (
        "ViT-B/16 ImageNet-1k train step",
        "big_vision",
        "big_vision, bf16 matmuls, XLA attention",
        big_vision,
    ),
    "gpt2": ("GPT-2 124M train step, 1024 tokens", "nanodo", "nanodo, bf16, XLA attention", nanodo),
}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--step", choices=sorted(PEERS), default="vit_b16")
  parser.add_argument("--topology", default="v5p-8")
  parser.add_argument(
      "--batch_size", type=int, help="global; default: the recipe's batch per chip x chips"
  )
  parser.add_argument("--buffers", type=int, default=8, help="largest peak buffers per step")
  parser.add_argument("--dump_dir", help="keep XLA's memory files here, a folder per row")
  options = parser.parse_args()
  title, peer_name, peer_row, peer = PEERS[options.step]
  checkout = checkouts_lib.checkout_from_environment(peer_name)
  try:
    chips = len(aot.parse_topology(options.topology).devices())
  except ValueError as e:  # errors.ConfigError: one line naming the topology and the choices
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  batch_size = options.batch_size or BATCH_PER_CHIP[options.step] * chips

  def keep(row: int):
    return os.path.join(options.dump_dir, str(row)) if options.dump_dir else None

  rows = {}
  if checkout:
    rows[peer_row] = peer(checkout, options.topology, batch_size, keep(0))
  for index, (name, extra) in enumerate(OURS[options.step].items(), 1):
    rows[name] = ours(options.step, extra, options.topology, batch_size, keep(index))
  gib = 2**30
  print(f"\n{title}, {options.topology}, global batch {batch_size}:\n")
  print("| step | peak GiB / chip | temporaries GiB | TFLOP / chip | bytes accessed |")
  print("|---|---|---|---|---|")
  for name, row in rows.items():
    print(
        f"| {name} | {row['peak'] / gib:.2f} | {row['temp'] / gib:.2f} | "
        f"{row['flops'] / 1e12:.2f} | {row['bytes'] / 1e12:.3f} TB |"
    )
  for name, row in rows.items():
    if row["buffers"]:
      print(f"\n{name}:\n{row['buffers'].text(rows=options.buffers)}")


if __name__ == "__main__":
  main()
