"""ViT <-> Hugging Face ViTForImageClassification / ViTModel: same outputs both ways."""

import numpy as np
import pytest

from tests import peers
from tests.interop import helpers
from vit_jax import interop

torch = peers.require("torch")
transformers = peers.require("transformers")

TINY = dict(name="vit", variant="Ti/8", width=32, depth=2, num_heads=4, mlp_dim=64, num_classes=5)
IMAGES = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype(np.float32)


def hf_config(hidden_act="gelu", **extra):
  # HF's ViT defaults to layer_norm_eps=1e-12; ours (the original ViT's) is 1e-6.
  return transformers.ViTConfig(
      hidden_size=32,
      num_hidden_layers=2,
      num_attention_heads=4,
      intermediate_size=64,
      image_size=32,
      patch_size=8,
      layer_norm_eps=1e-6,
      hidden_act=hidden_act,
      **extra,
  )


def hf_run(model):
  with torch.no_grad():
    return model(pixel_values=torch.tensor(IMAGES.transpose(0, 3, 1, 2)))


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_import_classifier(tmp_path, hidden_act):
  """HF ViT checkpoints use the exact GELU; ours default to the references' tanh form, so the
  import sets the config's."""
  torch.manual_seed(0)
  hf = helpers.perturb_torch(
      transformers.ViTForImageClassification(hf_config(hidden_act, num_labels=5))
  )
  hf.save_pretrained(tmp_path / "hf")
  ckpt = interop.load(str(tmp_path / "hf"))
  assert ckpt.model["num_classes"] == 5 and ckpt.model["classifier"] == "token"
  assert ckpt.model["activation"] == {"gelu": "gelu", "gelu_new": "gelu_tanh"}[hidden_act]
  ours = ckpt.module().apply({"params": ckpt.tree()}, IMAGES)
  assert helpers.max_diff(ours, hf_run(hf).logits.numpy()) <= helpers.TOL


def test_import_backbone_with_pooler(tmp_path):
  torch.manual_seed(0)
  hf = helpers.perturb_torch(transformers.ViTModel(hf_config()))
  hf.save_pretrained(tmp_path / "hf")
  ckpt = interop.load(str(tmp_path / "hf"))
  assert ckpt.model["num_classes"] == 0 and ckpt.model["representation_size"] == 32
  pooled = ckpt.module().apply({"params": ckpt.tree()}, IMAGES)  # tanh(pre_logits(cls))
  assert helpers.max_diff(pooled, hf_run(hf).pooler_output.numpy()) <= helpers.TOL


@pytest.mark.parametrize("activation, hidden_act", [("gelu_tanh", "gelu_new"), ("gelu", "gelu")])
def test_export_classifier(tmp_path, activation, hidden_act):
  ckpt, _ = helpers.init_ours(dict(TINY, activation=activation), IMAGES)
  interop.save(ckpt, str(tmp_path / "hf"), to="hf")
  hf, info = transformers.ViTForImageClassification.from_pretrained(
      str(tmp_path / "hf"), output_loading_info=True
  )
  assert not any(info.values()), info
  assert (hf.config.layer_norm_eps, hf.config.hidden_act, hf.config.image_size) == (
      1e-6,
      hidden_act,
      32,
  )
  ours = ckpt.module().apply({"params": ckpt.tree()}, IMAGES)
  assert helpers.max_diff(ours, hf_run(hf.eval()).logits.numpy()) <= helpers.TOL
  again = interop.load(str(tmp_path / "hf"))
  for key, value in ckpt.params.items():
    np.testing.assert_array_equal(again.params[key], value, err_msg=key)
  # init_from fine-tunes from a Hugging Face directory too.
  pretrained, _ = interop.read_pretrained(str(tmp_path / "hf"))
  assert set(pretrained) == set(ckpt.params)
