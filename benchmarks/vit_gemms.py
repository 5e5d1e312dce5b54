"""Where the ViT-Ti/16 training step's time goes: its matrix products alone, XLA:CPU vs torch.

  PYTHONPATH=. .venv/bin/python -m benchmarks.vit_gemms [--batch_size 32] [--rounds 5]

A ViT-Ti/16 step at batch 32 and 224 px is almost all matrix products: per block the QKV,
output, MLP-in and MLP-out projections over 32 x 197 tokens (forward, and in the backward pass
the input and weight gradients: each projection three times), plus the per-head score and
value products. This times each of those products alone, fp32, as XLA:CPU compiles `jnp.dot` /
`jnp.einsum` (with the trainer's XLA flags) and as torch runs `torch.mm` / `torch.bmm` on 2
threads, alternating rounds as `benchmarks.compare` does, and sums them over the 12 blocks. If
our sum of products is as far behind torch's as our whole step is behind timm's, the gap is the
matrix-product library, not our model code.
"""

# pylint: disable=g-bad-import-order
import argparse
import statistics
import time

import numpy as np
import torch  # before TensorFlow or JAX's plugins load anything

from vit_jax import startup

startup.set_cpu_xla_defaults()
import jax  # noqa: E402  # pylint: disable=wrong-import-position
import jax.numpy as jnp  # noqa: E402  # pylint: disable=wrong-import-position

torch.set_num_threads(2)
WIDTH, MLP, HEADS, DEPTH, TOKENS = 192, 768, 3, 12, 197


def products(batch: int):
  """[(name, (m, k, n) or (batch, m, k, n), times per step)] of one ViT-Ti/16 training step."""
  m = batch * TOKENS
  head = WIDTH // HEADS
  out = []
  for name, k, n in (("qkv", WIDTH, 3 * WIDTH), ("out", WIDTH, WIDTH), ("mlp_in", WIDTH, MLP)):
    out += [(f"{name} fwd", (m, k, n)), (f"{name} dX", (m, n, k)), (f"{name} dW", (k, m, n))]
  out += [("mlp_out fwd", (m, MLP, WIDTH)), ("mlp_out dX", (m, WIDTH, MLP))]
  out += [("mlp_out dW", (MLP, m, WIDTH))]
  bh = batch * HEADS
  out += [("scores fwd", (bh, TOKENS, head, TOKENS)), ("values fwd", (bh, TOKENS, TOKENS, head))]
  out += [("scores dQ", (bh, TOKENS, TOKENS, head)), ("scores dK", (bh, TOKENS, TOKENS, head))]
  out += [("values dP", (bh, TOKENS, head, TOKENS)), ("values dV", (bh, TOKENS, TOKENS, head))]
  return out


def flops(shape) -> float:
  return 2.0 * float(np.prod(shape))


def runners(shape):
  rng = np.random.default_rng(0)
  if len(shape) == 3:
    m, k, n = shape
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    ours = jax.jit(jnp.dot)
    theirs = torch.mm
  else:
    bh, m, k, n = shape
    a, b = rng.standard_normal((bh, m, k), np.float32), rng.standard_normal((bh, k, n), np.float32)
    ours = jax.jit(lambda x, y: jnp.einsum("bmk,bkn->bmn", x, y))
    theirs = torch.bmm
  ja, jb = jnp.asarray(a), jnp.asarray(b)
  ta, tb = torch.from_numpy(a), torch.from_numpy(b)
  return (lambda: ours(ja, jb).block_until_ready()), (lambda: theirs(ta, tb))


def median_seconds(run_ours, run_theirs, rounds: int, repeats: int):
  for run in (run_ours, run_theirs):
    run()  # compile / warm up
  times = {"ours": [], "torch": []}
  for _ in range(rounds):
    for side, run in (("ours", run_ours), ("torch", run_theirs)):
      start = time.perf_counter()
      for _ in range(repeats):
        run()
      times[side].append((time.perf_counter() - start) / repeats)
  return {side: statistics.median(t) for side, t in times.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  total = {"ours": 0.0, "torch": 0.0}
  print(f"{'product':<13} {'shape':<22} {'ours GFLOP/s':>12} {'torch GFLOP/s':>13} {'ratio':>6}")
  for name, shape in products(args.batch_size):
    seconds = median_seconds(*runners(shape), args.rounds, args.repeats)
    for side in total:
      total[side] += DEPTH * seconds[side]
    rate = {side: flops(shape) / s / 1e9 for side, s in seconds.items()}
    print(
        f"{name:<13} {'x'.join(map(str, shape)):<22} {rate['ours']:>12.1f} "
        f"{rate['torch']:>13.1f} {seconds['torch'] / seconds['ours']:>5.2f}x",
        flush=True,
    )
  print(
      f"\nall products of one step ({DEPTH} blocks): ours {total['ours']:.3f} s, torch "
      f"{total['torch']:.3f} s; ours / torch throughput {total['torch'] / total['ours']:.2f}x"
  )


if __name__ == "__main__":
  main()
