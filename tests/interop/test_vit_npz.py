"""ViT .npz: exact round trips in the original ViT and big_vision layouts; what init_from reads."""

import numpy as np
import pytest

from tests.interop import helpers
from vit_jax import interop

TINY = dict(name="vit", variant="Ti/8", width=32, depth=2, num_heads=4, mlp_dim=64, num_classes=5)
IMAGES = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype(np.float32)


def logits(ckpt):
  return np.asarray(ckpt.module().apply({"params": ckpt.tree()}, IMAGES))


@pytest.mark.parametrize(
    "model",
    [
        TINY,
        dict(TINY, representation_size=16),
        dict(TINY, classifier="map"),
        dict(TINY, classifier="gap", num_classes=0),
    ],
    ids=["token", "pre_logits", "map", "gap_no_head"],
)
def test_round_trip_is_bit_identical(tmp_path, model):
  ckpt, _ = helpers.init_ours(model, IMAGES)
  interop.save(ckpt, str(tmp_path / "vit.npz"), to="npz")
  again = interop.load(str(tmp_path / "vit.npz"))
  assert set(again.params) == set(ckpt.params)
  for key, value in ckpt.params.items():
    np.testing.assert_array_equal(again.params[key], value, err_msg=key)
  # A bare .npz carries no config: it is inferred from the names and shapes.
  inferred = again.module()
  assert inferred.shape() == ckpt.module().shape()
  assert (inferred.classifier, inferred.num_classes, inferred.representation_size) == (
      model.get("classifier", "token"),
      model["num_classes"],
      model.get("representation_size"),
  )
  np.testing.assert_array_equal(logits(again), logits(ckpt))


def test_original_layout_names(tmp_path):
  ckpt, _ = helpers.init_ours(TINY, IMAGES)
  interop.save(ckpt, str(tmp_path / "vit.npz"), to="npz")
  with np.load(tmp_path / "vit.npz", allow_pickle=False) as f:
    names = set(f.files)
    assert f["embedding/kernel"].shape == (8, 8, 3, 32)  # HWIO
    assert f["Transformer/posembed_input/pos_embedding"].shape == (1, 17, 32)  # with the cls slot
  merged, _ = interop.finetune_params(ckpt.tree(), str(tmp_path / "vit.npz"))
  for key, value in interop.flatten(merged).items():  # init_from reads the very same values
    np.testing.assert_array_equal(value, ckpt.params[key], err_msg=key)
  assert {
      "cls",
      "head/kernel",
      "Transformer/encoder_norm/scale",
      "Transformer/encoderblock_1/MultiHeadDotProductAttention_1/query/kernel",
      "Transformer/encoderblock_1/MlpBlock_3/Dense_1/bias",
  } <= names


@pytest.mark.parametrize("classifier", ["token", "map", "gap"])
def test_big_vision_layout(tmp_path, classifier):
  ckpt, _ = helpers.init_ours(dict(TINY, classifier=classifier), IMAGES)
  path = str(tmp_path / "bv.npz")
  interop.save(ckpt, path, to="npz", layout="big_vision")
  with np.load(path, allow_pickle=False) as f:
    names = set(f.files)
    assert f["params/pos_embedding"].shape == (1, 16, 32)  # no cls slot
  assert "params/Transformer/encoderblock_0/MultiHeadDotProductAttention_0/query/kernel" in names
  assert "params/Transformer/encoderblock_0/MlpBlock_0/Dense_0/kernel" in names
  assert "params/Transformer/encoderblock_0/LayerNorm_1/scale" in names
  assert ("params/MAPHead_0/MultiHeadDotProductAttention_0/out/kernel" in names) == (
      classifier == "map"
  )
  again = interop.load(path)
  assert again.model["classifier"] == classifier
  # The cls slot moved into the cls token: other values, the very same outputs.
  np.testing.assert_array_equal(logits(again), logits(ckpt))
  # init_from (fine-tuning) reads the same file into the same parameters.
  merged, _ = interop.finetune_params(ckpt.tree(), path)
  np.testing.assert_array_equal(
      np.asarray(ckpt.module().apply({"params": merged}, IMAGES)), logits(ckpt)
  )


def test_scanned_big_vision_and_optimizer_prefix(tmp_path):
  ckpt, _ = helpers.init_ours(TINY, IMAGES)
  interop.save(ckpt, str(tmp_path / "bv.npz"), to="npz", layout="big_vision")
  with np.load(tmp_path / "bv.npz", allow_pickle=False) as f:
    flat = dict(f.items())
  scanned, blocks = {}, {}
  for key, value in flat.items():
    if key.startswith("params/Transformer/encoderblock_"):
      index, rest = key[len("params/Transformer/encoderblock_") :].split("/", 1)
      blocks.setdefault(rest, {})[int(index)] = value
    else:
      scanned[key] = value
  for rest, by_index in blocks.items():  # big_vision's scan=True stacks blocks on axis 0
    scanned[f"params/Transformer/encoderblock/{rest}"] = np.stack([by_index[0], by_index[1]])
  np.savez(tmp_path / "scanned.npz", **scanned)
  np.testing.assert_array_equal(logits(interop.load(str(tmp_path / "scanned.npz"))), logits(ckpt))

  np.savez(tmp_path / "old.npz", **{"opt/target/" + k: v for k, v in ckpt.params.items()})
  old = interop.load(str(tmp_path / "old.npz"))
  assert any("opt/target/" in n for n in old.notes)
  for key, value in ckpt.params.items():
    np.testing.assert_array_equal(old.params[key], value, err_msg=key)


def test_scanned_layers_convert_per_layer(tmp_path):
  """A model trained with scan_layers=True (stacked layers) exports one entry per layer."""
  scanned, _ = helpers.init_ours(dict(TINY, scan_layers=True), IMAGES)
  assert "Transformer/encoderblock_1/LayerNorm_0/scale" in scanned.params
  interop.save(scanned, str(tmp_path / "vit.npz"), to="npz")
  per_layer = interop.load(str(tmp_path / "vit.npz"))
  for key, value in scanned.params.items():
    np.testing.assert_array_equal(per_layer.params[key], value, err_msg=key)
  # A scanned stack compiles differently from an unrolled one: equal up to fp32 rounding.
  assert helpers.max_diff(logits(per_layer), logits(scanned)) <= helpers.TOL
  # And back into a scanned workdir, whose params are stacked again.
  interop.save(
      interop.load(str(tmp_path / "vit.npz"), {"scan_layers": True}),
      str(tmp_path / "workdir"),
      to="orbax",
  )
  stacked = interop.read_params(str(tmp_path / "workdir"))
  assert stacked["Transformer/encoderblock/layers/block/LayerNorm_0/scale"].shape == (2, 32)
  np.testing.assert_array_equal(logits(interop.load(str(tmp_path / "workdir"))), logits(scanned))
