"""ViT <-> Hugging Face ViTForImageClassification / ViTModel: same outputs both ways."""

import numpy as np

from tests import peers
from tests.interop import helpers
from vit_jax import interop

torch = peers.require("torch")
transformers = peers.require("transformers")

TINY = dict(name="vit", variant="Ti/8", width=32, depth=2, num_heads=4, mlp_dim=64, num_classes=5)
IMAGES = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype(np.float32)


def hf_config(**extra):
  # HF's ViT defaults to layer_norm_eps=1e-12; ours (the original ViT's) is 1e-6.
  return transformers.ViTConfig(
      hidden_size=32,
      num_hidden_layers=2,
      num_attention_heads=4,
      intermediate_size=64,
      image_size=32,
      patch_size=8,
      layer_norm_eps=1e-6,
      hidden_act="gelu",
      **extra,
  )


def hf_run(model):
  with torch.no_grad():
    return model(pixel_values=torch.tensor(IMAGES.transpose(0, 3, 1, 2)))


def test_import_classifier(tmp_path):
  torch.manual_seed(0)
  hf = helpers.perturb_torch(transformers.ViTForImageClassification(hf_config(num_labels=5)))
  hf.save_pretrained(tmp_path / "hf")
  ckpt = interop.load(str(tmp_path / "hf"))
  assert ckpt.model["num_classes"] == 5 and ckpt.model["classifier"] == "token"
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


def test_export_classifier(tmp_path):
  ckpt, _ = helpers.init_ours(TINY, IMAGES)
  interop.save(ckpt, str(tmp_path / "hf"), to="hf")
  hf, info = transformers.ViTForImageClassification.from_pretrained(
      str(tmp_path / "hf"), output_loading_info=True
  )
  assert not any(info.values()), info
  assert (hf.config.layer_norm_eps, hf.config.hidden_act, hf.config.image_size) == (
      1e-6,
      "gelu",
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
