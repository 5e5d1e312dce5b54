"""Train-step time and MFU on one GPU in bf16: ViT-B/16 and GPT-2 124M, our trainer's step beside
big_vision's and nanodo's own steps.

  BIG_VISION=/path/to/big_vision NANODO=/path/to/nanodo \\
      python -m benchmarks.gpu_steps [--only vit_b16 gpt2] [--rounds 5] [--steps 10] [--json F]

Workloads, at the recipes' batch per chip (benchmarks/step_memory.py's BATCH_PER_CHIP):
  vit_b16: ViT-B/16, 224 px, batch 256. Ours is the trainer's jitted step for configs/vit.py's
    ImageNet-1k recipe (bf16); the peer is big_vision's update_fn for its configs/vit_i1k.py at
    B/16 with bf16 matmuls (`dtype_mm`), as benchmarks/step_memory.py builds both.
  gpt2: GPT-2 124M, batch 16 x 1024 tokens. Ours is the trainer's step for configs/gpt.py's gpt2
    recipe; the peer is nanodo's trainer step at GPT-2's shape in bf16, with our AdamW and
    schedule in its names (jax_peers.nanodo_optimizer).
Our rows: the recipe as published (attention "auto": cuDNN's fused kernel on a GPU in bf16 where
it takes the shape, XLA's at ViT's 197 tokens), the same without the non-finite guard, and for
GPT-2 with XLA's attention. Every row is jitted with its state donated, compiled and warmed up
first, then timed in interleaved rounds of `--steps` steps dispatched back to back
(step_timing.measure, pipelined). Medians.

MFU: model FLOPs per second over the device's dense bf16 peak (vit_jax/tpu_planning/chips.py).
Model FLOPs are our model's matmuls (vit_jax/training/flops.py: PaLM's 6N + 12LHQT per token);
the peers' models run the same matmuls (nanodo has no biases, big_vision's ViT the same blocks),
so one count serves each workload's rows.
"""

import argparse
import json
import os
import sys

import jax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import jax_peers  # noqa: E402
from benchmarks import step_memory  # noqa: E402
from benchmarks import step_timing  # noqa: E402
from vit_jax.tpu_planning import pod_table  # noqa: E402

GPT2_FLAGS = dict(pod_table.ROWS)[step_memory.RECIPES["gpt2"]]
VIT_FLAGS = dict(pod_table.ROWS)[step_memory.RECIPES["vit_b16"]]
# Our rows per workload: name -> (flags after the workload's, train.jit_update_step options).
WITHOUT_GUARD = ((), {"guard_nonfinite": False})
OURS = {
    "vit_b16": {
        "ours, the recipe (auto attention: XLA's at 197 tokens)": ((), {}),
        "ours, without the non-finite guard": WITHOUT_GUARD,
    },
    "gpt2": {
        "ours, the recipe (auto attention: cuDNN's)": ((), {}),
        "ours, XLA attention": (("--config.model.attention_impl=xla",), {}),
        "ours, without the non-finite guard": WITHOUT_GUARD,
    },
}


def workloads(quick: bool) -> dict:
  """name -> (unit, items per step, our recipe's flags, peer name, peer builder). `quick`: two
  blocks and small batches (a smoke run of the whole script)."""
  vit_batch = 4 if quick else step_memory.BATCH_PER_CHIP["vit_b16"]
  gpt_batch = 2 if quick else step_memory.BATCH_PER_CHIP["gpt2"]
  depth = 2 if quick else None
  gpt_shape = {**step_memory.GPT2_SHAPE, **({"N": depth} if quick else {})}
  deeper = (f"--config.model.depth={depth}",) if quick else ()
  vit_flags = (*VIT_FLAGS, f"--config.batch_size={vit_batch}", *deeper)
  gpt_flags = (*GPT2_FLAGS, f"--config.batch_size={gpt_batch}", *deeper)
  return {
      "vit_b16": (
          "img/s",
          vit_batch,
          vit_flags,
          "big_vision",
          lambda checkout: jax_peers.big_vision(
              checkout, variant="B/16", batch_size=vit_batch, dtype_mm="bfloat16", depth=depth
          ),
      ),
      "gpt2": (
          "tok/s",
          gpt_batch * gpt_shape["L"],
          gpt_flags,
          "nanodo",
          lambda checkout: jax_peers.nanodo(
              checkout,
              shape=gpt_shape,
              vocab=step_memory.GPT2_VOCAB,
              batch_size=gpt_batch,
              dtype="bfloat16",
              optimizer_overrides=jax_peers.nanodo_optimizer(pod_table.config_of(GPT2_FLAGS, ROOT)),
          ),
      ),
  }


def flops_per_item(config, setup) -> float:
  """Model FLOPs per image (ViT) or per token (GPT): a training example's over its tokens."""
  # pylint: disable=g-import-not-at-top
  from vit_jax.training import flops

  per_example = flops.train_flops_per_example(setup.model_config, setup.task.init_inputs(1))
  return per_example / (config.seq_len if "seq_len" in config else 1)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--quick", action="store_true", help="two blocks, tiny batches: a smoke run")
  parser.add_argument("--only", nargs="+", choices=tuple(workloads(quick=False)), help="these only")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--steps", type=int, default=10, help="steps per row per round")
  parser.add_argument("--json", help="also write the rows here")
  options = parser.parse_args()
  checkouts = {peer: jax_peers.checkout_from_environment(peer) for peer in jax_peers.VARIABLES}
  # pylint: disable-next=g-import-not-at-top
  from vit_jax.training import flops

  device = jax.devices()[0]
  peak, peak_source = flops.peak_flops_per_device()
  print(
      f"{device.device_kind}, jax {jax.__version__}; peak {peak / 1e12:.0f} TFLOP/s ({peak_source})"
  )
  results = {"device": device.device_kind, "jax": jax.__version__, "peak": peak, "workloads": {}}
  for name, (unit, items, flags, peer, build_peer) in workloads(options.quick).items():
    if options.only and name not in options.only:
      continue
    count = {}

    def trainer_step(config, setup, row, step_options):
      # pylint: disable-next=g-import-not-at-top
      from vit_jax.training import train

      count["flops"] = flops_per_item(config, setup)
      return {row: train.jit_update_step(config, setup, **step_options)}

    runners = {}
    for row, (extra, step_options) in OURS[name].items():
      runners.update(
          step_timing.our_runners(
              (*flags, *extra),
              lambda config, setup, row=row, step_options=step_options: trainer_step(
                  config, setup, row, step_options
              ),
          )
      )
    peer_row = f"{peer}, its own step"
    if checkouts[peer]:
      # nanodo's step donates its tokens too: each call gets its own copy.
      runners[peer_row] = step_timing.peer_runner(
          build_peer(checkouts[peer]), fresh_inputs=peer == "nanodo"
      )
    seconds = step_timing.measure(
        runners, warmup=2, rounds=options.rounds, steps=options.steps, pipelined=True
    )
    reference = seconds.get(peer_row)
    print(f"\n{name}: {items} {unit.split('/')[0]} per step, {device.device_kind}\n")
    print(f"| step | ms per step | {unit} | MFU | vs the peer |")
    print("|---|---|---|---|---|")
    rows = {}
    for row, (wall_s, _) in seconds.items():
      rate = items / wall_s
      mfu = rate * count["flops"] / peak
      ratio = f"{reference[0] / wall_s:.2f}x" if reference else "-"
      print(f"| {row} | {wall_s * 1e3:.1f} | {rate:,.0f} | {mfu:.1%} | {ratio} |", flush=True)
      rows[row] = {"ms": wall_s * 1e3, unit: rate, "mfu": mfu}
    results["workloads"][name] = {"items_per_step": items, "flops_per_item": count["flops"], **rows}
  if options.json:
    with open(options.json, "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
