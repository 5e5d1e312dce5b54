"""Train-step time and MFU on one GPU in bf16: ViT-B/16 and GPT-2 124M, our trainer's step beside
the peers as their users run them, in one run on one device: big_vision's and nanodo's own steps
(JAX), and timm's ViT and nanoGPT under torch.compile and eager (PyTorch).

  BIG_VISION=/path/to/big_vision NANODO=/path/to/nanodo NANOGPT=/path/to/nanoGPT \\
      python -m benchmarks.gpu_steps [--only vit_b16 gpt2] [--rounds 5] [--steps 10] [--json F]
  python -m benchmarks.gpu_steps --quick    # two blocks, tiny batches: a smoke run on any device

Workloads, at the recipes' batch per chip (benchmarks/step_memory.py's BATCH_PER_CHIP):
  vit_b16: ViT-B/16, 224 px, batch 256. Ours is the trainer's jitted step for configs/vit.py's
    ImageNet-1k recipe (bf16); big_vision's update_fn for its configs/vit_i1k.py at B/16 with
    bf16 matmuls (`dtype_mm`), as benchmarks/step_memory.py builds it; timm's
    vit_base_patch16_224 as benchmarks/torch_gpu_peers.py runs it.
  gpt2: GPT-2 124M, batch 16 x 1024 tokens. Ours is the trainer's step for configs/gpt.py's gpt2
    recipe; nanodo's trainer step at GPT-2's shape in bf16 with our AdamW and schedule in its
    names (jax_peers.nanodo_optimizer); nanoGPT's model.py with its train.py's defaults.
Our rows: the recipe as published (attention "auto": cuDNN's fused kernel on a GPU in bf16), and
the same with XLA's attention. Every batch looks like data (step_timing.data_like_batch: token ids
over the vocabulary, rows packed with documents, random images and labels). Every row is
compiled (jit with its state donated, or torch.compile) and warmed up first, then timed in
interleaved rounds of `--steps` steps dispatched back to back and waited for at the end
(step_timing.measure, pipelined). Medians. A peer whose checkout variable is unset is left out;
the PyTorch peers run on a CUDA device only. JAX allocates GPU memory as it needs it here
(XLA_PYTHON_CLIENT_PREALLOCATE=false), so PyTorch has room beside it.

MFU: model FLOPs per second over the device's dense bf16 peak (vit_jax/tpu_planning/chips.py).
Model FLOPs are our model's matmuls (vit_jax/training/flops.py: PaLM's 6N + 12LHQT per token);
the peers' models run the same matmuls (nanodo and nanoGPT have no biases, nanoGPT's head 47 more
vocabulary rows, big_vision's and timm's ViT the same blocks), so one count serves each
workload's rows.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # room for the PyTorch peers
import jax  # pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import checkouts  # noqa: E402
from benchmarks import jax_peers  # noqa: E402
from benchmarks import step_memory  # noqa: E402
from benchmarks import step_timing  # noqa: E402
from vit_jax.tpu_planning import pod_table  # noqa: E402

VIT_FLAGS = dict(pod_table.ROWS)[step_memory.RECIPES["vit_b16"]]
XLA_ATTENTION = ("--config.model.attention_impl=xla",)
# Our rows per workload: name -> flags after the workload's.
OURS = {
    "vit_b16": {"ours, the recipe": (), "ours, XLA attention": XLA_ATTENTION},
    "gpt2": {"ours, the recipe": (), "ours, XLA attention": XLA_ATTENTION},
}


def workloads(quick: bool) -> dict:
  """name -> (unit, items per step, our recipe's flags, {peer row: (checkout's peer or None,
  builder of its runner from the checkout)}). `quick`: two blocks, small batches, 64 tokens of a
  512-id vocabulary, 64 px images."""
  # pylint: disable=g-import-not-at-top  (torch only where its peers run)
  vit_batch = 4 if quick else step_memory.BATCH_PER_CHIP["vit_b16"]
  gpt_batch = 2 if quick else step_memory.BATCH_PER_CHIP["gpt2"]
  depth = 2 if quick else None
  image_size, vocab = (64, 512) if quick else (224, step_memory.GPT2_VOCAB)
  gpt_shape = {**step_memory.GPT2_SHAPE, **({"N": depth, "L": 64} if quick else {})}
  smaller = () if not quick else (f"--config.model.depth={depth}",)
  vit_flags = (*VIT_FLAGS, f"--config.batch_size={vit_batch}", *smaller)
  gpt_flags = (*step_memory.GPT2_FLAGS, f"--config.batch_size={gpt_batch}", *smaller)
  if quick:
    vit_flags += (f"--config.image_size={image_size}",)
    gpt_flags += (f"--config.seq_len={gpt_shape['L']}", f"--config.tokenizer.vocab_size={vocab}")

  def torch_peer(name, **kwargs):
    def build(checkout):
      from benchmarks import torch_gpu_peers

      if name == "nanoGPT":
        return torch_gpu_peers.nanogpt_step(
            checkout, gpt_batch, gpt_shape["L"], depth=depth, **kwargs
        )
      return torch_gpu_peers.timm_vit_step(vit_batch, depth=depth, image_size=image_size, **kwargs)

    return build

  return {
      "vit_b16": (
          "img/s",
          vit_batch,
          vit_flags,
          {
              "big_vision, its own step": (
                  "big_vision",
                  lambda checkout: step_timing.peer_runner(
                      jax_peers.big_vision(
                          checkout,
                          variant="B/16",
                          batch_size=vit_batch,
                          image_size=image_size,
                          dtype_mm="bfloat16",
                          depth=depth,
                      )
                  ),
              ),
              "timm, torch.compile": (None, torch_peer("timm", compiled=True)),
              "timm, eager": (None, torch_peer("timm", compiled=False)),
          },
      ),
      "gpt2": (
          "tok/s",
          gpt_batch * gpt_shape["L"],
          gpt_flags,
          {
              # nanodo's step donates its tokens too: each call gets its own copy.
              "nanodo, its own step": (
                  "nanodo",
                  lambda checkout: step_timing.peer_runner(
                      jax_peers.nanodo(
                          checkout,
                          shape=gpt_shape,
                          vocab=vocab,
                          batch_size=gpt_batch,
                          dtype="bfloat16",
                          optimizer_overrides=step_memory.gpt2_nanodo_optimizer(),
                      ),
                      fresh_inputs=True,
                  ),
              ),
              "nanoGPT, torch.compile": ("nanoGPT", torch_peer("nanoGPT", compiled=True)),
              "nanoGPT, eager": ("nanoGPT", torch_peer("nanoGPT", compiled=False)),
          },
      ),
  }


def flops_per_item(config, setup) -> float:
  """Model FLOPs per image (ViT) or per token (GPT): a training example's over its tokens."""
  # pylint: disable=g-import-not-at-top
  from vit_jax.training import flops

  per_example = flops.train_flops_per_example(setup.model_config, setup.task.init_inputs(1))
  return per_example / (config.seq_len if "seq_len" in config else 1)


def versions() -> dict:
  """The versions the figures depend on: JAX's stack, and PyTorch's where it is installed."""
  # pylint: disable=g-import-not-at-top
  import importlib.metadata

  found = {}
  for package in ("jax", "jaxlib", "flax", "optax", "torch", "timm"):
    try:
      found[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      pass
  if "torch" in found:
    import torch

    found["torch CUDA"] = torch.version.cuda
    found["torch cuDNN"] = torch.backends.cudnn.version()
  return found


def torch_gpu() -> bool:
  """Whether the PyTorch peers can run: torch installed, with a CUDA device."""
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  return torch.cuda.is_available()


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--quick", action="store_true", help="two blocks, tiny batches: a smoke run")
  parser.add_argument("--only", nargs="+", choices=tuple(workloads(quick=False)), help="these only")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--steps", type=int, default=10, help="steps per row per round")
  parser.add_argument("--json", help="also write the rows here")
  options = parser.parse_args()
  peer_checkouts = {peer: checkouts.checkout_from_environment(peer) for peer in checkouts.VARIABLES}
  # pylint: disable-next=g-import-not-at-top
  from vit_jax.training import flops

  device = jax.devices()[0]
  peak, peak_source = flops.peak_flops_per_device()
  found = versions()
  print(f"{device.device_kind}; peak {peak / 1e12:.0f} TFLOP/s ({peak_source})")
  print(", ".join(f"{k} {v}" for k, v in found.items()), flush=True)
  results = {"device": device.device_kind, "versions": found, "peak": peak, "workloads": {}}
  with_torch = torch_gpu()
  for name, (unit, items, flags, peers) in workloads(options.quick).items():
    if options.only and name not in options.only:
      continue
    count = {}

    def trainer_step(config, setup, row):
      # pylint: disable-next=g-import-not-at-top
      from vit_jax.training import train

      count["flops"] = flops_per_item(config, setup)
      return {row: train.jit_update_step(config, setup)}

    runners = {}
    for row, extra in OURS[name].items():
      runners.update(
          step_timing.our_runners(
              (*flags, *extra),
              lambda config, setup, row=row: trainer_step(config, setup, row),
          )
      )
    for row, (checkout_of, build) in peers.items():
      is_torch = checkout_of is None or checkout_of == "nanoGPT"
      if (is_torch and not with_torch) or (checkout_of and not peer_checkouts[checkout_of]):
        print(f"{name}: {row} left out (no CUDA device for PyTorch, or no checkout)", flush=True)
        continue
      runners[row] = build(peer_checkouts.get(checkout_of))
    seconds = step_timing.measure(
        runners, warmup=2, rounds=options.rounds, steps=options.steps, pipelined=True
    )
    ours_s = seconds[next(iter(OURS[name]))][0]
    print(f"\n{name}: {items} {unit.split('/')[0]} per step, {device.device_kind}\n")
    print(f"| step | ms per step | {unit} | MFU | ours / this row |")
    print("|---|---|---|---|---|")
    rows = {}
    for row, (wall_s, _) in seconds.items():
      rate = items / wall_s
      mfu = rate * count["flops"] / peak
      ratio = f"{wall_s / ours_s:.2f}x"  # > 1: the recipe's step is that much faster
      print(f"| {row} | {wall_s * 1e3:.1f} | {rate:,.0f} | {mfu:.1%} | {ratio} |", flush=True)
      rows[row] = {"ms": wall_s * 1e3, unit: rate, "mfu": mfu}
    results["workloads"][name] = {"items_per_step": items, "flops_per_item": count["flops"], **rows}
  if options.json:
    with open(options.json, "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
