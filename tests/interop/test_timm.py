"""Our exported ViT .npz loads into timm's VisionTransformer (its npz loader) with the same logits.

timm needs torchvision, whose wheel must match torch (the test extras pin the pair), and which must
load before TensorFlow in a process (tests/conftest.py imports it first).
"""

import numpy as np
import pytest

from tests import peers
from tests.interop import helpers
from vit_jax import interop

torch = peers.require("torch")
timm = peers.require("timm")

TINY = dict(name="vit", variant="Ti/8", width=32, depth=2, num_heads=4, mlp_dim=64, num_classes=5)
IMAGES = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype(np.float32)

CASES = {  # our classifier, .npz layout, timm options for the same architecture
    "token": ("token", "vit", {}),
    # big_vision adds no position embedding to the cls token: timm's no_embed_class.
    "token_big_vision": ("token", "big_vision", {"no_embed_class": True}),
    # Ours normalizes before the mean, as timm does without fc_norm.
    "gap": ("gap", "vit", {"class_token": False, "global_pool": "avg", "fc_norm": False}),
    "map_big_vision": ("map", "big_vision", {"class_token": False, "global_pool": "map"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_timm_loads_our_npz(tmp_path, case):
  classifier, layout, timm_options = CASES[case]
  ckpt, _ = helpers.init_ours(dict(TINY, classifier=classifier), IMAGES)
  path = str(tmp_path / "vit.npz")
  interop.save(ckpt, path, to="npz", layout=layout)
  model = timm.create_model(
      "vit_tiny_patch16_224",
      pretrained=False,
      num_classes=5,
      img_size=32,
      patch_size=8,
      embed_dim=32,
      depth=2,
      num_heads=4,
      mlp_ratio=2.0,
      act_layer="gelu_tanh",  # ours by default, as the original ViT's (timm's default: exact)
      **timm_options,
  )
  timm.models.load_checkpoint(model, path)  # .npz -> VisionTransformer.load_pretrained
  with torch.no_grad():
    theirs = model.eval()(torch.tensor(IMAGES.transpose(0, 3, 1, 2))).numpy()
  ours = ckpt.module().apply({"params": ckpt.tree()}, IMAGES)
  assert helpers.max_diff(ours, theirs) <= helpers.TOL
