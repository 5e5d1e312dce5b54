"""vit_jax.predict's classes: ImageNet's read as names beside their WordNet ids, and probabilities
as the model was trained (a sigmoid per class for a sigmoid-trained workdir)."""

import shutil

import jax
import numpy as np
from PIL import Image
import pytest
import tensorflow_datasets as tfds

from tests import tiny_configs
from tests.interop import helpers as interop_helpers
from vit_jax import interop
from vit_jax.analysis import images
from vit_jax.analysis import loading
from vit_jax.analysis import predicting
from vit_jax.data.image import imagenet_names
from vit_jax.training import train


@pytest.fixture
def image_files(tmp_path):
  pixels = np.random.default_rng(0).integers(0, 256, size=(2, 8, 8, 3), dtype=np.uint8)
  paths = [str(tmp_path / f"{i}.png") for i in range(len(pixels))]
  for path, image in zip(paths, pixels):
    Image.fromarray(image).save(path)
  return paths


def test_every_imagenet_class_has_a_name():
  wnids = tfds.builder("imagenet2012").info.features["label"].names
  assert list(imagenet_names.NAMES) == list(wnids)
  assert imagenet_names.NAMES["n02280649"] == "cabbage butterfly"


def test_an_imported_imagenet_model_predicts_names_with_their_ids(tmp_path, image_files):
  config = dict(name="vit", variant="Ti/8", width=16, depth=1, num_heads=2, mlp_dim=16)
  ckpt, _ = interop_helpers.init_ours(
      {**config, "num_classes": 1000}, np.zeros((1, 32, 32, 3), np.float32)
  )
  interop.save(ckpt, str(tmp_path / "vit.npz"), to="npz")
  loaded = loading.load(str(tmp_path / "vit.npz"))
  names = images.class_names(loaded, 1000)
  assert names[0] == "tench (n01440764)" and names[517] == "crane (n03126707)"
  result, _ = predicting.classify_images(loaded, image_files, top_k=3, image_size=32)
  assert all(t["name"] == names[t["label"]] for t in result["top_k"])
  assert predicting.describe_image(result).startswith(f"0.png: {result['top_k'][0]['name']} ")


def test_a_folder_workdir_names_its_classes_by_their_folders(tmp_path, image_files):
  for split, cls in (("train", "cat"), ("train", "dog"), ("test", "dog")):
    (tmp_path / "images" / split / cls).mkdir(parents=True)
    shutil.copy(image_files[0], tmp_path / "images" / split / cls / "0.png")
  workdir = lambda dataset: loading.Loaded(
      path=str(tmp_path / "w"), model={"name": "vit"}, module=None, params={}, flat={},
      workdir_config={"task": "image_classification", "dataset": dataset}, notes=[],
  )  # fmt: skip
  assert images.class_names(workdir(f"folder:{tmp_path}/images"), 2) == ["cat", "dog"]
  assert images.class_names(workdir(f"wds:{tmp_path}/shards"), 2) == ["class_0", "class_1"]


@pytest.mark.parametrize("loss", ["softmax_xent", "sigmoid_xent"])
def test_probabilities_follow_the_training_loss(tmp_path, digits_dir, image_files, loss):
  config = tiny_configs.tiny_vit(digits_dir, steps=1)
  config.loss = loss
  train.train_and_evaluate(config, str(tmp_path / "w"))
  loaded = loading.load(str(tmp_path / "w"))
  results = predicting.classify_images(loaded, image_files, top_k=10)  # all 10 digits
  size = loading.image_size(loaded)
  _, images_BxSxSx3 = images.load_images(image_files, size, images.crop_fraction(loaded))
  logits_BxC = loaded.module.apply({"params": loaded.params}, images_BxSxSx3)
  probabilities = jax.nn.sigmoid if loss == "sigmoid_xent" else jax.nn.softmax
  expected_BxC = probabilities(logits_BxC)
  for result, expected_C in zip(results, np.asarray(expected_BxC)):
    got = {t["label"]: t["probability"] for t in result["top_k"]}
    np.testing.assert_allclose([got[c] for c in range(10)], expected_C, atol=1e-5)
