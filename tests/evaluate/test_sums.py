"""An evaluator's sums over batches are exact however many tokens it counts."""

import jax.numpy as jnp
import numpy as np

from vit_jax.evaluate import base


def test_sums_count_past_float32_and_int32():
  # One batch's sums come from the device in float32 / int32; their total does not.
  sums = base.add_sums(None, {"tokens": jnp.float32(2**24), "correct": jnp.int32(2**31 - 1)})
  for _ in range(3):
    sums = base.add_sums(sums, {"tokens": jnp.float32(1), "correct": jnp.int32(1)})
  assert sums["tokens"] == 2**24 + 3  # float32: 2**24 + 1 rounds back to 2**24
  assert sums["correct"] == 2**31 + 2  # int32: wraps negative
  assert sums["correct"].dtype == np.int64 and sums["tokens"].dtype == np.float64
