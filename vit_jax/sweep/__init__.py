"""Scaling sweeps: expand a sweep file into `vit_jax.main` runs, run them, collect their metrics,
fit saturating power laws (Zhai et al., 2022) and the compute-optimal model size (Hoffmann et al.,
2022), and plot them.

  spec       sweep files -> named runs (grid x list), the sweep's identity
  checks     every run's overrides checked against its base config before anything runs
  budget     a run's total_steps from a compute budget (IsoFLOP sweeps), before anything runs
  runner     the sweep root, running / skipping / resuming runs, --print_commands
  collect    run dirs -> runs.csv (one row per run) and evals.csv (one row per eval point)
  powerlaw   error = a (x + d)^-b + c by nonlinear least squares, bootstrap intervals
  joint      L(N, D) = E + A / N^alpha + B / D^beta (Huber, L-BFGS), N*(C) and D*(C) from it
  isoflop    per budget a parabola of loss in log N and its minimum; N_opt = G C^a
  fits       which points each fit uses (the compute frontier, data and model axes) -> fit.json
  plots      the PNGs

The command line is `python -m vit_jax.sweep` (see vit_jax/sweep/__main__.py).
"""
