"""GPT (Radford et al. 2018/2019): pre-LN causal decoder with an LM head tied to the embedding.

tokens -> token embedding (+ learned positions, or RoPE inside attention) -> causal blocks ->
final LayerNorm -> logits = h @ embedding^T (or a separate `lm_head` table when untied).
Today's decoders are the same stack with other block options (transformer.BlockOptions): Llama
is RMSNorm, SwiGLU, no biases, grouped-query attention, RoPE (llama3-scaled), untied; Qwen2 adds
query/key/value biases; Qwen3 adds QK-norm (interop/hf_llama.py maps their configs). With
`decode=True` every attention layer keeps a KV cache, so generation feeds one new token (or a
prompt chunk) per call.
"""

from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_jax import errors
from vit_jax.models import attention
from vit_jax.models import masks
from vit_jax.models import position
from vit_jax.models import transformer

PRESETS = {
    # Small shapes that train on a CPU in minutes.
    "pico": transformer.Shape(64, 2, 2),
    "nano": transformer.Shape(128, 4, 4),
    "micro": transformer.Shape(256, 6, 8),
    # GPT-2 (Radford et al. 2019).
    "gpt2": transformer.Shape(768, 12, 12),
    "gpt2-medium": transformer.Shape(1024, 24, 16),
    "gpt2-large": transformer.Shape(1280, 36, 20),
    "gpt2-xl": transformer.Shape(1600, 48, 25),
}
# Today's decoders, each as its config.json on the Hugging Face hub (the repository beside it)
# gives it: shape (hidden_size, num_hidden_layers, num_attention_heads, intermediate_size) and
# the block options by which it departs from LLAMA_BLOCK. vocab_size is its tokenizer's: a run
# gets it from --config.tokenizer.vocab_size, the model from the tokenizer.
LLAMA_BLOCK = dict(
    posemb="rope", normalization="rmsnorm", gated_mlp=True, activation="silu", biases="none"
)
_LLAMA3_ROPE = dict(
    rope_base=500_000.0,
    rope_scaling="llama3",
    rope_low_freq_factor=1.0,
    rope_high_freq_factor=4.0,
    rope_original_max_len=8192,
)
# fmt: off
DECODERS = {
    "smollm2-135m": dict(  # HuggingFaceTB/SmolLM2-135M
        width=576, depth=30, num_heads=9, mlp_dim=1536, num_kv_heads=3, vocab_size=49_152,
        norm_eps=1e-5, rope_base=100_000.0, tie_embeddings=True,
    ),
    "smollm2-360m": dict(  # HuggingFaceTB/SmolLM2-360M
        width=960, depth=32, num_heads=15, mlp_dim=2560, num_kv_heads=5, vocab_size=49_152,
        norm_eps=1e-5, rope_base=100_000.0, tie_embeddings=True,
    ),
    "qwen2.5-0.5b": dict(  # Qwen/Qwen2.5-0.5B (Qwen2ForCausalLM: query/key/value biases)
        width=896, depth=24, num_heads=14, mlp_dim=4864, num_kv_heads=2, vocab_size=151_936,
        norm_eps=1e-6, rope_base=1_000_000.0, tie_embeddings=True, biases="qkv",
    ),
    "llama3.2-1b": dict(  # meta-llama/Llama-3.2-1B
        width=2048, depth=16, num_heads=32, mlp_dim=8192, num_kv_heads=8, vocab_size=128_256,
        norm_eps=1e-5, tie_embeddings=True, rope_factor=32.0, **_LLAMA3_ROPE,
    ),
    "llama3.1-8b": dict(  # meta-llama/Llama-3.1-8B
        width=4096, depth=32, num_heads=32, mlp_dim=14336, num_kv_heads=8, vocab_size=128_256,
        norm_eps=1e-5, tie_embeddings=False, rope_factor=8.0, **_LLAMA3_ROPE,
    ),
}
# fmt: on
_SHAPE_KEYS = ("width", "depth", "num_heads", "mlp_dim")
PRESETS.update(
    {name: transformer.Shape(*(d[k] for k in _SHAPE_KEYS)) for name, d in DECODERS.items()}
)


def decoder_options(variant: str) -> dict:
  """A DECODERS preset's block options (LLAMA_BLOCK and its own), as model config keys; its shape
  comes with the variant, its vocabulary with the tokenizer."""
  options = {k: v for k, v in DECODERS[variant].items() if k not in _SHAPE_KEYS + ("vocab_size",)}
  return {**LLAMA_BLOCK, **options}


# GPT-2's src/model.py: token embeddings N(0, 0.02) (line 155), positions N(0, 0.01) (line 153).
TOKEN_INIT = nn.initializers.normal(stddev=0.02)
POSITION_INIT = nn.initializers.normal(stddev=0.01)


@jax.custom_vjp
def fp32_logits(h_BxTxD, embedding_VxD):
  """h @ embedding^T in fp32 from operands in the compute dtype (bf16 products, fp32 sums).

  The backward pass rounds the fp32 logits' gradient to the operands' dtype before its two
  products, as every bf16 layer's backward runs. Left to JAX's transpose, the fp32 gradient
  promotes both products to fp32: under bf16 they are the largest matmuls of a GPT-2 step, and a
  GPU runs them at a fraction of its bf16 rate. float16 keeps the fp32 gradient: its range ends
  at 6e-8, and the gradient, (softmax - one-hot) / tokens, falls below it (the trainer refuses
  float16: config/checks.py).
  """
  return jnp.einsum("btd,vd->btv", h_BxTxD, embedding_VxD, preferred_element_type=jnp.float32)


def _fp32_logits_forward(h_BxTxD, embedding_VxD):
  return fp32_logits(h_BxTxD, embedding_VxD), (h_BxTxD, embedding_VxD)


def _fp32_logits_backward(saved, grad_BxTxV):
  h_BxTxD, embedding_VxD = saved
  if h_BxTxD.dtype != jnp.float16:
    grad_BxTxV = grad_BxTxV.astype(h_BxTxD.dtype)
  grad_h_BxTxD = jnp.einsum(
      "btv,vd->btd", grad_BxTxV, embedding_VxD, preferred_element_type=jnp.float32
  )
  grad_embedding_VxD = jnp.einsum(
      "btv,btd->vd", grad_BxTxV, h_BxTxD, preferred_element_type=jnp.float32
  )
  return grad_h_BxTxD.astype(h_BxTxD.dtype), grad_embedding_VxD.astype(embedding_VxD.dtype)


fp32_logits.defvjp(_fp32_logits_forward, _fp32_logits_backward)

# Per platform, the multiple the LM head pads its vocabulary axis to. On a GPU, GPT-2's 50,257
# leaves every row of the (V, D) table and of the (B, T, V) logits and their gradient misaligned
# for the matrix units' wide loads, and the head's three products are a quarter of the step's
# FLOPs; nanoGPT pads to 50,304 "for efficiency" (model.py, GPTConfig). The padded rows of the
# table are zeros added at use, their logits sliced off before anything reads them: the
# parameters, what is scored, sampled and exported keep the true vocabulary.
VOCAB_PAD_MULTIPLE = {"gpu": 128}


def lm_head_logits(h_BxTxD, embedding_VxD):
  """fp32 logits (B, T, V) of the tied LM head, the vocabulary padded per VOCAB_PAD_MULTIPLE
  for the products and sliced back."""
  vocab = embedding_VxD.shape[0]
  multiple = VOCAB_PAD_MULTIPLE.get(attention.target_platform(), 1)
  padded = -(-vocab // multiple) * multiple
  if padded == vocab:
    return fp32_logits(h_BxTxD, embedding_VxD)
  embedding_PxD = jnp.pad(embedding_VxD, ((0, padded - vocab), (0, 0)))
  return fp32_logits(h_BxTxD, embedding_PxD)[..., :vocab]


class Gpt(transformer.BlockOptions, nn.Module, kw_only=True):
  """Decoder-only language model. Returns logits (B, T, vocab_size) in fp32.

  Block options: see transformer.BlockOptions; GPT-2's activation ("gelu_new"), LayerNorm
  epsilon and initialization (weights N(0, 0.02), src/model.py conv1d; residual output
  projections scaled by 1/sqrt(2 x depth), paper section 2.3) are the defaults here, with dropout
  on the branch outputs only (no dropout after the MLP activation).
  """

  vocab_size: int = 50257
  variant: str = "gpt2"
  width: Optional[int] = None
  depth: Optional[int] = None
  num_heads: Optional[int] = None
  mlp_ratio: int = 4
  mlp_dim: Optional[int] = None  # None: mlp_ratio x width
  tie_embeddings: bool = True  # the LM head reads the token embedding (GPT-2); else its own
  max_len: int = 1024
  posemb: str = "learn"  # "learn" (GPT-2) or "rope"
  decode: bool = False
  activation: str = "gelu_tanh"  # GPT-2's "gelu_new" (src/model.py:25-26)
  norm_eps: float = 1e-5
  kernel_init: str = "normal"
  scale_residual_init: bool = True
  mlp_hidden_dropout: bool = False

  def shape(self) -> transformer.Shape:
    if self.variant not in PRESETS:
      raise errors.ConfigError(
          f"Unknown GPT preset {self.variant!r}; choose one of {list(PRESETS)}."
      )
    return PRESETS[self.variant].overridden_by(self)

  @nn.compact
  def __call__(
      self,
      tokens_BxT,
      positions_BxT=None,
      segment_ids_BxT=None,
      train: bool = False,
      embedding_DxV=None,
  ):
    """Logits (B, T, V) of the next token at every position.

    `embedding_DxV`: the token embedding already transposed, for decoding loops (see sampling.py):
    XLA:CPU's product of a few rows with the (V, D) table read transposed takes a slow path
    (half of a batch-2 step; benchmarks/README.md), and a loop pays it at every token.
    """
    if self.posemb not in ("learn", "rope"):
      raise errors.ConfigError(
          f"Unknown GPT position embedding {self.posemb!r}; choose 'learn' or 'rope'."
      )
    shape = self.shape()
    batch, length = tokens_BxT.shape
    # In decode mode the init call's length is the cache size, which the table must cover too.
    transformer.sequence_length_check(length, self.max_len)
    param_dtype = jnp.dtype(self.param_dtype)
    # Rows are looked up in the parameters' dtype, then cast: the lookup's backward pass adds
    # the rows' gradients into the table in that dtype. Looked up in a bf16 copy of the table,
    # that sum was a bf16 scatter-add, which GPUs run slowly (openxla/xla issue 26371).
    wte = nn.Embed(
        self.vocab_size,
        shape.width,
        embedding_init=TOKEN_INIT,
        dtype=param_dtype,
        param_dtype=param_dtype,
        name="wte",
    )
    x_BxTxD = wte(tokens_BxT).astype(jnp.dtype(self.dtype))

    if self.decode:  # positions continue from where the cache stopped
      initialized = self.has_variable("cache", "position_index")
      counter = self.variable("cache", "position_index", lambda: jnp.array(0, jnp.int32))
      if initialized:
        positions_BxT = position.next_positions(counter, batch, length, positions_BxT)
    if positions_BxT is None:
      positions_BxT = position.arange_positions(batch, length)
    if self.posemb == "learn":
      wpe = nn.Embed(
          self.max_len,
          shape.width,
          embedding_init=POSITION_INIT,
          param_dtype=param_dtype,
          name="wpe",
      )
      x_BxTxD = x_BxTxD + wpe(positions_BxT)
    x_BxTxD = nn.Dropout(self.dropout_rate)(x_BxTxD, deterministic=not train)

    mask = None
    if not self.decode:  # the KV cache applies causality itself
      mask = masks.MaskSpec(causal=True).with_segments(segment_ids_BxT)
    cfg = transformer.BlockConfig.from_model_config(
        self,
        num_heads=shape.num_heads,
        mlp_dim=shape.mlp_dim or self.mlp_ratio * shape.width,
        depth=shape.depth,
        rope=self.posemb == "rope",
    )
    h_BxTxD = transformer.Encoder(
        cfg, num_layers=shape.depth, decode=self.decode, block_name="h", name="decoder"
    )(x_BxTxD, mask, deterministic=not train, positions_BxL=positions_BxT)
    head_VxD = wte.embedding
    if not self.tie_embeddings:
      head_VxD = self.param("lm_head", TOKEN_INIT, (self.vocab_size, shape.width), param_dtype)
    if embedding_DxV is not None:  # a decoding loop's: forward only
      return jnp.dot(
          h_BxTxD, embedding_DxV.astype(h_BxTxD.dtype), preferred_element_type=jnp.float32
      )
    return lm_head_logits(h_BxTxD, head_VxD.astype(h_BxTxD.dtype))


def head_table(params):
  """The (V, D) table the LM head multiplies by: its own when untied, else the token embedding."""
  return params["lm_head"] if "lm_head" in params else params["wte"]["embedding"]
