"""Attention weights come out of every encoder block of ViT, BERT and GPT through the models' own
`return_attention` path."""

import jax
import jax.numpy as jnp
import numpy as np

from vit_jax import models
from vit_jax.analysis import attention

VIT = dict(name="vit", variant="Ti/4", width=32, depth=3, num_heads=2, mlp_dim=64, num_classes=5)


def _init(config, *inputs):
  module = models.build_model(config)
  return module, module.init(jax.random.PRNGKey(0), *inputs)["params"]


def test_vit_weights_are_the_ones_vit_itself_returns():
  images = jax.random.normal(jax.random.PRNGKey(1), (2, 16, 16, 3))
  module, params = _init(VIT, images)
  logits, weights = attention.attention_weights(module, params, images)
  assert len(weights) == 3 and weights[0].shape == (2, 2, 17, 17)
  np.testing.assert_allclose(np.sum(weights[2], -1), 1.0, atol=1e-5)
  _, state = module.apply(
      {"params": params}, images, return_attention=True, mutable=["intermediates"]
  )
  own = state["intermediates"]["Transformer"]
  for i, w in enumerate(weights):
    np.testing.assert_allclose(w, own[f"encoderblock_{i}"]["attention_weights"][0], atol=1e-6)
  np.testing.assert_allclose(logits, module.apply({"params": params}, images), atol=1e-5)


def test_gpt_weights_are_causal_and_bert_weights_are_not():
  tokens = jnp.asarray([[3, 1, 4, 1, 5, 9]], jnp.int32)
  gpt, gpt_params = _init(dict(name="gpt", vocab_size=12, variant="pico", max_len=8), tokens)
  _, weights = attention.attention_weights(gpt, gpt_params, tokens)
  assert len(weights) == 2
  for w in weights:
    np.testing.assert_array_equal(np.triu(w[0, 0], k=1), 0.0)
  bert, bert_params = _init(dict(name="bert_mlm", vocab_size=12, variant="tiny", max_len=8), tokens)
  _, weights = attention.attention_weights(bert, bert_params, tokens)
  assert len(weights) == 2 and np.all(np.triu(weights[0][0, 0], k=1).sum() > 0.1)
