"""Planning a TPU job on any machine, before a pod hour is spent: the trainer's step compiled ahead
of time for a slice with libtpu (aot.py), the chips' published figures (chips.py), the
collectives read from the compiled HLO (collectives.py), and docs/pod.md's table of the paper
recipes on their slices (pod_table.py). `python -m vit_jax.compile` is the command; the trainer
itself imports this package only for its compile report and MFU peak."""
