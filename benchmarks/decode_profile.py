"""What one greedy decoding step costs per generated token, by batch size.

  python -m benchmarks.decode_profile                      # per-token ms at batch 1, 2, 4, 8
  python -m benchmarks.op_profile gpt_decode_b8            # where a batch-8 call's time goes
  python -m benchmarks.decode_profile --attention          # one decode step's attention alone

The model and prompts are `benchmarks.compare`'s GPT decode workload (6 x 384, vocab 8,192,
32-token prompts). Per-token cost is the difference between a call making 128 new tokens and one
making 8, over 120 (best of 3 calls each), so prefill, the one host sync and call overheads cancel.
`--attention` times `attention.xla_attention` of one query per row over a head-major cache (as
the decoder's), the Llama row's 6 query heads of 64 over 2 and over 6 key-value heads, beside the
grouped products written as matrix products (einsum), by cache length.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

# compare loads torchvision before TensorFlow and sets the trainer's XLA flags first.
from benchmarks import compare
from benchmarks import ours
from vit_jax.models import attention

CONFIG = compare._gpt_ours(compare.GPT)  # pylint: disable=protected-access
PROMPT = 32


def best_call_seconds(batch: int, new_tokens: int, calls: int = 3) -> float:
  run = ours.gpt_decode(CONFIG, batch, PROMPT, new_tokens)
  run()  # compile
  times = []
  for _ in range(calls):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  return min(times)


def grouped_as_matrix_products(q_Bx1xHxK, k_BxSxGxK, v_BxSxGxK, mask_Bx1x1xS):
  """The grouped attention as batched matrix products, R query heads per key-value head, the
  einsums xla_attention gives more than one query: XLA:CPU runs them R columns wide, slowly."""
  batch, q_len, heads, head_dim = q_Bx1xHxK.shape
  kv_len, kv_heads = k_BxSxGxK.shape[1], k_BxSxGxK.shape[2]
  q_BxTxGxRxK = q_Bx1xHxK.reshape(batch, q_len, kv_heads, heads // kv_heads, head_dim)
  logits = jnp.einsum("btgrk,bsgk->bgrts", q_BxTxGxRxK * head_dim**-0.5, k_BxSxGxK)
  logits_BxHxTxS = logits.reshape(batch, heads, q_len, kv_len)
  logits_BxHxTxS = jnp.where(mask_Bx1x1xS, logits_BxHxTxS, jnp.finfo(jnp.float32).min)
  probs = jax.nn.softmax(logits_BxHxTxS, axis=-1).reshape(logits.shape)
  return jnp.einsum("bgrts,bsgk->btgrk", probs, v_BxSxGxK).reshape(q_Bx1xHxK.shape)


def attention_microseconds(attend, kv_heads, slots, batch=8, heads=6, head_dim=64, calls=20):
  """Best of 5 rounds of `calls` calls, microseconds per call (dispatch included)."""
  rng = np.random.default_rng(0)
  q_Bx1xHxK = jnp.asarray(rng.standard_normal((batch, 1, heads, head_dim)), jnp.float32)
  # Head-major, as the decoder stores it; the function sees the (B, S, G, K) view.
  k_BxGxSxK, v_BxGxSxK = (
      jnp.asarray(rng.standard_normal((batch, kv_heads, slots, head_dim)), jnp.float32)
      for _ in range(2)
  )
  mask_Bx1x1xS = jnp.broadcast_to(jnp.arange(slots) < slots - 10, (batch, 1, 1, slots))
  step = jax.jit(lambda q, k, v, m: attend(q, jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2), m))
  args = (q_Bx1xHxK, k_BxGxSxK, v_BxGxSxK, mask_Bx1x1xS)
  step(*args).block_until_ready()
  best = float("inf")
  for _ in range(5):
    start = time.perf_counter()
    for _ in range(calls):
      out = step(*args)
    out.block_until_ready()
    best = min(best, (time.perf_counter() - start) / calls)
  return best * 1e6


def print_attention(slot_counts):
  print(f"{'slots':>5} {'GQA (2) us':>11} {'MHA (6) us':>11} {'GQA as einsum us':>17}")
  for slots in slot_counts:
    grouped = attention_microseconds(attention.xla_attention, 2, slots)
    full = attention_microseconds(attention.xla_attention, 6, slots)
    einsum = attention_microseconds(grouped_as_matrix_products, 2, slots)
    print(f"{slots:>5} {grouped:>11.0f} {full:>11.0f} {einsum:>17.0f}", flush=True)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8])
  parser.add_argument("--attention", action="store_true", help="time one step's attention alone")
  parser.add_argument("--slots", type=int, nargs="+", default=[160, 1024])
  args = parser.parse_args()
  if args.attention:
    print_attention(args.slots)
    return
  print(f"{'batch':>5} {'8 new ms':>9} {'128 new ms':>11} {'ms/token':>9}")
  for batch in args.batches:
    short, long = best_call_seconds(batch, 8), best_call_seconds(batch, 128)
    per_token = (long - short) / 120
    print(f"{batch:>5} {short * 1e3:>9.1f} {long * 1e3:>11.1f} {per_token * 1e3:>9.2f}", flush=True)


if __name__ == "__main__":
  main()
