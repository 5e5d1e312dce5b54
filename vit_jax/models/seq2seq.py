"""Encoder-decoder Transformer (Vaswani et al. 2017) with a shared, tied token embedding.

inputs -> embed * sqrt(D) + positions -> encoder; decoder_inputs -> embed + positions ->
decoder (causal self-attention, cross-attention to the encoder) -> logits = h @ embedding^T.
`encode` and `decode` are separate methods so generation encodes once and decodes step by step.
"""

from typing import Optional

import flax.linen as nn
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import masks
from vit_jax.models import position
from vit_jax.models import transformer


class EncoderDecoder(transformer.BlockOptions, nn.Module, kw_only=True):
  """Sequence-to-sequence model. `__call__` returns teacher-forced logits (B, T, vocab_size).

  Block options: see transformer.BlockOptions; the original Transformer's activation and dropout
  are the defaults here.
  """

  vocab_size: int
  width: int = 512
  num_layers: int = 6
  num_decoder_layers: Optional[int] = None
  num_heads: int = 8
  mlp_dim: int = 2048
  max_len: int = 256
  posemb: str = "sincos1d"  # or "learn"
  pre_ln: bool = True
  decode: bool = False
  activation: str = "relu"
  dropout_rate: float = 0.1

  def setup(self):
    if self.posemb not in ("sincos1d", "learn"):
      raise errors.ConfigError(
          f"Unknown seq2seq position embedding {self.posemb!r}; " "choose 'sincos1d' or 'learn'."
      )
    cfg = transformer.BlockConfig.from_model_config(
        self,
        num_heads=self.num_heads,
        mlp_dim=self.mlp_dim,
        depth=self.num_layers,
        pre_ln=self.pre_ln,
    )
    self.token_embed = nn.Embed(
        self.vocab_size,
        self.width,
        embedding_init=nn.initializers.normal(self.width**-0.5),
        dtype=jnp.dtype(self.dtype),
        param_dtype=jnp.dtype(self.param_dtype),
    )
    if self.posemb == "learn":
      self.position_embed = nn.Embed(
          self.max_len, self.width, embedding_init=nn.initializers.normal(0.02)
      )
    self.encoder = transformer.Encoder(cfg, num_layers=self.num_layers)
    self.decoder = transformer.Decoder(
        cfg, num_layers=self.num_decoder_layers or self.num_layers, decode=self.decode
    )
    self.dropout = nn.Dropout(self.dropout_rate)
    if self.decode:  # where the next decoded token sits
      self.position_index = self.variable(
          "cache", "position_index", lambda: jnp.array(0, jnp.int32)
      )

  def _embed(self, tokens_BxL, positions_BxL, train):
    batch, length = tokens_BxL.shape
    if positions_BxL is None:
      positions_BxL = position.arange_positions(batch, length)
    x_BxLxD = self.token_embed(tokens_BxL) * jnp.sqrt(self.width).astype(jnp.dtype(self.dtype))
    if self.posemb == "learn":
      x_BxLxD = x_BxLxD + self.position_embed(positions_BxL)
    else:
      table_LxD = jnp.asarray(position.sincos_1d(self.max_len, self.width))
      x_BxLxD = x_BxLxD + table_LxD[positions_BxL].astype(x_BxLxD.dtype)
    return self.dropout(x_BxLxD, deterministic=not train)

  def encode(self, inputs_BxS, input_mask_BxS=None, train: bool = False):
    transformer.sequence_length_check(inputs_BxS.shape[1], self.max_len, "input sequence")
    if input_mask_BxS is None:
      input_mask_BxS = jnp.ones_like(inputs_BxS)
    x_BxSxD = self._embed(inputs_BxS, None, train)
    mask = masks.MaskSpec().with_padding(input_mask_BxS)
    return self.encoder(x_BxSxD, mask, deterministic=not train)

  def decode_logits(
      self,
      decoder_inputs_BxT,
      encoded_BxSxD,
      input_mask_BxS=None,
      target_mask_BxT=None,
      positions_BxT=None,
      train: bool = False,
  ):
    """Teacher-forced logits, or (with decode=True) logits for the new tokens given the cache."""
    batch, length = decoder_inputs_BxT.shape
    if not self.decode:
      transformer.sequence_length_check(length, self.max_len, "target sequence")
    if input_mask_BxS is None:
      input_mask_BxS = jnp.ones(encoded_BxSxD.shape[:2], jnp.int32)
    if target_mask_BxT is None:
      target_mask_BxT = jnp.ones((batch, length), jnp.int32)
    if self.decode and not self.is_initializing():
      positions_BxT = position.next_positions(self.position_index, batch, length, positions_BxT)
    y_BxTxD = self._embed(decoder_inputs_BxT, positions_BxT, train)
    # Masks by their parts (masks.MaskSpec): attention builds a dense one only where needed.
    if self.decode:
      self_mask = None  # the KV cache applies causality
      cross_mask = masks.MaskSpec().with_padding(jnp.ones((batch, length)), input_mask_BxS)
    else:
      self_mask = masks.MaskSpec(causal=True).with_padding(target_mask_BxT)
      cross_mask = masks.MaskSpec().with_padding(target_mask_BxT, input_mask_BxS)
    y_BxTxD = self.decoder(y_BxTxD, encoded_BxSxD, self_mask, cross_mask, deterministic=not train)
    return self.token_embed.attend(y_BxTxD).astype(jnp.float32)

  def __call__(
      self,
      inputs_BxS,
      decoder_inputs_BxT,
      input_mask_BxS=None,
      target_mask_BxT=None,
      train: bool = False,
  ):
    encoded_BxSxD = self.encode(inputs_BxS, input_mask_BxS, train=train)
    return self.decode_logits(
        decoder_inputs_BxT, encoded_BxSxD, input_mask_BxS, target_mask_BxT, train=train
    )
