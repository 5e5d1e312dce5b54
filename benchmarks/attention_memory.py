"""Peak memory of attention forward + backward: einsum reference vs chunked (XLA's plan, not run).

  python benchmarks/attention_memory.py [--lengths 1024 4096 16384] [--heads 12 --head_dim 64]
  python benchmarks/attention_memory.py --model gpt2 [--depth 12] [--document 1024]

Prints the temporaries + arguments + outputs XLA plans for the compiled function, per length.
Without --model: grad(sum(attention(q, k, v))) for one causal sequence. Einsum materializes
(H, T, T) logits and weights, so it grows with T^2; chunked keeps (H, T, chunk) at a time and only
O(T) residuals, so it grows with T. With --model: value_and_grad of the next-token loss of a whole
GPT (preset shape, `--depth` layers) on one packed row of `--document`-token documents (segment
ids), its masks passed from the model by their parts (masks.MaskSpec).
"""

import argparse
import json

import jax
import jax.numpy as jnp
import optax

from vit_jax.models import attention
from vit_jax.models import build_model
from vit_jax.models import chunked_attention
from vit_jax.models import masks


def planned_bytes(fn, *args) -> dict:
  """XLA's memory plan of jit(fn)(*args) (abstract args): temporaries, and the peak in all."""
  stats = jax.jit(fn).lower(*args).compile().memory_analysis()
  temp = stats.temp_size_in_bytes
  return {"temp": temp, "peak": temp + stats.argument_size_in_bytes + stats.output_size_in_bytes}


def attention_bytes(impl: str, length: int, heads: int, head_dim: int, chunk: int) -> dict:
  """Causal attention fwd+bwd at batch 1."""
  if impl == "einsum":
    fn = lambda q, k, v: attention.einsum_attention(q, k, v, masks.causal_mask(length, 1))[0]
  else:
    fn = lambda q, k, v: chunked_attention.chunked_attention(q, k, v, causal=True, chunk_size=chunk)
  loss = lambda q, k, v: jnp.sum(fn(q, k, v))
  x = jax.ShapeDtypeStruct((1, length, heads, head_dim), jnp.float32)
  return planned_bytes(jax.grad(loss, (0, 1, 2)), x, x, x)


def gpt_bytes(impl: str, length: int, variant: str, depth: int, vocab: int, document: int) -> dict:
  """A whole GPT's next-token loss and parameter gradients on one packed row (batch 1)."""
  config = {"name": "gpt", "variant": variant, "vocab_size": vocab, "max_len": length}
  model = build_model({**config, "depth": depth, "attention_impl": impl})
  row = lambda dtype: jax.ShapeDtypeStruct((1, length), dtype)
  params = jax.eval_shape(model.init, jax.random.PRNGKey(0), row(jnp.int32))["params"]

  def loss(params, tokens_BxT):
    index_T = jnp.arange(length)
    positions_BxT = (index_T % document)[None]  # each document starts at position 0
    segments_BxT = (index_T // document + 1)[None]
    logits_BxTxV = model.apply({"params": params}, tokens_BxT, positions_BxT, segments_BxT)
    next_BxT = jnp.roll(tokens_BxT, -1, axis=1)
    return optax.softmax_cross_entropy_with_integer_labels(logits_BxTxV, next_BxT).mean()

  return planned_bytes(jax.value_and_grad(loss), params, row(jnp.int32))


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
  parser.add_argument("--heads", type=int, default=12)
  parser.add_argument("--head_dim", type=int, default=64)
  parser.add_argument("--chunk", type=int, default=512)
  parser.add_argument("--model", help="a GPT preset (gpt2, pico, ...): plan the whole model")
  parser.add_argument("--depth", type=int, default=12, help="GPT layers (with --model)")
  parser.add_argument("--vocab", type=int, default=50257, help="GPT vocabulary (with --model)")
  parser.add_argument("--document", type=int, default=1024, help="packed document length")
  parser.add_argument("--json", help="also write the results to this file")
  args = parser.parse_args()
  device = jax.devices()[0].device_kind
  if args.model:
    print(
        f"GPT {args.model}, {args.depth} layers, vocab {args.vocab}, loss + grads, batch 1, "
        f"packed {args.document}-token documents, {device}"
    )
    measure = lambda impl, n: gpt_bytes(impl, n, args.model, args.depth, args.vocab, args.document)
  else:
    print(f"causal attention fwd+bwd, batch 1, {args.heads} heads x {args.head_dim}, {device}")
    measure = lambda impl, n: attention_bytes(impl, n, args.heads, args.head_dim, args.chunk)
  print(f"{'length':>7} {'einsum MiB':>11} {'chunked MiB':>12} {'ratio':>7}  temporaries MiB")
  rows = []
  for length in args.lengths:
    mib = {impl: measure(impl, length) for impl in ("einsum", "chunked")}
    mib = {impl: {k: v / 2**20 for k, v in plan.items()} for impl, plan in mib.items()}
    rows.append({"length": length, **mib})
    einsum, chunked = mib["einsum"], mib["chunked"]
    print(
        f"{length:>7} {einsum['peak']:>11.1f} {chunked['peak']:>12.1f} "
        f"{einsum['peak'] / chunked['peak']:>6.1f}x "
        f" {einsum['temp']:.1f} / {chunked['temp']:.1f}",
        flush=True,
    )
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=2)


if __name__ == "__main__":
  main()
