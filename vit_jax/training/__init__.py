"""The trainer (`train.py`, read top to bottom) and the parts only it uses: the update step,
optimizer, host input and prefetch, metrics log, preemption, device mesh and partitioning rules,
multi-process start-up, FLOP accounting and the CPU XLA flags."""
