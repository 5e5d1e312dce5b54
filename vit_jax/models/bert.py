"""BERT (Devlin et al. 2019): post-LN encoder with token, position and segment embeddings.

`Bert` is the encoder and pooler, under the name "bert" in every task model, so a pretrained
encoder moves between pretraining, masked-LM and classification models unchanged.
"""

from typing import Optional

import flax.linen as nn
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import layers
from vit_jax.models import masks
from vit_jax.models import position
from vit_jax.models import transformer

# Turc et al. 2019 ("Well-read students") small BERTs, and the original base/large.
PRESETS = {
    "tiny": transformer.Shape(128, 2, 2, 512),
    "mini": transformer.Shape(256, 4, 4, 1024),
    "small": transformer.Shape(512, 4, 8, 2048),
    "medium": transformer.Shape(512, 8, 8, 2048),
    "base": transformer.Shape(768, 12, 12, 3072),
    "large": transformer.Shape(1024, 24, 16, 4096),
}
# BERT's modeling.py create_initializer (line 375): truncated normal, initializer_range 0.02.
INIT = nn.initializers.truncated_normal(stddev=0.02)


def preset(name: str) -> transformer.Shape:
  if name not in PRESETS:
    raise errors.ConfigError(f"Unknown BERT preset {name!r}; choose one of {list(PRESETS)}.")
  return PRESETS[name]


class Bert(transformer.BlockOptions, nn.Module, kw_only=True):
  """Embeddings -> post-LN encoder -> (sequence output, tanh-pooled first token).

  Block options: see transformer.BlockOptions; BERT's dropout, LayerNorm epsilon and
  initialization (truncated normal 0.02) are the defaults here.
  """

  vocab_size: int = 30522
  variant: str = "base"
  width: Optional[int] = None
  depth: Optional[int] = None
  num_heads: Optional[int] = None
  mlp_dim: Optional[int] = None
  max_len: int = 512
  type_vocab_size: int = 2
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  norm_eps: float = 1e-12
  kernel_init: str = "truncated_normal"
  mlp_hidden_dropout: bool = False  # modeling.py drops the layer output only (line 879)

  def shape(self) -> transformer.Shape:
    return preset(self.variant).overridden_by(self)

  @nn.compact
  def __call__(
      self,
      tokens_BxL,
      token_type_ids_BxL=None,
      input_mask_BxL=None,
      positions_BxL=None,
      segment_ids_BxL=None,
      train: bool = False,
  ):
    shape = self.shape()
    batch, length = tokens_BxL.shape
    transformer.sequence_length_check(length, self.max_len)
    if positions_BxL is None:
      positions_BxL = position.arange_positions(batch, length)
    if token_type_ids_BxL is None:
      token_type_ids_BxL = jnp.zeros_like(tokens_BxL)
    param_dtype = jnp.dtype(self.param_dtype)

    def embed(num, name):
      return nn.Embed(num, shape.width, embedding_init=INIT, param_dtype=param_dtype, name=name)

    x_BxLxD = (
        embed(self.vocab_size, "word_embeddings")(tokens_BxL)
        + embed(self.max_len, "position_embeddings")(positions_BxL)
        + embed(self.type_vocab_size, "token_type_embeddings")(token_type_ids_BxL)
    )
    x_BxLxD = nn.LayerNorm(epsilon=self.norm_eps, param_dtype=param_dtype, name="embeddings_norm")(
        x_BxLxD
    )
    x_BxLxD = nn.Dropout(self.dropout_rate)(x_BxLxD, deterministic=not train)

    mask = masks.MaskSpec().with_padding(input_mask_BxL).with_segments(segment_ids_BxL)
    cfg = transformer.BlockConfig.from_model_config(
        self, num_heads=shape.num_heads, mlp_dim=shape.mlp_dim, depth=shape.depth, pre_ln=False
    )
    x_BxLxD = transformer.Encoder(cfg, num_layers=shape.depth, block_name="layer", name="encoder")(
        x_BxLxD, mask, deterministic=not train
    )
    pooled_BxD = jnp.tanh(
        nn.Dense(
            shape.width,
            kernel_init=INIT,
            dtype=jnp.dtype(self.dtype),
            param_dtype=param_dtype,
            name="pooler",
        )(x_BxLxD[:, 0])
    )
    return x_BxLxD, pooled_BxD


class MlmHead(nn.Module):
  """Dense -> activation -> LayerNorm -> logits tied to the token embedding, plus an output bias."""

  norm_eps: float = 1e-12
  activation: str = "gelu_tanh"

  @nn.compact
  def __call__(self, x_BxPxD, embedding_VxD):
    h_BxPxD = nn.Dense(x_BxPxD.shape[-1], kernel_init=INIT, dtype=x_BxPxD.dtype, name="transform")(
        x_BxPxD
    )
    h_BxPxD = layers.activation(self.activation)(h_BxPxD)
    h_BxPxD = nn.LayerNorm(epsilon=self.norm_eps, name="transform_norm")(h_BxPxD)
    bias_V = self.param("output_bias", nn.initializers.zeros, (embedding_VxD.shape[0],))
    logits_BxPxV = jnp.einsum("bpd,vd->bpv", h_BxPxD, embedding_VxD.astype(h_BxPxD.dtype))
    return logits_BxPxV.astype(jnp.float32) + bias_V


def gather_positions(x_BxLxD, positions_BxP):
  """Rows of x at the given positions: the MLM head only runs where tokens were masked."""
  return jnp.take_along_axis(x_BxLxD, positions_BxP[..., None], axis=1)


class BertWithHead(nn.Module):
  """`Bert` under "bert", then the subclass's `head` on its sequence and pooled outputs.

  Takes Bert's inputs, then the head's own (positional after all five of Bert's, or by name).
  """

  bert: Bert

  @nn.compact
  def __call__(
      self,
      tokens_BxL,
      token_type_ids_BxL=None,
      input_mask_BxL=None,
      positions_BxL=None,
      segment_ids_BxL=None,
      *head_inputs,
      train: bool = False,
      **named_head_inputs,
  ):
    x_BxLxD, pooled_BxD = self.bert(
        tokens_BxL, token_type_ids_BxL, input_mask_BxL, positions_BxL, segment_ids_BxL, train=train
    )
    return self.head(x_BxLxD, pooled_BxD, *head_inputs, train=train, **named_head_inputs)


class BertForPreTraining(BertWithHead):
  """BERT with the masked-LM and next-sentence heads. Returns a dict of logits."""

  next_sentence: bool = True

  def head(self, x_BxLxD, pooled_BxD, masked_positions_BxP=None, *, train: bool):
    del train  # the heads have no dropout
    if masked_positions_BxP is not None:
      x_BxLxD = gather_positions(x_BxLxD, masked_positions_BxP)
    embedding_VxD = self.bert.variables["params"]["word_embeddings"]["embedding"]
    out = {
        "mlm_logits": MlmHead(self.bert.norm_eps, self.bert.activation, name="mlm")(
            x_BxLxD, embedding_VxD
        )
    }
    if self.next_sentence:
      out["nsp_logits"] = nn.Dense(2, kernel_init=INIT, name="nsp")(pooled_BxD).astype(jnp.float32)
    return out


class BertForMaskedLM(BertForPreTraining):
  """BERT with only the masked-LM head."""

  next_sentence: bool = False


class BertForSequenceClassification(BertWithHead):
  """BERT pooled output -> dropout -> linear classifier. Returns logits (B, num_classes)."""

  num_classes: int = 2

  def head(self, x_BxLxD, pooled_BxD, *, train: bool):
    del x_BxLxD  # classification reads only the pooled first token
    pooled_BxD = nn.Dropout(self.bert.dropout_rate)(pooled_BxD, deterministic=not train)
    return nn.Dense(self.num_classes, kernel_init=INIT, name="classifier")(pooled_BxD).astype(
        jnp.float32
    )
