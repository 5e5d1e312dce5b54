"""The trainer (`train.py`, read top to bottom, with its update step) and the parts only it uses:
optimizer, host input and prefetch, metrics log, preemption, device mesh and the sharding rules,
multi-process start-up, FLOPs and parameter counts (flops.py) and training-health metrics."""
