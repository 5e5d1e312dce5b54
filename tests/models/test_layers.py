"""The small building blocks against NumPy: activations, the MLP block, stochastic depth, the patch
stem's errors and the zero-initialized class head."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax import errors
from vit_jax.models import layers

X = np.linspace(-3.0, 3.0, 13, dtype=np.float32)


def test_activations_follow_their_formulas():
  erf = np.vectorize(math.erf)
  exact = 0.5 * X * (1 + erf(X / np.sqrt(2)))
  tanh = 0.5 * X * (1 + np.tanh(np.sqrt(2 / np.pi) * (X + 0.044715 * X**3)))
  np.testing.assert_allclose(layers.activation("gelu")(X), exact, atol=1e-6)
  np.testing.assert_allclose(layers.activation("gelu_tanh")(X), tanh, atol=1e-6)
  np.testing.assert_array_equal(layers.activation("relu")(X), np.maximum(X, 0))
  with pytest.raises(errors.ConfigError, match="Unknown activation 'swish'"):
    layers.activation("swish")


@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_mlp_block_is_dense_activation_dense(activation):
  x_BxLxD = jax.random.normal(jax.random.PRNGKey(0), (2, 3, 4))
  block = layers.MlpBlock(mlp_dim=8, out_dim=5, activation=activation)
  params = block.init(jax.random.PRNGKey(1), x_BxLxD)["params"]
  assert params["Dense_0"]["kernel"].shape == (4, 8) and params["Dense_1"]["kernel"].shape == (8, 5)
  params = jax.tree.map(lambda p: p + 0.1, params)  # biases start near zero
  first, second = params["Dense_0"], params["Dense_1"]
  hidden = layers.ACTIVATIONS[activation](np.asarray(x_BxLxD) @ first["kernel"] + first["bias"])
  expected = np.asarray(hidden) @ second["kernel"] + second["bias"]
  out = block.apply({"params": params}, x_BxLxD)
  np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
  # Without out_dim the block maps back to the input width.
  same = layers.MlpBlock(mlp_dim=8).init(jax.random.PRNGKey(1), x_BxLxD)["params"]
  assert same["Dense_1"]["kernel"].shape == (8, 4)


def test_mlp_dropout_acts_only_in_training():
  x_BxLxD = jnp.ones((2, 3, 4))
  block = layers.MlpBlock(mlp_dim=64, dropout_rate=0.5)
  params = block.init(jax.random.PRNGKey(1), x_BxLxD)
  eval_out = block.apply(params, x_BxLxD)
  np.testing.assert_array_equal(eval_out, block.apply(params, x_BxLxD, deterministic=True))
  train_out = block.apply(
      params, x_BxLxD, deterministic=False, rngs={"dropout": jax.random.PRNGKey(2)}
  )
  # The hidden dropout (after the activation) changes the output; the output itself is not
  # dropped here (the residual branch drops it once), so no output is zeroed.
  assert not np.allclose(train_out, eval_out)
  assert (np.asarray(train_out) == 0).mean() == 0


def test_drop_path_drops_whole_samples_and_rescales_the_kept_ones():
  x_BxLxD = jnp.ones((400, 3, 2))
  layer = layers.DropPath(rate=0.25)
  np.testing.assert_array_equal(layer.apply({}, x_BxLxD), x_BxLxD)  # deterministic: identity
  out = np.asarray(
      layer.apply({}, x_BxLxD, deterministic=False, rngs={"dropout": jax.random.PRNGKey(0)})
  )
  per_sample = out.reshape(400, -1)
  assert np.all(per_sample == per_sample[:, :1])  # all of a sample's values share one fate
  kept = per_sample[:, 0] != 0
  np.testing.assert_allclose(per_sample[kept, 0], 1 / 0.75, rtol=1e-6)
  assert 0.65 < kept.mean() < 0.85  # about 75% of 400 samples kept
  untouched = layers.DropPath(rate=0.0).apply(
      {}, x_BxLxD, deterministic=False, rngs={"dropout": jax.random.PRNGKey(0)}
  )
  np.testing.assert_array_equal(untouched, x_BxLxD)


class Stem(nn.Module):
  patch: tuple

  @nn.compact
  def __call__(self, images):
    return layers.patch_embedding(images, self.patch, 5, jnp.float32, jnp.float32, "embedding")


def test_patch_embedding_grid_and_errors():
  images = jnp.ones((2, 12, 8, 3))
  (tokens, grid), _ = Stem((4, 2)).init_with_output(jax.random.PRNGKey(0), images)
  assert tokens.shape == (2, 12, 5) and grid == (3, 4)
  with pytest.raises(errors.ConfigError, match="12x8 is not divisible by the patch size 5x2"):
    Stem((5, 2)).init(jax.random.PRNGKey(0), images)
  with pytest.raises(errors.ConfigError, match="Expected images"):
    Stem((4, 2)).init(jax.random.PRNGKey(0), jnp.ones((12, 8, 3)))


class Head(nn.Module):
  num_classes: int

  @nn.compact
  def __call__(self, x):
    return layers.classifier_head(x, self.num_classes, jnp.bfloat16, bias_init=-2.0)


def test_classifier_head_starts_at_zero_with_its_bias_and_returns_fp32():
  x_BxD = jax.random.normal(jax.random.PRNGKey(0), (3, 4))
  logits, variables = Head(6).init_with_output(jax.random.PRNGKey(1), x_BxD)
  assert logits.dtype == jnp.float32 and logits.shape == (3, 6)
  np.testing.assert_array_equal(variables["params"]["head"]["kernel"], 0.0)
  np.testing.assert_array_equal(logits, -2.0)
  features, variables = Head(0).init_with_output(jax.random.PRNGKey(1), x_BxD)
  np.testing.assert_array_equal(features, x_BxD)
  assert not variables  # no head, no parameters


def test_defaults_add_no_dropout_and_start_the_head_bias_at_zero():
  x_BxLxD = jnp.ones((2, 3, 4))
  block = layers.MlpBlock(mlp_dim=8)
  params = block.init(jax.random.PRNGKey(1), x_BxLxD)
  train_out = block.apply(
      params, x_BxLxD, deterministic=False, rngs={"dropout": jax.random.PRNGKey(2)}
  )
  np.testing.assert_array_equal(train_out, block.apply(params, x_BxLxD))

  class DefaultHead(nn.Module):

    @nn.compact
    def __call__(self, x):
      return layers.classifier_head(x, 6, jnp.float32)

  logits, variables = DefaultHead().init_with_output(jax.random.PRNGKey(1), jnp.ones((3, 4)))
  np.testing.assert_array_equal(variables["params"]["head"]["bias"], 0.0)
  np.testing.assert_array_equal(logits, 0.0)  # uniform predictions at the start
