"""Transformer blocks and stacks shared by every model family, and their one configuration.

`BlockOptions` are the block settings a model config sets; every transformer family (ViT, GPT,
BERT, seq2seq) inherits them, and `BlockConfig.from_model_config` hands them to its blocks.
`EncoderBlock` is self-attention + MLP, pre-LN (ViT, GPT) or post-LN (original Transformer, BERT);
with a causal mask and `decode=True` it is also GPT's decoder block. `DecoderBlock` adds
cross-attention for encoder-decoder models. Submodule names match the original ViT checkpoints
(`LayerNorm_0`, `MultiHeadDotProductAttention_1`, `LayerNorm_2`, `MlpBlock_3`).
"""

import dataclasses
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import attention
from vit_jax.models import layers
from vit_jax.models import position


@dataclasses.dataclass(frozen=True)
class Shape:
  """A transformer's size: a family's preset, or a preset with the sizes a model config sets."""

  width: int
  depth: int
  num_heads: int
  mlp_dim: Optional[int] = None  # None: the family sets it from the width (GPT's mlp_ratio)

  def overridden_by(self, model) -> "Shape":
    """This preset with the width, depth, heads and MLP width that `model` sets (not None)."""
    fields = dataclasses.fields(self)
    return Shape(*(getattr(model, f.name, None) or getattr(self, f.name) for f in fields))


# repr and eq stay the Flax module's in the families that inherit these fields.
@dataclasses.dataclass(kw_only=True, repr=False, eq=False)
class BlockOptions:
  """Block settings every transformer family takes from its model config (a family may change a
  default). A new block option is one field here: every family's config then accepts it (the
  registry checks option names against these fields) and every block receives it."""

  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  droppath_rate: float = 0.0  # stochastic depth of the last block; earlier blocks scale linearly
  activation: str = "gelu_tanh"  # ViT's, BERT's and GPT-2's (see layers.ACTIVATIONS)
  # Dropout after the MLP activation as well as on each branch's output (ViT's models_vit.py
  # MlpBlock); BERT's modeling.py and GPT-2 drop the branch output only.
  mlp_hidden_dropout: bool = True
  kernel_init: str = "xavier_uniform"  # of the blocks' weight matrices: see layers.KERNEL_INITS
  init_std: float = 0.02  # standard deviation of the "normal" and "truncated_normal" inits
  # GPT-2 (paper section 2.3): the residual branches' output projections start at
  # init_std / sqrt(2 x depth), so the residual stream's variance does not grow with depth.
  scale_residual_init: bool = False
  norm_eps: float = 1e-6
  normalization: str = "layernorm"  # or "rmsnorm" (Llama, Qwen): see NORMS
  # A GLU MLP, activation(gate(x)) * up(x) -> down: SwiGLU with activation "silu" (Llama).
  gated_mlp: bool = False
  biases: str = "all"  # of the dense projections: see BIASES
  num_kv_heads: Optional[int] = None  # grouped-query attention's key-value heads; None: all
  head_dim: Optional[int] = None  # each head's width; None: width / num_heads (Qwen3 sets it)
  qk_norm: bool = False  # RMSNorm over each head's queries and keys before RoPE (Qwen3)
  # RoPE's base (Hugging Face's rope_theta) and scaling (position.RopeScaling's fields).
  rope_base: float = 10_000.0
  rope_scaling: str = "none"  # see position.ROPE_SCALINGS
  rope_factor: float = 1.0
  rope_low_freq_factor: float = 1.0
  rope_high_freq_factor: float = 4.0
  rope_original_max_len: int = 8192
  attention_impl: str = "auto"  # see attention.IMPLEMENTATIONS (auto: by platform)
  remat: str = "none"  # recompute activations in the backward pass: see REMAT_POLICIES
  scan_layers: bool = False  # one scanned block with stacked params (faster compiles when deep)
  dtype: str = "float32"  # compute dtype; parameters stay in param_dtype
  param_dtype: str = "float32"


NORMS = {"layernorm": nn.LayerNorm, "rmsnorm": nn.RMSNorm}
# Which dense projections have biases: every one (GPT-2, ViT, BERT), the query/key/value ones
# only (Qwen2), or none (Llama, Qwen3). Norms keep theirs (LayerNorm's offset).
BIASES = ("all", "qkv", "none")


@dataclasses.dataclass(kw_only=True, unsafe_hash=True)  # hashable: an attribute of Flax modules
class BlockConfig(BlockOptions):
  """Everything a block of a stack needs: the options plus what its family decides."""

  num_heads: int
  mlp_dim: int
  depth: int = 1  # blocks in the stack (read by scale_residual_init)
  pre_ln: bool = True
  rope: bool = False

  @classmethod
  def from_model_config(cls, model: BlockOptions, **family) -> "BlockConfig":
    """The block config of a family module: its option fields, plus `family` (shape, LN, RoPE)."""
    options = {f.name: getattr(model, f.name) for f in dataclasses.fields(BlockOptions)}
    return cls(**options, **family)

  def dtypes(self) -> dict:
    """The compute and parameter dtypes every layer of a block takes."""
    return dict(dtype=jnp.dtype(self.dtype), param_dtype=jnp.dtype(self.param_dtype))

  def kernel_inits(self) -> tuple:
    """(initializer of the input projections, of the output projections into the residual)."""
    kernel = layers.kernel_init(self.kernel_init, self.init_std)
    if not self.scale_residual_init:
      return kernel, kernel
    if self.kernel_init == "xavier_uniform":
      raise errors.ConfigError(
          "scale_residual_init scales a normal init's std; set kernel_init to 'normal' or "
          "'truncated_normal', or scale_residual_init=False."
      )
    return kernel, layers.kernel_init(self.kernel_init, self.init_std / (2 * self.depth) ** 0.5)

  def attention(
      self, name: str, decode: bool = False, rope: Optional[bool] = None, static_kv: bool = False
  ):
    kernel, out_kernel = self.kernel_inits()
    if self.biases not in BIASES:
      raise errors.ConfigError(f"Unknown biases {self.biases!r}; choose one of {BIASES}.")
    scaling = position.RopeScaling(
        self.rope_scaling,
        self.rope_factor,
        self.rope_low_freq_factor,
        self.rope_high_freq_factor,
        self.rope_original_max_len,
    )
    return attention.MultiHeadAttention(
        num_heads=self.num_heads,
        num_kv_heads=self.num_kv_heads,
        head_dim=self.head_dim,
        use_bias=self.biases == "all",
        qkv_bias=self.biases != "none",
        qk_norm=self.qk_norm,
        norm_eps=self.norm_eps,
        rope_base=self.rope_base,
        rope_scaling=scaling,
        dropout_rate=self.attention_dropout_rate,
        implementation=self.attention_impl,
        rope=self.rope if rope is None else rope,
        decode=decode,
        static_kv=static_kv,
        kernel_init=kernel,
        out_kernel_init=out_kernel,
        name=name,
        **self.dtypes(),
    )

  def norm(self, name: str):
    if self.normalization not in NORMS:
      raise errors.ConfigError(
          f"Unknown normalization {self.normalization!r}; choose one of {list(NORMS)}."
      )
    return NORMS[self.normalization](epsilon=self.norm_eps, name=name, **self.dtypes())

  def mlp(self, name: str):
    kernel, out_kernel = self.kernel_inits()
    # ViT's MLP biases start at N(0, 1e-6) (models_vit.py); BERT's and GPT-2's at zero.
    xavier = self.kernel_init == "xavier_uniform"
    return layers.MlpBlock(
        mlp_dim=self.mlp_dim,
        activation=self.activation,
        gated=self.gated_mlp,
        use_bias=self.biases == "all",
        dropout_rate=self.dropout_rate if self.mlp_hidden_dropout else 0.0,
        kernel_init=kernel,
        out_kernel_init=out_kernel,
        bias_init=nn.initializers.normal(1e-6) if xavier else nn.initializers.zeros,
        name=name,
        **self.dtypes(),
    )


# What a rematerialized block keeps from the forward pass (everything else is recomputed).
REMAT_POLICIES = {
    "none": None,  # no remat: keep everything
    "full": jax.checkpoint_policies.nothing_saveable,  # keep only the block inputs
    "dots": jax.checkpoint_policies.checkpoint_dots,  # keep matmul outputs
    "dots_no_batch": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
}


def block_class(cls, cfg: BlockConfig, in_scan: bool = False):
  """`cls`, or `cls` wrapped in nn.remat with the configured policy.

  A block's flags (deterministic, decode, ...) are module attributes, so its call arguments are
  all arrays (or None) and remat needs no static_argnums. Inside a scan, remat needs no guard
  against XLA merging the recomputation with the forward pass (scan's loop already keeps them
  apart), and the guard's optimization barriers would only slow the step: prevent_cse=False.
  """
  if cfg.remat not in REMAT_POLICIES:
    raise errors.ConfigError(
        f"Unknown remat policy {cfg.remat!r}; choose one of {list(REMAT_POLICIES)}."
    )
  if cfg.remat == "none":
    return cls
  return nn.remat(cls, policy=REMAT_POLICIES[cfg.remat], prevent_cse=not in_scan)


class _Block(nn.Module):
  """What every block has: its config, stochastic depth rate and flags."""

  cfg: BlockConfig
  droppath_rate: float = 0.0
  decode: bool = False  # self-attention keeps a KV cache
  deterministic: bool = True  # no dropout
  return_attention: bool = False  # sow self-attention weights in "intermediates"

  def residual(self, x, branch, norm_name):
    """x + branch(x) with pre-LN (normalize the branch input) or post-LN (normalize the sum).

    The branch output is dropped here, once (the MLP block does not drop its own output)."""
    y = branch(self.cfg.norm(norm_name)(x) if self.cfg.pre_ln else x)
    y = nn.Dropout(self.cfg.dropout_rate)(y, deterministic=self.deterministic)
    y = layers.DropPath(self.droppath_rate)(y, deterministic=self.deterministic)
    return x + y if self.cfg.pre_ln else self.cfg.norm(norm_name)(x + y)

  def self_attention(self, name, h_BxLxD, mask, positions_BxL):
    attn = self.cfg.attention(name, decode=self.decode)
    out = attn(
        h_BxLxD,
        mask=mask,
        deterministic=self.deterministic,
        positions_q_BxT=positions_BxL,
        return_weights=self.return_attention,
    )
    if not self.return_attention:
      return out
    out_BxLxD, weights_BxHxLxL = out
    self.sow("intermediates", "attention_weights", weights_BxHxLxL)
    return out_BxLxD

  def mlp_residual(self, x_BxLxD, name, norm_name):
    mlp = self.cfg.mlp(name)
    return self.residual(x_BxLxD, lambda h: mlp(h, deterministic=self.deterministic), norm_name)


class EncoderBlock(_Block):
  """Self-attention then MLP, each a residual branch."""

  @nn.compact
  def __call__(self, x_BxLxD, mask=None, positions_BxL=None):
    x_BxLxD = self.residual(
        x_BxLxD,
        lambda h: self.self_attention("MultiHeadDotProductAttention_1", h, mask, positions_BxL),
        "LayerNorm_0",
    )
    return self.mlp_residual(x_BxLxD, "MlpBlock_3", "LayerNorm_2")


class DecoderBlock(_Block):
  """Masked self-attention, cross-attention to the encoder output, then MLP."""

  @nn.compact
  def __call__(self, y_BxTxD, encoded_BxSxD, self_mask=None, cross_mask=None, positions_BxT=None):
    y_BxTxD = self.residual(
        y_BxTxD,
        lambda h: self.self_attention("self_attention", h, self_mask, positions_BxT),
        "norm_self_attention",
    )
    # Cross-attention relates two different sequences: no RoPE between them.
    cross_attn = self.cfg.attention("cross_attention", rope=False, static_kv=self.decode)
    y_BxTxD = self.residual(
        y_BxTxD,
        lambda h: cross_attn(h, encoded_BxSxD, mask=cross_mask, deterministic=self.deterministic),
        "norm_cross_attention",
    )
    return self.mlp_residual(y_BxTxD, "mlp", "norm_mlp")


def droppath_rates(rate: float, num_layers: int):
  """Stochastic depth grows linearly with depth, reaching `rate` at the last block."""
  if num_layers <= 1:
    return [rate] * num_layers
  return [rate * i / (num_layers - 1) for i in range(num_layers)]


def apply_blocks(cls, cfg: BlockConfig, num_layers: int, name: str, x, *inputs, **flags):
  """`num_layers` blocks of class `cls` applied in turn to x (the other inputs are shared).

  Unrolled blocks are named `{name}_{i}`; with `cfg.scan_layers` one scanned block `name` holds
  params with a leading layer axis. `flags` are block attributes (decode, deterministic, ...).
  """
  if cfg.scan_layers:
    if flags.get("return_attention"):
      raise ValueError(
          "Attention weights are returned per layer only: build the model with "
          "scan_layers=False to read them."
      )
    return ScannedBlocks(cls, cfg, num_layers, tuple(flags.items()), name=name)(x, *inputs)
  block = block_class(cls, cfg)
  for i, rate in enumerate(droppath_rates(cfg.droppath_rate, num_layers)):
    x = block(cfg, droppath_rate=rate, **flags, name=f"{name}_{i}")(x, *inputs)
  return x


class _ScanStep(nn.Module):
  """One layer of a scanned stack: (carry, broadcast inputs) -> (carry, nothing)."""

  cls: Any
  cfg: BlockConfig
  flags: tuple

  @nn.compact
  def __call__(self, x, droppath_rate, *inputs):
    block = block_class(self.cls, self.cfg, in_scan=True)
    # The layer's own stochastic depth rate comes in as a scanned input (see droppath_rates).
    rate = droppath_rate if self.cfg.droppath_rate else 0.0
    return block(self.cfg, droppath_rate=rate, **dict(self.flags), name="block")(x, *inputs), None


class ScannedBlocks(nn.Module):
  """`num_layers` blocks as one `nn.scan`; parameters (and KV caches) gain a leading layer axis."""

  cls: Any
  cfg: BlockConfig
  num_layers: int
  flags: tuple = ()

  @nn.compact
  def __call__(self, x, *inputs):
    scanned = nn.scan(
        _ScanStep,
        variable_axes={"params": 0, "cache": 0},
        split_rngs={"params": True, "dropout": True},
        in_axes=(0,) + (nn.broadcast,) * len(inputs),
        length=self.num_layers,
    )
    rates = jnp.asarray(droppath_rates(self.cfg.droppath_rate, self.num_layers), jnp.float32)
    x, _ = scanned(self.cls, self.cfg, self.flags, name="layers")(x, rates, *inputs)
    return x


class Encoder(nn.Module):
  """A stack of encoder blocks: [position embedding] -> dropout -> blocks -> [final norm].

  The final LayerNorm (`encoder_norm`) exists only for pre-LN stacks, whose residual stream is
  otherwise never normalized. Names match the original ViT `Transformer` module.
  """

  cfg: BlockConfig
  num_layers: int
  posemb: str = "none"  # see position.AddPositionEmbedding
  posemb_init_std: float = 0.02  # of a learned table
  posemb_grid: tuple = ()
  prefix_tokens: int = 0
  decode: bool = False
  block_name: str = "encoderblock"

  @nn.compact
  def __call__(
      self,
      x_BxLxD,
      mask=None,
      deterministic: bool = True,
      positions_BxL=None,
      return_attention: bool = False,
  ):
    if self.posemb != "none":
      x_BxLxD = position.AddPositionEmbedding(
          kind=self.posemb,
          grid=self.posemb_grid,
          prefix_tokens=self.prefix_tokens,
          init_std=self.posemb_init_std,
          param_dtype=jnp.dtype(self.cfg.param_dtype),
          name="posembed_input",
      )(x_BxLxD)
      x_BxLxD = nn.Dropout(self.cfg.dropout_rate)(x_BxLxD, deterministic=deterministic)
    x_BxLxD = apply_blocks(
        EncoderBlock,
        self.cfg,
        self.num_layers,
        self.block_name,
        x_BxLxD.astype(jnp.dtype(self.cfg.dtype)),
        mask,
        positions_BxL,
        decode=self.decode,
        deterministic=deterministic,
        return_attention=return_attention,
    )
    if self.cfg.pre_ln:
      x_BxLxD = self.cfg.norm("encoder_norm")(x_BxLxD)
    return x_BxLxD


class Decoder(nn.Module):
  """A stack of decoder blocks (self-attention, cross-attention, MLP) and a final pre-LN norm."""

  cfg: BlockConfig
  num_layers: int
  decode: bool = False

  @nn.compact
  def __call__(
      self,
      y_BxTxD,
      encoded_BxSxD,
      self_mask=None,
      cross_mask=None,
      deterministic: bool = True,
      positions_BxT=None,
  ):
    y_BxTxD = apply_blocks(
        DecoderBlock,
        self.cfg,
        self.num_layers,
        "decoderblock",
        y_BxTxD.astype(jnp.dtype(self.cfg.dtype)),
        encoded_BxSxD,
        self_mask,
        cross_mask,
        positions_BxT,
        decode=self.decode,
        deterministic=deterministic,
    )
    if self.cfg.pre_ln:
      y_BxTxD = self.cfg.norm("decoder_norm")(y_BxTxD)
    return y_BxTxD


def sequence_length_check(length: int, max_len: Optional[int], what: str = "sequence"):
  """Clear error when a sequence does not fit the position table."""
  if max_len is not None and length > max_len:
    raise errors.ConfigError(
        f"The {what} has {length} tokens but the model's position table holds "
        f"max_len={max_len}; truncate the input or build the model with a larger max_len."
    )
