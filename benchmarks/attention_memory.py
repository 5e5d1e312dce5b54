"""Peak memory of attention forward + backward: einsum reference vs chunked (XLA's plan, not run).

  python benchmarks/attention_memory.py [--lengths 1024 4096 16384] [--heads 12 --head_dim 64]

Compiles grad(sum(attention(q, k, v))) for one causal sequence and prints the temporaries and
arguments XLA plans for it. Einsum materializes (H, T, T) logits and weights, so it grows with
T^2; chunked keeps (H, T, chunk) at a time and only O(T) residuals, so it grows with T.
"""

import argparse
import json

import jax
import jax.numpy as jnp

from vit_jax.models import attention
from vit_jax.models import chunked_attention
from vit_jax.models import masks


def peak_bytes(impl: str, length: int, heads: int, head_dim: int, chunk: int) -> int:
  """Temporaries + arguments + outputs of the compiled fwd+bwd at batch 1."""
  if impl == "einsum":
    fn = lambda q, k, v: attention.einsum_attention(q, k, v, masks.causal_mask(length, 1))[0]
  else:
    fn = lambda q, k, v: chunked_attention.chunked_attention(q, k, v, causal=True, chunk_size=chunk)
  loss = lambda q, k, v: jnp.sum(fn(q, k, v))
  x = jax.ShapeDtypeStruct((1, length, heads, head_dim), jnp.float32)
  stats = jax.jit(jax.grad(loss, (0, 1, 2))).lower(x, x, x).compile().memory_analysis()
  return stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
  parser.add_argument("--heads", type=int, default=12)
  parser.add_argument("--head_dim", type=int, default=64)
  parser.add_argument("--chunk", type=int, default=512)
  parser.add_argument("--json", help="also write the results to this file")
  args = parser.parse_args()
  print(
      f"causal attention fwd+bwd, batch 1, {args.heads} heads x {args.head_dim}, "
      f"{jax.devices()[0].device_kind}"
  )
  print(f"{'length':>7} {'einsum MiB':>11} {'chunked MiB':>12} {'ratio':>7}")
  rows = []
  for length in args.lengths:
    mib = {
        impl: peak_bytes(impl, length, args.heads, args.head_dim, args.chunk) / 2**20
        for impl in ("einsum", "chunked")
    }
    rows.append({"length": length, **mib})
    print(
        f"{length:>7} {mib['einsum']:>11.1f} {mib['chunked']:>12.1f} "
        f"{mib['einsum'] / mib['chunked']:>6.1f}x",
        flush=True,
    )
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=2)


if __name__ == "__main__":
  main()
