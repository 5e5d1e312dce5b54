"""What the trainer's non-finite guard costs per step (issue 13).

  python -m benchmarks.guard_cost [--quick] [--rounds 5]

The guard keeps the old params and optimizer state when a step's loss or gradient norm is not
finite: one `where` per parameter and moment, over the whole state, every step. This builds the
ViT-Ti/16 and GPT steps of `benchmarks.compare` twice, with the guard and without
(`train.update_step(..., guard_nonfinite=False)`), and times them in alternating rounds.
"""

import argparse

# compare loads torchvision before TensorFlow and sets the trainer's XLA flags first.
from benchmarks import compare
from benchmarks import ours


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--quick", action="store_true", help="tiny shapes: a smoke run")
  parser.add_argument("--rounds", type=int, default=5)
  args = parser.parse_args()
  quick = args.quick
  gpt = compare._gpt_ours(compare.GPT_QUICK if quick else compare.GPT)  # pylint: disable=protected-access
  vit = compare._vit_ours("Ti/16", quick)  # pylint: disable=protected-access
  vit_shape = (2, 32) if quick else (32, 224)
  gpt_shape = (2, 16) if quick else (16, 256)
  steps = {
      "vit_ti16_train": lambda guard: ours.vit_train(vit, *vit_shape, guard_nonfinite=guard),
      "gpt_train": lambda guard: ours.gpt_train(gpt, *gpt_shape, guard_nonfinite=guard),
  }
  print(f"{'workload':<16} {'guarded s':>10} {'unguarded s':>12} {'cost':>7}", flush=True)
  for name, make in steps.items():
    seconds = compare.measure(
        lambda make=make: make(True),
        lambda make=make: make(False),
        warmup=1 if quick else 2,
        rounds=1 if quick else args.rounds,
        steps=1 if quick else 3,
    )
    guarded, unguarded = seconds["ours"], seconds["peer"]
    print(
        f"{name:<16} {guarded:>10.3f} {unguarded:>12.3f} {guarded / unguarded - 1:>+6.1%}",
        flush=True,
    )


if __name__ == "__main__":
  main()
