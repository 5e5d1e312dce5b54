"""Writes randaugment_reference.npz: big_vision's RandAugment ops, run by TensorFlow, on fixed
images at magnitudes 0 to 20 (test_randaugment.py compares our ops with these outputs).

  python tests/data/image/make_randaugment_reference.py \
      --autoaugment=BIG_VISION/big_vision/pp/archive/autoaugment.py \
      --addons_image=ADDONS/tensorflow_addons/image

BIG_VISION and ADDONS are checkouts of google-research/big_vision and tensorflow/addons (the
stored file was made from big_vision 0127fb6b337ee2a27bf4e54dea79cff176527356 and addons
d208d752e98c310280938efa939117bf635a60a8, TensorFlow 2.21). The reference's own files run
unchanged: autoaugment.py is imported as a module, and its `tensorflow_addons.image` is made of
addons' own transform_ops.py, translate_ops.py and utils.py (the one stub is the TensorLike type
alias, whose module imports Keras). Each op is applied through the reference's `_parse_policy_info`
(its level-to-argument rules and the gray `replace` of the geometric ops), both eagerly and inside
a tf.function; the two must agree. Three things are fixed that the reference draws at random:
the sign of the signed ops (`_randomly_negate_tensor` is replaced by the stored sign) and Cutout's
center (its two `tf.random_uniform` draws return the stored center, which is what our
`cutout_center` draws from the stored seed).
"""

import argparse
import importlib.util
import os
import sys
import types

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "randaugment_reference.npz")
MAGNITUDES = (0, 2.5, 5, 9, 10, 12.5, 15, 20)
SIGNED = ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY")
CUTOUT_SEEDS = ((1, 2), (5, 7))


def images() -> dict:
  """Small fixed images: full-range noise, a low-contrast gradient with a flat channel, and a
  wide strip of four gray levels whose 112 columns let translations up to M=11 show content."""
  rng = np.random.default_rng(0)
  noise = rng.integers(0, 256, size=(8, 12, 3)).astype(np.uint8)
  y, x = np.mgrid[:8, :12]
  gradient = np.stack([60 + 6 * x + 4 * y, 90 + 3 * y + rng.integers(0, 9, (8, 12)), 0 * x + 77])
  strip = rng.choice(np.array([0, 85, 170, 255], np.uint8), size=(10, 112, 3))
  return {"noise": noise, "gradient": gradient.transpose(1, 2, 0).astype(np.uint8), "strip": strip}


def _load(name: str, path: str):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module


def load_reference(autoaugment: str, addons_image: str):
  """big_vision's autoaugment module, importing addons' own image ops."""
  for package in ("tensorflow_addons", "tensorflow_addons.image", "tensorflow_addons.utils"):
    module = types.ModuleType(package)
    module.__path__ = []
    sys.modules[package] = module
  sys.modules["tensorflow_addons.utils.types"] = types.SimpleNamespace(TensorLike=object)
  image = sys.modules["tensorflow_addons.image"]
  for part in ("utils", "transform_ops", "translate_ops"):
    setattr(image, part, _load(f"tensorflow_addons.image.{part}", f"{addons_image}/{part}.py"))
  image.transform, image.rotate = image.transform_ops.transform, image.transform_ops.rotate
  image.translate = image.translate_ops.translate
  sys.modules["tensorflow_addons"].image = image
  return _load("big_vision_autoaugment", autoaugment)


class _FixedDraws:
  """tf.compat.v1 whose random_uniform returns the given values in turn (Cutout's center)."""

  def __init__(self, values):
    self._values = list(values)

  def __getattr__(self, name):
    return getattr(tf.compat.v1, name)

  def random_uniform(self, shape, minval=0, maxval=None, dtype=tf.float32, **_):
    del shape, minval, maxval
    return tf.constant(self._values.pop(0), dtype)


def run_op(ref, name: str, image: np.ndarray, magnitude: float, sign: float, center=None):
  """The reference's op on `image` at `magnitude`, eagerly and in a tf.function (must agree)."""
  outputs = []
  for graph in (False, True):
    # The reference's own tf.cond, with the stored sign for its coin flip.
    ref._randomly_negate_tensor = lambda t: tf.cond(tf.constant(sign > 0), lambda: t, lambda: -t)
    ref.tf = _FixedDraws(center) if center is not None else tf.compat.v1
    hparams = ref.HParams(cutout_const=40, translate_const=100)  # distort_image_with_randaugment
    func, _, args = ref._parse_policy_info(name, 1.0, float(magnitude), [128] * 3, hparams)

    def apply(x, func=func, args=args):
      return func(x, *args)

    apply = tf.function(apply) if graph else apply
    outputs.append(np.asarray(apply(tf.constant(image))))
  ref.tf = tf.compat.v1
  if not np.array_equal(*outputs):
    raise AssertionError(f"{name} M={magnitude}: eager and tf.function outputs differ")
  return outputs[0]


def build(ref) -> dict:
  """Per image: `{image}` itself, `{image}/outputs` (N, H, W, 3) and the N cases that made them,
  `{image}/ops` (names) and `{image}/settings` (magnitude, sign, Cutout seed or -1, -1)."""
  from vit_jax.data.image import randaugment as ours  # pylint: disable=import-outside-toplevel

  arrays = {}
  for image_name, image in images().items():
    outputs, ops, settings = [], [], []
    geometric_only = image_name == "strip"
    for name in ours.OPS:
      if geometric_only and name not in SIGNED + ("Cutout",):
        continue
      signs = (1.0, -1.0) if name in SIGNED else (1.0,)
      seeds = CUTOUT_SEEDS if name == "Cutout" else (None,)
      for magnitude in MAGNITUDES:
        for sign in signs:
          for seed in seeds:
            center = None
            if seed is not None:
              seed_2 = tf.constant(seed, tf.int64)
              center = ours.cutout_center(tf.shape(image)[:2], seed_2).numpy().tolist()
            outputs.append(run_op(ref, name, image, magnitude, sign, center))
            ops.append(name)
            settings.append([magnitude, sign, *(seed or (-1, -1))])
    arrays[image_name] = image
    arrays[f"{image_name}/outputs"] = np.stack(outputs)
    arrays[f"{image_name}/ops"] = np.array(ops)
    arrays[f"{image_name}/settings"] = np.array(settings, np.float64)
  return arrays


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--autoaugment", required=True, help="big_vision/pp/archive/autoaugment.py")
  parser.add_argument("--addons_image", required=True, help="the tensorflow_addons/image folder")
  parser.add_argument("--out", default=OUT)
  args = parser.parse_args(argv)
  ref = load_reference(args.autoaugment, args.addons_image)
  arrays = build(ref)
  np.savez_compressed(args.out, **arrays)
  count = sum(len(v) for k, v in arrays.items() if k.endswith("/ops"))
  print(f"wrote {count} reference outputs to {args.out}")


if __name__ == "__main__":
  main()
