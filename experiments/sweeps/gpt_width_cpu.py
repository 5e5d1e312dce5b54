"""Char-level GPT width sweep on the embedded corpus: validation bits per character vs compute.

Four widths of a 2-layer GPT (heads of 32 channels), each trained on the embedded corpus
(configs/gpt.py, character tokenizer) and evaluated every 50 steps, so every run adds a curve
of eval points along the compute axis; the fit is made to their frontier. Runs on 2 CPU cores:

  python -m vit_jax.sweep all experiments/sweeps/gpt_width_cpu.py --root=workdirs/gpt_width \
      --out=experiments/results/gpt_width_cpu

Measured: experiments/results/gpt_width_cpu/README.md.
"""

import ml_collections

WIDTHS = (32, 64, 128, 192)
STEPS = 600


def get_sweep():
  return ml_collections.ConfigDict(
      dict(
          config="configs/gpt.py:dataset=embedded,variant=pico",
          fixed={
              "model.depth": 2,
              "total_steps": STEPS,
              "eval_every": 50,
              "eval_max_batches": 20,
              "log_every": 50,
              "checkpoint_every": 300,
              "optimizer.warmup_steps": 50,
              # The recipe the results were measured with, fixed here rather than taken from the
              # config's CPU default (Xavier weights at lr 3e-3): GPT-2's initialization, lr 2e-3.
              "model.kernel_init": "normal",
              "model.scale_residual_init": True,
              "optimizer.lr": 2e-3,
          },
          runs=[{"model.width": w, "model.num_heads": max(1, w // 32)} for w in WIDTHS],
          name="w{model.width}",
          metric="bits_per_char",
          fits=("compute",),
      ),
      allow_dotted_keys=True,
  )
