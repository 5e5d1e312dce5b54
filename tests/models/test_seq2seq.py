"""The encoder-decoder assembled by hand from its own stacks, and what its logits may depend on:
never on later target tokens or on padded inputs, always on the real inputs."""

import jax
import numpy as np
import pytest

from vit_jax.models import build_model
from vit_jax.models import masks
from vit_jax.models import position
from vit_jax.models import transformer

CONFIG = {
    "name": "seq2seq",
    "vocab_size": 23,
    "width": 16,
    "num_layers": 2,
    "num_decoder_layers": 1,
    "num_heads": 2,
    "mlp_dim": 32,
    "max_len": 12,
}
INPUTS = np.array([[3, 4, 5, 6, 7, 0, 0], [8, 9, 10, 11, 12, 13, 14]], np.int32)
INPUT_MASK = np.array([[1, 1, 1, 1, 1, 0, 0], [1] * 7], np.int32)
TARGETS = np.array([[1, 15, 16, 17, 18], [1, 19, 20, 21, 22]], np.int32)


@pytest.fixture(scope="module", params=[True, False], ids=["pre_ln", "post_ln"])
def model_and_params(request):
  model = build_model({**CONFIG, "pre_ln": request.param})
  params = model.init(jax.random.PRNGKey(0), INPUTS, TARGETS)["params"]
  return model, params


def logits(model, params, inputs=INPUTS, targets=TARGETS, input_mask=INPUT_MASK):
  return np.asarray(model.apply({"params": params}, inputs, targets, input_mask))


def test_logits_compose_embedding_encoder_decoder_and_tied_output(model_and_params):
  model, params = model_and_params
  cfg = transformer.BlockConfig.from_model_config(
      model, num_heads=2, mlp_dim=32, pre_ln=model.pre_ln
  )
  embedding_VxD = params["token_embed"]["embedding"]
  table_LxD = position.sincos_1d(12, 16)

  def embed(tokens_BxL):  # scaled by sqrt(width), as in the original Transformer
    return embedding_VxD[tokens_BxL] * np.sqrt(16) + table_LxD[: tokens_BxL.shape[1]]

  encoded = transformer.Encoder(cfg, num_layers=2).apply(
      {"params": params["encoder"]}, embed(INPUTS), masks.padding_mask(INPUT_MASK)
  )
  target_valid = np.ones(TARGETS.shape, np.int32)
  self_mask = masks.combine(masks.causal_mask(5, 2), masks.padding_mask(target_valid))
  cross_mask = masks.padding_mask(target_valid, INPUT_MASK)
  decoded = transformer.Decoder(cfg, num_layers=1).apply(
      {"params": params["decoder"]}, embed(TARGETS), encoded, self_mask, cross_mask
  )
  expected = np.asarray(decoded) @ np.asarray(embedding_VxD).T
  np.testing.assert_allclose(logits(model, params), expected, rtol=1e-5, atol=1e-5)


def test_later_targets_change_nothing_before_them(model_and_params):
  model, params = model_and_params
  base = logits(model, params)
  for t in range(1, 5):
    changed = TARGETS.copy()
    changed[:, t] = (changed[:, t] + 1) % 23
    new = logits(model, params, targets=changed)
    np.testing.assert_allclose(new[:, :t], base[:, :t], atol=1e-6)
    assert not np.allclose(new[:, t:], base[:, t:], atol=1e-4)


def test_padded_inputs_change_nothing_and_real_inputs_change_every_position(model_and_params):
  model, params = model_and_params
  base = logits(model, params)
  padded = INPUTS.copy()
  padded[0, 5:] = [20, 21]  # behind the mask
  np.testing.assert_allclose(logits(model, params, inputs=padded), base, atol=1e-6)
  real = INPUTS.copy()
  real[:, 0] = 2
  changed = logits(model, params, inputs=real)
  for t in range(5):  # cross-attention carries the change to every target position
    assert not np.allclose(changed[:, t], base[:, t], atol=1e-4)
  # Without a mask every input token counts.
  assert not np.allclose(logits(model, params, inputs=padded, input_mask=None), base, atol=1e-4)


def test_learned_positions_are_looked_up_per_position():
  model = build_model({**CONFIG, "posemb": "learn"})
  params = model.init(jax.random.PRNGKey(0), INPUTS, TARGETS)["params"]
  positions_LxD = params["position_embed"]["embedding"]
  assert positions_LxD.shape == (12, 16)
  shifted = jax.tree.map(lambda p: p, params)
  bump_D = jax.random.normal(jax.random.PRNGKey(1), (16,))  # not constant: LayerNorm removes that
  shifted["position_embed"]["embedding"] = positions_LxD.at[4].add(bump_D)  # target slot 4 only
  short = INPUTS[:, :3]  # slot 4 then serves the targets alone
  base = logits(model, params, inputs=short, input_mask=None)
  new = logits(model, shifted, inputs=short, input_mask=None)
  np.testing.assert_allclose(new[:, :4], base[:, :4], atol=1e-6)  # causal: earlier slots
  assert not np.allclose(new[:, 4], base[:, 4], atol=1e-4)
