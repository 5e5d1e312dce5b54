"""Image input: TFDS, folders, the embedded digits and synthetic shapes; augmentations; the batch
pipeline."""

from vit_jax import startup

# Every module here uses TF; hide the accelerators before any of them can run a TF op.
startup.hide_accelerators_from_tf()
