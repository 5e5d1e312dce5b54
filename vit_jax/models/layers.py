"""Small building blocks: activations, the MLP block, stochastic depth, patch stem, class head."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_jax import errors

# The reference codebases compute GELU with the tanh approximation: flax's nn.gelu (approximate
# True by default) in big_vision (models/vit.py:75), vision_transformer (models_vit.py:90,
# models_mixer.py:28) and FNet; BERT's modeling.py:264-277 and GPT-2's src/model.py:25-26
# ("gelu_new") write it out. Hugging Face and timm checkpoints that use the exact form say so
# in their configs (interop/hf_rules.py), nanoGPT's nn.GELU() too.
ACTIVATIONS = {
    "gelu": functools.partial(jax.nn.gelu, approximate=False),  # exact (erf)
    "gelu_tanh": functools.partial(jax.nn.gelu, approximate=True),  # the tanh approximation
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,  # SwiGLU's gate (Llama, Qwen)
}


def activation(name: str):
  if name not in ACTIVATIONS:
    raise errors.ConfigError(f"Unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}.")
  return ACTIVATIONS[name]


# Weight-matrix initializers by name; the normal ones take a standard deviation.
KERNEL_INITS = {
    "xavier_uniform": lambda std: nn.initializers.xavier_uniform(),  # ViT, original Transformer
    "normal": lambda std: nn.initializers.normal(stddev=std),  # GPT-2 src/model.py conv1d
    "truncated_normal": lambda std: nn.initializers.truncated_normal(stddev=std),  # BERT
}


def kernel_init(name: str, std: float):
  if name not in KERNEL_INITS:
    raise errors.ConfigError(f"Unknown kernel_init {name!r}; choose one of {sorted(KERNEL_INITS)}.")
  return KERNEL_INITS[name](std)


class MlpBlock(nn.Module):
  """Dense -> activation -> [dropout] -> Dense (names Dense_0/Dense_1 as in ViT).

  `gated`: a GLU, activation(gate(x)) * Dense_0(x) -> Dense_1 (SwiGLU with "silu": Llama's
  gate_proj, up_proj, down_proj).

  The output is not dropped here: the residual branch that holds the block drops it once, as
  ViT, big_vision and BERT do. `dropout_rate` is the rate after the activation (ViT's
  models_vit.py MlpBlock has it there; BERT's modeling.py and GPT-2 do not: build with 0).
  """

  mlp_dim: int
  out_dim: int | None = None
  activation: str = "gelu_tanh"
  gated: bool = False
  use_bias: bool = True
  dropout_rate: float = 0.0
  kernel_init: nn.initializers.Initializer = nn.initializers.xavier_uniform()
  out_kernel_init: nn.initializers.Initializer | None = None  # None: kernel_init
  bias_init: nn.initializers.Initializer = nn.initializers.normal(stddev=1e-6)  # ViT's
  dtype: jnp.dtype = jnp.float32
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x_BxLxD, deterministic: bool = True):
    dense = functools.partial(
        nn.Dense,
        use_bias=self.use_bias,
        dtype=self.dtype,
        param_dtype=self.param_dtype,
        bias_init=self.bias_init,
    )
    h_BxLxF = dense(self.mlp_dim, kernel_init=self.kernel_init, name="Dense_0")(x_BxLxD)
    if self.gated:
      gate_BxLxF = dense(self.mlp_dim, kernel_init=self.kernel_init, name="gate")(x_BxLxD)
      h_BxLxF = activation(self.activation)(gate_BxLxF) * h_BxLxF
    else:
      h_BxLxF = activation(self.activation)(h_BxLxF)
    h_BxLxF = nn.Dropout(self.dropout_rate)(h_BxLxF, deterministic=deterministic)
    out_init = self.out_kernel_init or self.kernel_init
    return dense(self.out_dim or x_BxLxD.shape[-1], kernel_init=out_init, name="Dense_1")(h_BxLxF)


class DropPath(nn.Module):
  """Stochastic depth: drops the whole residual branch of a sample with probability `rate`."""

  rate: float = 0.0  # or a traced scalar: each layer's own rate in a scanned stack

  @nn.compact
  def __call__(self, x_BxLxD, deterministic: bool = True):
    if deterministic or (isinstance(self.rate, (int, float)) and self.rate == 0):
      return x_BxLxD
    keep = 1.0 - self.rate
    shape = (x_BxLxD.shape[0],) + (1,) * (x_BxLxD.ndim - 1)
    keep_Bx1x1 = jax.random.bernoulli(self.make_rng("dropout"), keep, shape)
    return jnp.where(keep_Bx1x1, x_BxLxD / keep, 0.0).astype(x_BxLxD.dtype)


def patch_embedding(images_BxHxWxC, patch_hw, width: int, dtype, param_dtype, name: str):
  """Non-overlapping patches, linearly embedded (a conv with kernel = stride = patch).

  Returns the patch tokens (B, N, D), row-major, and the patch grid (rows, cols).
  """
  if images_BxHxWxC.ndim != 4:
    raise errors.ConfigError(
        f"Expected images (batch, height, width, channels), got shape " f"{images_BxHxWxC.shape}."
    )
  (height, width_px), (ph, pw) = images_BxHxWxC.shape[1:3], patch_hw
  if height % ph or width_px % pw:
    raise errors.ConfigError(
        f"Image size {height}x{width_px} is not divisible by the patch size "
        f"{ph}x{pw}; resize the images or choose another patch size."
    )
  x_BxRxCxD = nn.Conv(
      width,
      (ph, pw),
      strides=(ph, pw),
      padding="VALID",
      dtype=dtype,
      param_dtype=param_dtype,
      name=name,
  )(images_BxHxWxC.astype(dtype))
  batch, rows, cols, _ = x_BxRxCxD.shape
  return x_BxRxCxD.reshape(batch, rows * cols, width), (rows, cols)


def classifier_head(x_BxD, num_classes, param_dtype=jnp.float32, bias_init: float = 0.0):
  """fp32 logits of a zero-initialized linear "head" (training starts from uniform predictions, as
  in the original ViT); the features themselves when num_classes is 0 or None. The head computes
  in fp32 whatever the model's dtype: it is small, and the loss reads its outputs."""
  if not num_classes:
    return x_BxD
  head = nn.Dense(
      num_classes,
      dtype=jnp.float32,
      param_dtype=param_dtype,
      kernel_init=nn.initializers.zeros,
      bias_init=nn.initializers.constant(bias_init),
      name="head",
  )
  return head(x_BxD).astype(jnp.float32)
