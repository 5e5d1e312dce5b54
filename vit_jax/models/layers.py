"""Small building blocks: activations, the MLP block and stochastic depth."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_jax import errors

ACTIVATIONS = {
    "gelu": functools.partial(jax.nn.gelu, approximate=False),  # exact (erf), BERT and ViT
    "gelu_tanh": functools.partial(jax.nn.gelu, approximate=True),  # GPT-2's "gelu_new"
    "relu": jax.nn.relu,
}


def activation(name: str):
  if name not in ACTIVATIONS:
    raise errors.ConfigError(f"Unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}.")
  return ACTIVATIONS[name]


class MlpBlock(nn.Module):
  """Dense -> activation -> dropout -> Dense -> dropout (names Dense_0/Dense_1 as in ViT)."""
  mlp_dim: int
  out_dim: int | None = None
  activation: str = "gelu"
  dropout_rate: float = 0.0
  dtype: jnp.dtype = jnp.float32
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x_BxLxD, deterministic: bool = True):
    dense = functools.partial(nn.Dense, dtype=self.dtype, param_dtype=self.param_dtype,
                              kernel_init=nn.initializers.xavier_uniform(),
                              bias_init=nn.initializers.normal(stddev=1e-6))
    h_BxLxF = activation(self.activation)(dense(self.mlp_dim, name="Dense_0")(x_BxLxD))
    h_BxLxF = nn.Dropout(self.dropout_rate)(h_BxLxF, deterministic=deterministic)
    out_BxLxD = dense(self.out_dim or x_BxLxD.shape[-1], name="Dense_1")(h_BxLxF)
    return nn.Dropout(self.dropout_rate)(out_BxLxD, deterministic=deterministic)


class DropPath(nn.Module):
  """Stochastic depth: drops the whole residual branch of a sample with probability `rate`."""
  rate: float = 0.0

  @nn.compact
  def __call__(self, x_BxLxD, deterministic: bool = True):
    if deterministic or self.rate == 0.0:
      return x_BxLxD
    keep = 1.0 - self.rate
    shape = (x_BxLxD.shape[0],) + (1,) * (x_BxLxD.ndim - 1)
    keep_Bx1x1 = jax.random.bernoulli(self.make_rng("dropout"), keep, shape)
    return jnp.where(keep_Bx1x1, x_BxLxD / keep, 0.0).astype(x_BxLxD.dtype)
