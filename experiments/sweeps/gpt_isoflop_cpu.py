"""IsoFLOP profiles of a char-level GPT on the embedded corpus (Hoffmann et al. 2022, approach 2).

Three training-compute budgets, half a decade apart; each trains five model sizes on exactly its
budget, so a run's total_steps is its budget over its model's training FLOPs per step (the
trainer's own count, `vit_jax.sweep.budget.steps_for_budget`). Each budget's window of sizes sits
one rung higher on the ladder than the last, around where its optimum falls. `fit` then reads the
compute-optimal model size off two ways: the minimum of a parabola in log N per budget (isoflop)
and the joint law L(N, D) = E + A / N^alpha + B / D^beta over all 15 runs (joint). Runs on 2 CPU
cores:

  python -m vit_jax.sweep all experiments/sweeps/gpt_isoflop_cpu.py --root=workdirs/gpt_isoflop \
      --out=experiments/results/gpt_isoflop_cpu

The models are 1-layer GPTs 8 to 64 wide (heads of 16 channels, 1.8k to 58k parameters) with RoPE:
with learned positions these tiny models sit on a plateau near 3.9 bits per character for their
first 2 to 3 million characters (they must first learn to find the previous character), which
hides how loss trades against size. The vocabulary is set to the corpus's 110 characters plus the
7 specials so the FLOPs are counted without reading the corpus. Measured:
experiments/results/gpt_isoflop_cpu/README.md.
"""

import ml_collections

from vit_jax.sweep import budget

CONFIG = "configs/gpt.py:dataset=embedded,variant=pico"
BUDGETS_FLOPS = (10**11, 10**11.5, 10**12)
WIDTHS = (8, 12, 16, 24, 32, 48, 64)  # the ladder: about 1.6x to 2x more parameters a rung
SIZES_PER_BUDGET = 5
WARMUP_STEPS = 30
FIXED = {
    "model.depth": 1,
    "model.posemb": "rope",
    "tokenizer.vocab_size": 117,
    "optimizer.lr": 3e-3,
    # GPT-2's initialization, as the results were measured, fixed here rather than taken from the
    # config's CPU default (Xavier weights).
    "model.kernel_init": "normal",
    "model.scale_residual_init": True,
    "optimizer.warmup_steps": WARMUP_STEPS,
    "eval_max_batches": 100,  # the whole validation split (64 batches)
    "progress": "lines",
}


def get_sweep():
  runs = []
  for i, budget_flops in enumerate(BUDGETS_FLOPS):
    for width in WIDTHS[i : i + SIZES_PER_BUDGET]:
      model = {"model.width": width, "model.num_heads": max(1, width // 16)}
      steps = budget.steps_for_budget(
          CONFIG, {**FIXED, **model}, budget_flops, run=f"c{budget_flops:.3g}-w{width}"
      )
      every = max(1, steps // 4)  # four evals a run: its curve on compute.png
      runs.append(
          {
              **model,
              "budget_flops": budget_flops,
              "total_steps": steps,
              "eval_every": every,
              "log_every": every,
              "checkpoint_every": steps,
          }
      )
  return ml_collections.ConfigDict(
      dict(
          config=CONFIG,
          fixed=FIXED,
          runs=runs,
          name="c{budget_flops:.3g}-w{model.width}",
          metric="bits_per_char",
          fits=("compute", "joint", "isoflop"),
      ),
      allow_dotted_keys=True,
  )
