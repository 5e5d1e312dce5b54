"""Blocks and stacks against their definitions, composed by hand from the blocks' own attention,
MLP and LayerNorm parameters: pre-LN x + f(LN(x)), post-LN LN(x + f(x)), in the papers' order."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax import errors
from vit_jax.models import attention
from vit_jax.models import layers
from vit_jax.models import masks
from vit_jax.models import transformer

X_BxLxD = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 16))
ENCODED_BxSxD = jax.random.normal(jax.random.PRNGKey(1), (2, 3, 16))
MASK = masks.causal_mask(5, 2)
CROSS_MASK = masks.padding_mask(np.ones((2, 5)), np.array([[1, 1, 0], [1, 1, 1]]))


def perturbed(params, seed=2):
  """LayerNorm scales start at 1 and biases at 0: perturb so a swapped norm shows."""
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree.unflatten(
      tree, [p + 0.1 * jax.random.normal(k, p.shape) for p, k in zip(leaves, keys)]
  )


def parts(params):
  """Apply functions for a block's sublayers, named as the block names its params."""

  def attend(name, *inputs, mask):
    layer = attention.MultiHeadAttention(num_heads=2)
    return layer.apply({"params": params[name]}, *inputs, mask=mask)

  def norm(name, x):
    return nn.LayerNorm(epsilon=1e-6).apply({"params": params[name]}, x)

  def mlp(name, x):
    return layers.MlpBlock(mlp_dim=32).apply({"params": params[name]}, x)

  return attend, norm, mlp


@pytest.mark.parametrize("pre_ln", [True, False])
def test_encoder_block_is_attention_then_mlp_residuals(pre_ln):
  cfg = transformer.BlockConfig(num_heads=2, mlp_dim=32, pre_ln=pre_ln)
  block = transformer.EncoderBlock(cfg)
  params = perturbed(block.init(jax.random.PRNGKey(3), X_BxLxD, MASK)["params"])
  attend, norm, mlp = parts(params)
  x = X_BxLxD
  if pre_ln:
    x = x + attend("MultiHeadDotProductAttention_1", norm("LayerNorm_0", x), mask=MASK)
    x = x + mlp("MlpBlock_3", norm("LayerNorm_2", x))
  else:
    x = norm("LayerNorm_0", x + attend("MultiHeadDotProductAttention_1", x, mask=MASK))
    x = norm("LayerNorm_2", x + mlp("MlpBlock_3", x))
  np.testing.assert_allclose(block.apply({"params": params}, X_BxLxD, MASK), x, atol=1e-5)


@pytest.mark.parametrize("pre_ln", [True, False])
def test_decoder_block_is_self_then_cross_attention_then_mlp(pre_ln):
  cfg = transformer.BlockConfig(num_heads=2, mlp_dim=32, pre_ln=pre_ln)
  block = transformer.DecoderBlock(cfg)
  inputs = (X_BxLxD, ENCODED_BxSxD, MASK, CROSS_MASK)
  params = perturbed(block.init(jax.random.PRNGKey(3), *inputs)["params"])
  attend, norm, mlp = parts(params)
  y = X_BxLxD
  if pre_ln:
    y = y + attend("self_attention", norm("norm_self_attention", y), mask=MASK)
    y = y + attend(
        "cross_attention", norm("norm_cross_attention", y), ENCODED_BxSxD, mask=CROSS_MASK
    )
    y = y + mlp("mlp", norm("norm_mlp", y))
  else:
    y = norm("norm_self_attention", y + attend("self_attention", y, mask=MASK))
    y = norm(
        "norm_cross_attention",
        y + attend("cross_attention", y, ENCODED_BxSxD, mask=CROSS_MASK),
    )
    y = norm("norm_mlp", y + mlp("mlp", y))
  np.testing.assert_allclose(block.apply({"params": params}, *inputs), y, atol=1e-5)


@pytest.mark.parametrize("pre_ln", [True, False])
def test_stacks_apply_their_blocks_in_order_and_a_final_norm_only_when_pre_ln(pre_ln):
  cfg = transformer.BlockConfig(num_heads=2, mlp_dim=32, pre_ln=pre_ln)
  encoder = transformer.Encoder(cfg, num_layers=3)
  params = perturbed(encoder.init(jax.random.PRNGKey(3), X_BxLxD, MASK)["params"])
  x = X_BxLxD
  for i in range(3):
    x = transformer.EncoderBlock(cfg).apply({"params": params[f"encoderblock_{i}"]}, x, MASK)
  assert ("encoder_norm" in params) == pre_ln
  if pre_ln:
    x = nn.LayerNorm(epsilon=1e-6).apply({"params": params["encoder_norm"]}, x)
  np.testing.assert_allclose(encoder.apply({"params": params}, X_BxLxD, MASK), x, atol=1e-5)

  decoder = transformer.Decoder(cfg, num_layers=2)
  inputs = (X_BxLxD, ENCODED_BxSxD, MASK, CROSS_MASK)
  params = perturbed(decoder.init(jax.random.PRNGKey(3), *inputs)["params"])
  y = X_BxLxD
  for i in range(2):
    block = transformer.DecoderBlock(cfg)
    y = block.apply({"params": params[f"decoderblock_{i}"]}, y, *inputs[1:])
  assert ("decoder_norm" in params) == pre_ln
  if pre_ln:
    y = nn.LayerNorm(epsilon=1e-6).apply({"params": params["decoder_norm"]}, y)
  np.testing.assert_allclose(decoder.apply({"params": params}, *inputs), y, atol=1e-5)


def test_stochastic_depth_grows_linearly_to_the_last_block():
  np.testing.assert_allclose(transformer.droppath_rates(0.3, 4), [0.0, 0.1, 0.2, 0.3])
  assert transformer.droppath_rates(0.3, 1) == [0.3]
  assert transformer.droppath_rates(0.3, 0) == []


def test_dropout_and_drop_path_act_only_in_training():
  cfg = transformer.BlockConfig(num_heads=2, mlp_dim=32, dropout_rate=0.5, droppath_rate=0.5)
  encoder = transformer.Encoder(cfg, num_layers=2)
  params = encoder.init(jax.random.PRNGKey(3), X_BxLxD)
  eval_out = encoder.apply(params, X_BxLxD)
  np.testing.assert_array_equal(eval_out, encoder.apply(params, X_BxLxD, deterministic=True))
  train_out = encoder.apply(
      params, X_BxLxD, deterministic=False, rngs={"dropout": jax.random.PRNGKey(4)}
  )
  assert not np.allclose(train_out, eval_out, atol=1e-3)


def test_bad_remat_policy_and_long_sequences_are_config_errors():
  with pytest.raises(errors.ConfigError, match="Unknown remat policy 'most'"):
    transformer.block_class(
        transformer.EncoderBlock, transformer.BlockConfig(num_heads=2, mlp_dim=32, remat="most")
    )
  with pytest.raises(errors.ConfigError, match="has 9 tokens but .* max_len=8"):
    transformer.sequence_length_check(9, 8, "input sequence")
  transformer.sequence_length_check(8, 8)
  transformer.sequence_length_check(100, None)


def test_stochastic_depth_alone_drops_whole_residual_branches_in_training():
  cfg = transformer.BlockConfig(num_heads=2, mlp_dim=32, droppath_rate=0.5)
  block = transformer.EncoderBlock(cfg, droppath_rate=0.5, deterministic=False)
  x_BxLxD = jax.random.normal(jax.random.PRNGKey(0), (64, 5, 16))
  params = block.init(jax.random.PRNGKey(3), x_BxLxD)
  out = block.apply(params, x_BxLxD, rngs={"dropout": jax.random.PRNGKey(4)})
  plain = transformer.EncoderBlock(cfg).apply(params, x_BxLxD)
  # A sample whose both branches were dropped comes out as it went in (pre-LN residuals).
  untouched = np.all(np.isclose(out, x_BxLxD, atol=1e-6), axis=(1, 2))
  assert 0 < untouched.sum() < 64
  assert not np.allclose(out, plain, atol=1e-3)


def test_returned_attention_weights_are_sown_per_layer():
  cfg = transformer.BlockConfig(num_heads=2, mlp_dim=32)
  encoder = transformer.Encoder(cfg, num_layers=2)
  params = encoder.init(jax.random.PRNGKey(3), X_BxLxD)
  plain = encoder.apply(params, X_BxLxD, MASK)
  out, state = encoder.apply(
      params, X_BxLxD, MASK, return_attention=True, mutable=["intermediates"]
  )
  np.testing.assert_allclose(out, plain, atol=1e-6)
  for i in range(2):
    (weights_BxHxLxL,) = state["intermediates"][f"encoderblock_{i}"]["attention_weights"]
    assert weights_BxHxLxL.shape == (2, 2, 5, 5)
    np.testing.assert_allclose(weights_BxHxLxL.sum(-1), 1.0, atol=1e-5)
    assert float(jnp.abs(jnp.triu(weights_BxHxLxL, k=1)).max()) == 0.0  # the causal mask held


def test_a_rope_gpt_sees_the_order_of_its_tokens():
  """With RoPE as its only position signal, one layer's last-token logits depend on the order of
  the tokens before it (attention over the same set of keys would not)."""
  from vit_jax.models import build_model  # pylint: disable=g-import-not-at-top

  cfg = {"name": "gpt", "variant": "pico", "vocab_size": 13, "max_len": 8, "posemb": "rope"}
  cfg["depth"] = 1  # deeper, earlier tokens' states already differ by what they could see
  model = build_model(cfg)
  tokens = jnp.array([[3, 5, 7]])
  params = model.init(jax.random.PRNGKey(0), tokens)["params"]
  params = perturbed(params)
  logits = model.apply({"params": params}, tokens)
  swapped = model.apply({"params": params}, jnp.array([[5, 3, 7]]))
  assert not np.allclose(logits[0, -1], swapped[0, -1], atol=1e-5)
