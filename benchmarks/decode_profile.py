"""What one greedy decoding step costs per generated token, by batch size.

  python -m benchmarks.decode_profile                      # per-token ms at batch 1, 2, 4, 8
  python -m benchmarks.op_profile gpt_decode_b8            # where a batch-8 call's time goes

The model and prompts are `benchmarks.compare`'s GPT decode workload (6 x 384, vocab 8,192,
32-token prompts). Per-token cost is the difference between a call making 128 new tokens and one
making 8, over 120 (best of 3 calls each), so prefill, the one host sync and call overheads cancel.
"""

import argparse
import time

# compare loads torchvision before TensorFlow and sets the trainer's XLA flags first.
from benchmarks import compare
from benchmarks import ours

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


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8])
  args = parser.parse_args()
  print(f"{'batch':>5} {'8 new ms':>9} {'128 new ms':>11} {'ms/token':>9}")
  for batch in args.batches:
    short, long = best_call_seconds(batch, 8), best_call_seconds(batch, 128)
    per_token = (long - short) / 120
    print(f"{batch:>5} {short * 1e3:>9.1f} {long * 1e3:>11.1f} {per_token * 1e3:>9.2f}", flush=True)


if __name__ == "__main__":
  main()
