"""A sweep small enough to check the wiring in a few minutes: two tiny char-level GPTs.

Each run trains 12 steps of 8 x 64 characters of the embedded corpus at a high learning rate and
evaluates every 2 steps on two batches: the loss falls from the uniform ln(vocabulary) towards
the character frequencies, enough eval points for the compute fit's frontier. The numbers mean
nothing; scripts/smoke_base_install.sh runs it to check run, collect, fit and plot:

  python -m vit_jax.sweep all experiments/sweeps/smoke_cpu.py --root=workdirs/smoke_sweep
"""

import ml_collections


def get_sweep():
  return ml_collections.ConfigDict(
      dict(
          config="configs/gpt.py:variant=pico",
          fixed={
              "model.depth": 1,
              "seq_len": 64,
              "batch_size": 8,
              "total_steps": 12,
              "log_every": 2,
              "eval_every": 2,
              "eval_max_batches": 2,
              "checkpoint_every": 12,
              "optimizer.lr": 1e-2,
              "optimizer.warmup_steps": 2,
              "progress": "lines",
          },
          runs=[{"model.width": w, "model.num_heads": 2} for w in (16, 32)],
          name="w{model.width}",
          metric="loss",
          fits=("compute",),
      ),
      allow_dotted_keys=True,
  )
