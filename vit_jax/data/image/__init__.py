"""Image input: TFDS, folders, the embedded digits and synthetic shapes; augmentations; the batch
pipeline."""

from vit_jax import startup

# Every module here uses TF; hide the accelerators before any of them can run a TF op.
startup.hide_accelerators_from_tf()


def no_autograph(fn):
  """`fn`, for tf.data to trace as written. Our tf.data functions branch on Python values only
  (the config's switches, loops over a layer count), never on a tensor, so AutoGraph's rewrite of
  them, which TF otherwise redoes for each function in each process, changes no graph: it took
  1.8 of the 14 CPU-seconds of a 2-step run of configs/vit.py:runlocal. A tensor in an `if`
  raises at trace time instead of becoming a tf.cond: write tf.cond where one is meant."""
  return startup.import_tensorflow().autograph.experimental.do_not_convert(fn)
