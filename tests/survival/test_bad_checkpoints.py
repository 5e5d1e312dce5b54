"""Every mismatch is one clear error naming the keys, and nothing is half-written on failure."""

import json
import os

import numpy as np
import pytest

from tests.interop import helpers
from vit_jax import interop
from vit_jax import storage

VIT = dict(name="vit", variant="Ti/8", width=32, depth=2, num_heads=4, mlp_dim=64, num_classes=5)
GPT = dict(name="gpt", vocab_size=50, variant="pico", width=32, depth=2, num_heads=4, max_len=16)
IMAGES = np.zeros((1, 32, 32, 3), np.float32)


@pytest.fixture(name="vit_npz")
def fixture_vit_npz(tmp_path):
  ckpt, _ = helpers.init_ours(VIT, IMAGES)
  interop.save(ckpt, str(tmp_path / "vit.npz"), to="npz")
  return str(tmp_path / "vit.npz")


@pytest.fixture(name="hf_gpt")
def fixture_hf_gpt(tmp_path):
  ckpt, _ = helpers.init_ours(GPT, np.zeros((1, 4), np.int32))
  interop.save(ckpt, str(tmp_path / "gpt"), to="hf")
  return str(tmp_path / "gpt")


def edit_npz(src, dst, edit):
  with np.load(src, allow_pickle=False) as f:
    flat = dict(f.items())
  edit(flat)
  np.savez(dst, **flat)
  return dst


def test_other_class_count_needs_reinit_head(vit_npz):
  with pytest.raises(interop.ConversionError) as e:
    interop.load(vit_npz, {"num_classes": 10})
  message = str(e.value)
  assert "shape mismatch: head/kernel checkpoint (32, 5), model (32, 10)" in message
  assert "shape mismatch: head/bias checkpoint (5,), model (10,)" in message
  assert "reinit_head=True (--reinit-head)" in message
  ckpt = interop.load(vit_npz, {"num_classes": 10}, reinit_head=True)
  assert ckpt.params["head/kernel"].shape == (32, 10)
  assert "head/kernel: checkpoint (32, 5) -> model (32, 10), re-initialized" in ckpt.notes


def test_missing_unexpected_and_misshaped_keys(vit_npz, tmp_path):
  def edit(flat):
    del flat["Transformer/encoderblock_1/LayerNorm_0/scale"]
    flat["Transformer/encoderblock_1/extra/kernel"] = np.zeros((2, 2), np.float32)
    flat["Transformer/encoder_norm/bias"] = np.zeros((33,), np.float32)

  path = edit_npz(vit_npz, tmp_path / "bad.npz", edit)
  with pytest.raises(interop.ConversionError) as e:
    interop.load(str(path))
  message = str(e.value)
  assert "missing in checkpoint: Transformer/encoderblock_1/LayerNorm_0/scale (32,)" in message
  assert "unexpected in checkpoint: Transformer/encoderblock_1/extra/kernel (2, 2)" in message
  assert "shape mismatch: Transformer/encoder_norm/bias checkpoint (33,), model (32,)" in message


def test_another_architecture(vit_npz, hf_gpt, tmp_path):
  with pytest.raises(interop.ConversionError, match="missing in checkpoint: wte/embedding"):
    interop.load(vit_npz, GPT)
  # An HF directory of an architecture we do not convert.
  config_path = os.path.join(hf_gpt, "config.json")
  with open(config_path, encoding="utf-8") as f:
    config = json.load(f)
  for edit, pattern in [
      ({"model_type": "roberta"}, "Unsupported Hugging Face model_type='roberta'"),
      (
          {"architectures": ["GPT2ForTokenClassification"]},
          "Unsupported gpt2 architecture 'GPT2ForTokenClassification'",
      ),
      ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse"),
  ]:
    with open(config_path, "w", encoding="utf-8") as f:
      json.dump({**config, **edit}, f)
    with pytest.raises(interop.ConversionError, match=pattern):
      interop.load(hf_gpt)
  # A bare .npz of nothing we know.
  np.savez(tmp_path / "other.npz", **{"encoder/w": np.zeros(3, np.float32)})
  with pytest.raises(interop.ConversionError, match="Cannot tell which model"):
    interop.load(str(tmp_path / "other.npz"))


def test_hf_tensor_mismatches(hf_gpt):
  from safetensors import numpy as safetensors_np  # pylint: disable=g-import-not-at-top

  weights = os.path.join(hf_gpt, "model.safetensors")
  tensors = safetensors_np.load_file(weights)
  del tensors["transformer.h.1.ln_2.bias"]
  tensors["transformer.h.1.attn.rotary.weight"] = np.zeros(4, np.float32)
  tensors["lm_head.weight"] = tensors["transformer.wte.weight"] + 1  # untied
  safetensors_np.save_file(tensors, weights, metadata={"format": "pt"})
  with pytest.raises(interop.ConversionError, match="untied LM head"):
    interop.load(hf_gpt)
  del tensors["lm_head.weight"]
  safetensors_np.save_file(tensors, weights, metadata={"format": "pt"})
  with pytest.raises(interop.ConversionError) as e:
    interop.load(hf_gpt)
  assert "missing in Hugging Face GPT-2 checkpoint: transformer.h.1.ln_2.bias" in str(e.value)
  assert (
      "unexpected in Hugging Face GPT-2 checkpoint: transformer.h.1.attn.rotary.weight (4,)"
      in str(e.value)
  )


def test_no_pickle(hf_gpt, tmp_path):
  os.rename(os.path.join(hf_gpt, "model.safetensors"), os.path.join(hf_gpt, "pytorch_model.bin"))
  with pytest.raises(interop.ConversionError, match="never pickled .bin files"):
    interop.load(hf_gpt)
  np.savez(tmp_path / "pickled.npz", **{"embedding/kernel": np.array([{"a": 1}], dtype=object)})
  with pytest.raises(interop.ConversionError, match="Cannot read .* as an .npz"):
    interop.load(str(tmp_path / "pickled.npz"))


def listing(directory):
  return sorted(os.listdir(directory))


def test_unwritable_targets_write_nothing(vit_npz, tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  gap, _ = helpers.init_ours(dict(VIT, classifier="gap"), IMAGES)
  with pytest.raises(interop.ConversionError, match="pools the cls token"):
    interop.save(gap, str(out / "hf"), to="hf")
  gpt, _ = helpers.init_ours(GPT, np.zeros((1, 4), np.int32))
  with pytest.raises(interop.ConversionError, match="big_vision layout is for ViT"):
    interop.save(gpt, str(out / "gpt.npz"), to="npz", layout="big_vision")
  with pytest.raises(interop.ConversionError, match="shape mismatch"):
    interop.convert(vit_npz, str(out / "wd"), to="orbax", model={"num_classes": 3})
  assert listing(out) == []  # not even a temporary file is left

  (out / "keep.npz").write_bytes(b"old")
  with pytest.raises(FileExistsError, match="overwrite"):
    interop.convert(vit_npz, str(out / "keep.npz"), to="npz")
  assert (out / "keep.npz").read_bytes() == b"old"
  interop.convert(vit_npz, str(out / "keep.npz"), to="npz", overwrite=True)
  assert interop.load(str(out / "keep.npz")).model["num_classes"] == 5
  assert listing(out) == ["keep.npz"]


def test_failure_while_writing_leaves_nothing(tmp_path):
  for target in ("new_dir", "existing"):
    (tmp_path / "existing").mkdir(exist_ok=True)
    (tmp_path / "existing" / "old.txt").write_text("old")
    with pytest.raises(OSError, match="disk full"):
      with storage.output_path(str(tmp_path / target), overwrite=True) as staged:
        os.makedirs(staged)
        with open(os.path.join(staged, "half.bin"), "wb") as f:
          f.write(b"partial")
        raise OSError("disk full")
    assert listing(tmp_path) == ["existing"]
    assert listing(tmp_path / "existing") == ["old.txt"]
