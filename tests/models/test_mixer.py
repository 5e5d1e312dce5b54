"""MLP-Mixer and FNet logits against a NumPy forward pass written from the papers, on the models'
own (perturbed) parameters."""

import math

import jax
import numpy as np

from vit_jax.models import build_model

IMAGES = np.random.default_rng(0).normal(size=(2, 16, 16, 3)).astype(np.float32)


def gelu(x):
  """GELU's tanh form, as the reference codes compute it (flax nn.gelu: vision_transformer
  models_mixer.py:28, FNet's f_net/layers.py)."""
  return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm(x, p, eps=1e-6):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * p["scale"] + p["bias"]


def mlp(x, p):
  return (
      gelu(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]) @ p["Dense_1"]["kernel"]
      + p["Dense_1"]["bias"]
  )


def patches(images_BxHxWxC, conv, patch):
  """Non-overlapping patches, row-major, each flattened (row, col, channel) and projected."""
  b, h, w, c = images_BxHxWxC.shape
  x = images_BxHxWxC.reshape(b, h // patch, patch, w // patch, patch, c).transpose(0, 1, 3, 2, 4, 5)
  x_BxNxP = x.reshape(b, -1, patch * patch * c)
  return x_BxNxP @ conv["kernel"].reshape(patch * patch * c, -1) + conv["bias"]


def init_perturbed(config):
  model = build_model(config)
  params = model.init(jax.random.PRNGKey(0), IMAGES)["params"]
  rng = np.random.default_rng(1)
  params = jax.tree.map(lambda p: np.asarray(p, np.float64) + rng.normal(0, 0.1, p.shape), params)
  return model, params


def test_mixer_logits_equal_the_papers_forward_pass():
  model, p = init_perturbed({"name": "mixer", "variant": "S/4", "num_blocks": 2, "num_classes": 7})
  x = patches(IMAGES.astype(np.float64), p["stem"], 4)  # (B, 16 tokens, 512)
  for i in range(2):
    block = p[f"MixerBlock_{i}"]
    y_BxDxN = layer_norm(x, block["LayerNorm_0"]).transpose(0, 2, 1)
    x = x + mlp(y_BxDxN, block["token_mixing"]).transpose(0, 2, 1)  # mixes across tokens
    x = x + mlp(layer_norm(x, block["LayerNorm_1"]), block["channel_mixing"])
  pooled = layer_norm(x, p["pre_head_layer_norm"]).mean(axis=1)
  expected = pooled @ p["head"]["kernel"] + p["head"]["bias"]
  logits = model.apply({"params": jax.tree.map(np.float32, p)}, IMAGES)
  np.testing.assert_allclose(logits, expected, rtol=2e-4, atol=2e-4)


def test_fnet_logits_equal_the_papers_forward_pass():
  config = {"name": "fnet", "patch_size": 4, "width": 8, "depth": 2, "mlp_dim": 16}
  model, p = init_perturbed({**config, "num_classes": 5})
  x = patches(IMAGES.astype(np.float64), p["embedding"], 4) + p["pos_embedding"]
  for i in range(2):
    block = p[f"fnetblock_{i}"]
    mixed = np.real(np.fft.fft2(x, axes=(1, 2)))  # DFT over tokens and features, real part
    x = layer_norm(x + mixed, block["mixing_norm"], eps=1e-12)
    x = layer_norm(x + mlp(x, block["mlp"]), block["output_norm"], eps=1e-12)
  expected = x.mean(axis=1) @ p["head"]["kernel"] + p["head"]["bias"]
  logits = model.apply({"params": jax.tree.map(np.float32, p)}, IMAGES)
  np.testing.assert_allclose(logits, expected, rtol=2e-4, atol=2e-4)
