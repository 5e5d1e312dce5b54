"""Transformer blocks and stacks shared by every model family.

`EncoderBlock` is self-attention + MLP, pre-LN (ViT, GPT) or post-LN (original Transformer, BERT);
with a causal mask and `decode=True` it is also GPT's decoder block. `DecoderBlock` adds
cross-attention for encoder-decoder models. Submodule names match the original ViT checkpoints
(`LayerNorm_0`, `MultiHeadDotProductAttention_1`, `LayerNorm_2`, `MlpBlock_3`).
"""

import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import attention
from vit_jax.models import layers
from vit_jax.models import position


@dataclasses.dataclass(frozen=True)
class BlockConfig:
  """Hyperparameters of one transformer block (shared by every block of a stack)."""
  num_heads: int
  mlp_dim: int
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  droppath_rate: float = 0.0  # stochastic depth of the last block; earlier blocks scale linearly
  pre_ln: bool = True
  activation: str = "gelu"
  norm_eps: float = 1e-6
  attention_impl: str = "xla"
  rope: bool = False
  dtype: str = "float32"  # compute dtype; parameters stay in param_dtype
  param_dtype: str = "float32"
  remat: str = "none"  # recompute activations in the backward pass: see REMAT_POLICIES

  def attention(self, name: str, decode: bool = False, rope: Optional[bool] = None):
    return attention.MultiHeadAttention(
        num_heads=self.num_heads, dropout_rate=self.attention_dropout_rate,
        implementation=self.attention_impl, rope=self.rope if rope is None else rope, decode=decode,
        dtype=jnp.dtype(self.dtype), param_dtype=jnp.dtype(self.param_dtype), name=name)

  def norm(self, name: str):
    return nn.LayerNorm(epsilon=self.norm_eps, dtype=jnp.dtype(self.dtype),
                        param_dtype=jnp.dtype(self.param_dtype), name=name)

  def mlp(self, name: str):
    return layers.MlpBlock(mlp_dim=self.mlp_dim, activation=self.activation,
                           dropout_rate=self.dropout_rate, dtype=jnp.dtype(self.dtype),
                           param_dtype=jnp.dtype(self.param_dtype), name=name)


# What a rematerialized block keeps from the forward pass (everything else is recomputed).
REMAT_POLICIES = {
    "none": None,  # no remat: keep everything
    "full": jax.checkpoint_policies.nothing_saveable,  # keep only the block inputs
    "dots": jax.checkpoint_policies.checkpoint_dots,  # keep matmul outputs
    "dots_no_batch": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
}


def block_class(cls, cfg: BlockConfig):
  """`cls`, or `cls` wrapped in nn.remat with the configured policy."""
  if cfg.remat not in REMAT_POLICIES:
    raise errors.ConfigError(
        f"Unknown remat policy {cfg.remat!r}; choose one of {list(REMAT_POLICIES)}.")
  if cfg.remat == "none":
    return cls
  # Argument 0 is the module; `deterministic` and `return_attention` are Python booleans.
  static = (3, 5) if cls is EncoderBlock else (5,)
  return nn.remat(cls, policy=REMAT_POLICIES[cfg.remat], static_argnums=static)


def _residual(cfg: BlockConfig, droppath_rate: float, x, branch, norm_name,
              deterministic):
  """x + branch(x) with pre-LN (normalize the branch input) or post-LN (normalize the sum)."""
  if cfg.pre_ln:
    y = branch(cfg.norm(norm_name)(x))
  else:
    y = branch(x)
  y = nn.Dropout(cfg.dropout_rate)(y, deterministic=deterministic)
  y = layers.DropPath(droppath_rate)(y, deterministic=deterministic)
  out = x + y
  return out if cfg.pre_ln else cfg.norm(norm_name)(out)


class EncoderBlock(nn.Module):
  """Self-attention then MLP, each a residual branch."""
  cfg: BlockConfig
  droppath_rate: float = 0.0
  decode: bool = False

  @nn.compact
  def __call__(self, x_BxLxD, mask=None, deterministic: bool = True, positions_BxL=None,
               return_attention: bool = False):
    def attend(h_BxLxD):
      attn = self.cfg.attention("MultiHeadDotProductAttention_1", decode=self.decode)
      out = attn(h_BxLxD, mask=mask, deterministic=deterministic, positions_q_BxT=positions_BxL,
                 return_weights=return_attention)
      if return_attention:
        out, weights_BxHxLxL = out
        self.sow("intermediates", "attention_weights", weights_BxHxLxL)
      return out

    x_BxLxD = _residual(self.cfg, self.droppath_rate, x_BxLxD, attend, "LayerNorm_0",
                        deterministic)
    mlp = self.cfg.mlp("MlpBlock_3")
    return _residual(self.cfg, self.droppath_rate, x_BxLxD,
                     lambda h: mlp(h, deterministic=deterministic), "LayerNorm_2", deterministic)


class DecoderBlock(nn.Module):
  """Masked self-attention, cross-attention to the encoder output, then MLP."""
  cfg: BlockConfig
  droppath_rate: float = 0.0
  decode: bool = False

  @nn.compact
  def __call__(self, y_BxTxD, encoded_BxSxD, self_mask=None, cross_mask=None,
               deterministic: bool = True, positions_BxT=None):
    self_attn = self.cfg.attention("self_attention", decode=self.decode)
    # Cross-attention relates two different sequences: no RoPE between them.
    cross_attn = self.cfg.attention("cross_attention", rope=False)
    mlp = self.cfg.mlp("mlp")
    y_BxTxD = _residual(self.cfg, self.droppath_rate, y_BxTxD,
                        lambda h: self_attn(h, mask=self_mask, deterministic=deterministic,
                                            positions_q_BxT=positions_BxT),
                        "norm_self_attention", deterministic)
    y_BxTxD = _residual(self.cfg, self.droppath_rate, y_BxTxD,
                        lambda h: cross_attn(h, encoded_BxSxD, mask=cross_mask,
                                             deterministic=deterministic),
                        "norm_cross_attention", deterministic)
    return _residual(self.cfg, self.droppath_rate, y_BxTxD,
                     lambda h: mlp(h, deterministic=deterministic), "norm_mlp", deterministic)


def droppath_rates(rate: float, num_layers: int):
  """Stochastic depth grows linearly with depth, reaching `rate` at the last block."""
  if num_layers <= 1:
    return [rate] * num_layers
  return [rate * i / (num_layers - 1) for i in range(num_layers)]


class Encoder(nn.Module):
  """A stack of encoder blocks: [position embedding] -> dropout -> blocks -> [final norm].

  The final LayerNorm (`encoder_norm`) exists only for pre-LN stacks, whose residual stream is
  otherwise never normalized. Names match the original ViT `Transformer` module.
  """
  cfg: BlockConfig
  num_layers: int
  posemb: str = "none"  # see position.AddPositionEmbedding
  posemb_grid: tuple = ()
  prefix_tokens: int = 0
  decode: bool = False
  block_name: str = "encoderblock"
  scan_layers: bool = False  # one scanned block with stacked params (faster compiles when deep)

  @nn.compact
  def __call__(self, x_BxLxD, mask=None, deterministic: bool = True, positions_BxL=None,
               return_attention: bool = False):
    if self.posemb != "none":
      x_BxLxD = position.AddPositionEmbedding(
          kind=self.posemb, grid=self.posemb_grid, prefix_tokens=self.prefix_tokens,
          param_dtype=jnp.dtype(self.cfg.param_dtype), name="posembed_input")(x_BxLxD)
      x_BxLxD = nn.Dropout(self.cfg.dropout_rate)(x_BxLxD, deterministic=deterministic)
    x_BxLxD = x_BxLxD.astype(jnp.dtype(self.cfg.dtype))
    if self.scan_layers:
      x_BxLxD = ScannedBlocks(self.cfg, self.num_layers, self.decode, name=self.block_name)(
          x_BxLxD, mask, positions_BxL, deterministic)
    else:
      block = block_class(EncoderBlock, self.cfg)
      for i, rate in enumerate(droppath_rates(self.cfg.droppath_rate, self.num_layers)):
        x_BxLxD = block(self.cfg, droppath_rate=rate, decode=self.decode,
                        name=f"{self.block_name}_{i}")(
                            x_BxLxD, mask, deterministic, positions_BxL, return_attention)
    if self.cfg.pre_ln:
      x_BxLxD = self.cfg.norm("encoder_norm")(x_BxLxD)
    return x_BxLxD


class Decoder(nn.Module):
  """A stack of decoder blocks (self-attention, cross-attention, MLP) and a final pre-LN norm."""
  cfg: BlockConfig
  num_layers: int
  decode: bool = False

  @nn.compact
  def __call__(self, y_BxTxD, encoded_BxSxD, self_mask=None, cross_mask=None,
               deterministic: bool = True, positions_BxT=None):
    y_BxTxD = y_BxTxD.astype(jnp.dtype(self.cfg.dtype))
    block = block_class(DecoderBlock, self.cfg)
    for i, rate in enumerate(droppath_rates(self.cfg.droppath_rate, self.num_layers)):
      y_BxTxD = block(self.cfg, droppath_rate=rate, decode=self.decode,
                             name=f"decoderblock_{i}")(
                                 y_BxTxD, encoded_BxSxD, self_mask, cross_mask, deterministic,
                                 positions_BxT)
    if self.cfg.pre_ln:
      y_BxTxD = self.cfg.norm("decoder_norm")(y_BxTxD)
    return y_BxTxD


class _ScanStep(nn.Module):
  """One layer of a scanned stack: (carry, broadcast inputs) -> (carry, nothing)."""
  cfg: BlockConfig
  decode: bool = False

  @nn.compact
  def __call__(self, x_BxLxD, mask, positions_BxL, deterministic):
    block = block_class(EncoderBlock, self.cfg)
    # Under scan every layer is the same function: stochastic depth uses one rate for all.
    return block(self.cfg, droppath_rate=self.cfg.droppath_rate, decode=self.decode,
                 name="block")(x_BxLxD, mask, deterministic, positions_BxL, False), None


class ScannedBlocks(nn.Module):
  """`num_layers` encoder blocks as one `nn.scan`; parameters gain a leading layer axis."""
  cfg: BlockConfig
  num_layers: int
  decode: bool = False

  @nn.compact
  def __call__(self, x_BxLxD, mask, positions_BxL, deterministic):
    scanned = nn.scan(_ScanStep, variable_axes={"params": 0, "cache": 0},
                      split_rngs={"params": True, "dropout": True},
                      in_axes=(nn.broadcast, nn.broadcast, nn.broadcast), length=self.num_layers)
    x_BxLxD, _ = scanned(self.cfg, self.decode, name="layers")(x_BxLxD, mask, positions_BxL,
                                                              deterministic)
    return x_BxLxD


def sequence_length_check(length: int, max_len: Optional[int], what: str = "sequence"):
  """Clear error when a sequence does not fit the position table."""
  if max_len is not None and length > max_len:
    raise errors.ConfigError(
        f"The {what} has {length} tokens but the model's position table holds "
        f"max_len={max_len}; truncate the input or build the model with a larger max_len.")
