"""A CNN that can only see locally: `depth` 3x3 convolutions (stride 1, ReLU), global average
pooling, a linear head. The reference model for what locality costs (experiments/locality.py).

Receptive field: 2 x depth + 1 pixels square. Each conv widens what an output position sees by one
pixel on every side, nothing else does (no stride, pooling, normalization or attention across
positions), so the pooled features are the mean over positions u of a function f_u of the
(2 depth + 1)^2 input window centred on u. Zero padding ("SAME") lets f_u depend on how near u is
to the border, never on pixels outside its window. With a linear head the logits are therefore a
sum of one term per window: when no window holds a pixel of two objects, the logits are a sum of
a term per object and a term of the rest, whatever the weights (tests/models/test_local_cnn.py
checks it to float rounding). The pool must be an average for this: a max over windows of
per-object features would tell, e.g., how many different colours the image holds.
"""

from typing import Optional

import flax.linen as nn
import jax.numpy as jnp

from vit_jax import errors

KERNEL = 3


def receptive_field(depth: int) -> int:
  """Side, in pixels, of the input window one output position of `depth` 3x3 convs sees."""
  return depth * (KERNEL - 1) + 1


class LocalCNN(nn.Module):
  """`depth` x (3x3 conv, ReLU) -> global average pool -> linear head.

  Attributes:
    num_classes: head outputs; 0 or None for no head (returns the pooled features).
    depth: conv layers; the receptive field is 2 x depth + 1 pixels.
    width: channels of every conv.
    head_bias_init: initial bias of the head (its kernel starts LeCun-normal, not zero).
  """

  num_classes: Optional[int] = 1000
  depth: int = 4
  width: int = 32
  head_bias_init: float = 0.0
  dtype: str = "float32"
  param_dtype: str = "float32"

  @nn.compact
  def __call__(self, images_BxHxWxC, train: bool = False):
    del train  # no dropout or batch statistics
    if self.depth < 1 or self.width < 1:
      raise errors.ConfigError(
          f"LocalCNN depth={self.depth} and width={self.width} must be at least 1."
      )
    if images_BxHxWxC.ndim != 4:
      raise errors.ConfigError(
          f"Expected images (batch, height, width, channels), got shape {images_BxHxWxC.shape}."
      )
    x_BxHxWxD = images_BxHxWxC.astype(jnp.dtype(self.dtype))
    for i in range(self.depth):
      conv = nn.Conv(
          self.width,
          (KERNEL, KERNEL),
          padding="SAME",
          dtype=jnp.dtype(self.dtype),
          param_dtype=jnp.dtype(self.param_dtype),
          name=f"conv{i + 1}",
      )
      x_BxHxWxD = nn.relu(conv(x_BxHxWxD))
    x_BxD = jnp.mean(x_BxHxWxD, axis=(1, 2))
    if not self.num_classes:
      return x_BxD
    # Not the zero head of layers.classifier_head: with a zero head the convs get no gradient,
    # and where no single feature predicts the label at init (same or different colour) the
    # run waits on noise to move the head first (a width-48 run never left 50% in 2,000 steps).
    head = nn.Dense(
        self.num_classes,
        dtype=jnp.float32,
        param_dtype=jnp.dtype(self.param_dtype),
        bias_init=nn.initializers.constant(self.head_bias_init),
        name="head",
    )
    return head(x_BxD).astype(jnp.float32)
