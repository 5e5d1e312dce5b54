"""RandAugment: each op against big_vision's own op run by TensorFlow (the stored outputs of
randaugment_reference.npz, made by make_randaugment_reference.py) at magnitudes 0 to 20, and
against its formula in NumPy; the op set, the magnitude range, and the seeded policy."""

import math
import os

import numpy as np
import PIL.Image
import PIL.ImageOps
import pytest
import tensorflow as tf

from tests import helpers
from vit_jax import errors
from vit_jax.config import checks
from vit_jax.data.image import randaugment as ra

_H, _W = 16, 24
# Two magnitudes per op; the second sign is -1 for the ops that take one.
_CASES = [(3, 1.0), (9, -1.0)]
# Translation is 10 px per unit of magnitude, whatever the image size: small ones keep content.
_TRANSLATE_CASES = [(0.5, 1.0), (1.2, -1.0)]


def _image():
  """A fixed uint8 image_HxWx3 with values away from 0 and 255 (autocontrast has room)."""
  return np.random.default_rng(0).integers(20, 230, size=(_H, _W, 3)).astype(np.uint8)


def _seed(*ints):
  return tf.constant(ints, tf.int64)


def _run(name, image, magnitude, sign, seed=(1, 2)):
  out = ra.OPS[name](tf.constant(image), magnitude, tf.constant(sign), _seed(*seed))
  assert out.shape == image.shape and out.dtype == tf.uint8
  return out.numpy()


def _factor(magnitude):
  return np.float32(magnitude / 10 * 1.8 + 0.1)


def _blend(degenerate, image, magnitude):
  """degenerate + f * (image - degenerate) in float32, clipped to 0..255, truncated."""
  d = degenerate.astype(np.float32)
  return np.clip(d + _factor(magnitude) * (image.astype(np.float32) - d), 0, 255).astype(np.uint8)


def _sample(image, x_in, y_in):
  """Nearest input pixel (rounded half away from zero) at each output's input coordinates;
  gray (128) outside the image."""
  xi = (np.sign(x_in) * np.floor(np.abs(x_in) + 0.5)).astype(int)
  yi = (np.sign(y_in) * np.floor(np.abs(y_in) + 0.5)).astype(int)
  inside = (xi >= 0) & (xi < image.shape[1]) & (yi >= 0) & (yi < image.shape[0])
  out = np.full_like(image, 128)
  out[inside] = image[yi[inside], xi[inside]]
  return out


def _grid():
  y, x = np.meshgrid(np.arange(_H, dtype=float), np.arange(_W, dtype=float), indexing="ij")
  return x, y


_REFERENCE_FILE = os.path.join(os.path.dirname(__file__), "randaugment_reference.npz")


def _reference_cases(name):
  """(image name, image, magnitude, sign, Cutout seed or None, the reference's output) of op
  `name` in the stored file."""
  with np.load(_REFERENCE_FILE, allow_pickle=False) as stored:
    for image_name in ("noise", "gradient", "strip"):
      mine = stored[f"{image_name}/ops"] == name
      settings, outputs = stored[f"{image_name}/settings"], stored[f"{image_name}/outputs"]
      for (m, sign, *seed), out in zip(settings[mine], outputs[mine]):
        seed = None if seed[0] < 0 else tuple(int(s) for s in seed)
        yield image_name, stored[image_name], float(m), float(sign), seed, out


@pytest.mark.parametrize("name", list(ra.OPS))
def test_op_matches_big_vision_run_by_tensorflow(name):
  """Bit for bit, eagerly and in a tf.function, at magnitudes 0 to 20 (Solarize's threshold
  wraps at 256, Posterize's shift clamps at 7, the blends clip, translations leave the image)."""
  cases = list(_reference_cases(name))
  assert len(cases) >= 16, name
  mismatches = []
  for image_name, image, m, sign, seed, want in cases:
    seed_2 = _seed(*(seed or (1, 2)))
    op = lambda x, m=m, sign=sign, seed_2=seed_2: ra.OPS[name](x, m, tf.constant(sign), seed_2)
    for mode, run in (("eager", op), ("tf.function", tf.function(op))):
      got = run(tf.constant(image)).numpy()
      wrong_HxWx3 = got != want
      if name == "Sharpness":
        wrong_HxWx3 &= ~_blur_on_a_boundary(image, m, got, want)
      if wrong_HxWx3.any():
        wrong = int(np.sum(wrong_HxWx3))
        mismatches.append(f"{image_name} M={m} sign={sign:+.0f} seed={seed} {mode}: {wrong} values")
  assert not mismatches, f"{name} differs from big_vision's:\n" + "\n".join(mismatches)


def _blur_on_a_boundary(image, m, got, want):
  """Pixels where Sharpness may differ between CPUs, and do by one blur step: where PIL's SMOOTH
  sum (3x3 of ones, 5 in the middle) is a multiple of 13, the float32 blur is an exact integer
  that the reference truncates, and whether its sum lands on it or just below depends on the
  CPU's order of additions (the reference file was made on another CPU). There `got` and `want`
  may each be the blend of either blur."""
  padded = np.pad(image.astype(np.int64), ((1, 1), (1, 1), (0, 0)))
  total = sum(
      padded[1 + dy : 1 + dy + image.shape[0], 1 + dx : 1 + dx + image.shape[1]]
      for dy in (-1, 0, 1)
      for dx in (-1, 0, 1)
  ) + 4 * image.astype(np.int64)
  exact = total % 13 == 0
  exact[[0, -1]] = False  # the 1-pixel border is not blurred
  exact[:, [0, -1]] = False
  factor = np.float32(m / 10 * 1.8 + 0.1)

  def blend(blur):  # as the op computes it, in float32
    degenerate = blur.astype(np.float32)
    mixed = degenerate + factor * (image.astype(np.float32) - degenerate)
    return np.clip(mixed, 0, 255).astype(np.uint8)

  low, high = blend(total // 13 - 1), blend(total // 13)
  either = lambda x: (x == low) | (x == high)
  return exact & either(got) & either(want)


def _expected(name, image, m, sign):
  """Each op's formula, written from the reference's level-to-argument rules."""
  x, y = _grid()
  if name == "AutoContrast":
    lo = image.min(axis=(0, 1)).astype(np.float32)
    hi = image.max(axis=(0, 1)).astype(np.float32)
    scale = np.float32(255) / (hi - lo)
    return np.clip(image * scale - lo * scale, 0, 255).astype(np.uint8)
  if name == "Equalize":
    return np.asarray(PIL.ImageOps.equalize(PIL.Image.fromarray(image)))
  if name == "Invert":
    return 255 - image
  if name == "Rotate":
    theta = sign * math.radians(m / 10 * 30)
    cx, cy = (_W - 1) / 2, (_H - 1) / 2
    x_in = cx + math.cos(theta) * (x - cx) - math.sin(theta) * (y - cy)
    y_in = cy + math.sin(theta) * (x - cx) + math.cos(theta) * (y - cy)
    return _sample(image, x_in, y_in)
  if name == "Posterize":
    bits = max(int(m / 10 * 4), 1)  # 0 bits keeps the top one (TF clamps the shift to 7)
    return image & np.uint8((0xFF << (8 - bits)) & 0xFF)
  if name == "Solarize":
    threshold = int(m / 10 * 256) % 256  # a uint8 in the reference: 256 wraps to 0
    return np.where(image < threshold, image, 255 - image)
  if name == "SolarizeAdd":
    added = np.minimum(image.astype(int) + int(m / 10 * 110), 255).astype(np.uint8)
    return np.where(image < 128, added, image)
  if name == "Color":
    weights = np.array([0.2989, 0.587, 0.114], np.float32)
    gray = ((image.astype(np.float32) / 255) @ weights * np.float32(255.5)).astype(np.uint8)
    return _blend(np.repeat(gray[..., None], 3, -1), image, m)
  if name == "Contrast":
    # The reference's "mean" is the histogram's total count / 256: the pixel count / 256.
    return _blend(np.full_like(image, min(_H * _W // 256, 255)), image, m)
  if name == "Brightness":
    return _blend(np.zeros_like(image), image, m)
  if name == "Sharpness":
    kernel = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13
    f = image.astype(np.float32)
    smooth = sum(
        kernel[i, j] * f[i : _H - 2 + i, j : _W - 2 + j] for i in (0, 1, 2) for j in (0, 1, 2)
    )
    degenerate = image.copy()
    degenerate[1:-1, 1:-1] = np.clip(smooth, 0, 255).astype(np.uint8)
    return _blend(degenerate, image, m)
  if name == "ShearX":
    return _sample(image, x + sign * m / 10 * 0.3 * y, y)
  if name == "ShearY":
    return _sample(image, x, y + sign * m / 10 * 0.3 * x)
  if name == "TranslateX":
    return _sample(image, x + sign * m / 10 * 100, y)
  if name == "TranslateY":
    return _sample(image, x, y + sign * m / 10 * 100)
  raise AssertionError(name)


# Float sums (grayscale weights, the 3x3 smoothing) may round to the other side of an integer
# in a different summation order; everything else matches bit for bit.
_ATOL = {"Color": 1, "Sharpness": 1}


@pytest.mark.parametrize("name", [n for n in ra.OPS if n != "Cutout"])
def test_op_matches_its_formula_at_two_magnitudes(name):
  image = _image()
  outputs = []
  for m, sign in _TRANSLATE_CASES if name.startswith("Translate") else _CASES:
    out = _run(name, image, m, sign)
    expected = _expected(name, image, m, sign)
    np.testing.assert_allclose(out, expected, atol=_ATOL.get(name, 0), err_msg=f"{name} M={m}")
    outputs.append(out)
  if name not in ("AutoContrast", "Equalize", "Invert"):
    assert not np.array_equal(*outputs), f"{name}: the magnitude changed nothing"


@pytest.mark.parametrize("m", [3, 9])
def test_cutout_grays_a_square_of_half_side_m_times_4_at_the_seeded_center(m):
  image = _image()
  for seed in [(1, 2), (5, 7)]:
    out = _run("Cutout", image, m, 1.0, seed)
    cy, cx = ra.cutout_center(tf.constant([_H, _W]), _seed(*seed)).numpy()
    half = int(m / 10 * 40)
    expected = image.copy()
    expected[max(cy - half, 0) : cy + half, max(cx - half, 0) : cx + half] = 128
    np.testing.assert_array_equal(out, expected)


def test_magnitude_five_makes_the_enhance_ops_the_identity_and_ten_is_full_strength():
  image = _image()
  for name in ("Color", "Contrast", "Brightness", "Sharpness"):
    np.testing.assert_array_equal(_run(name, image, 5, 1.0), image)
  assert ra.enhance_factor(10) == pytest.approx(1.9)


@pytest.mark.parametrize(
    "m, threshold", [(0, 0), (5, 128), (10, 0), (12.5, 64), (15, 128), (20, 0)]
)
def test_solarize_threshold_wraps_at_256_as_the_reference_uint8(m, threshold):
  image = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, -1)
  assert ra.solarize_threshold(m) == threshold
  expected = np.where(image < threshold, image, 255 - image)
  np.testing.assert_array_equal(_run("Solarize", image, m, 1.0), expected)


def test_the_sixteen_ops_of_big_vision_and_no_identity():
  # big_vision/pp/archive/autoaugment.py, distort_image_with_randaugment's available_ops.
  assert list(ra.OPS) == [
      "AutoContrast",
      "Equalize",
      "Invert",
      "Rotate",
      "Posterize",
      "Solarize",
      "Color",
      "Contrast",
      "Brightness",
      "Sharpness",
      "ShearX",
      "ShearY",
      "TranslateX",
      "TranslateY",
      "Cutout",
      "SolarizeAdd",
  ]


@pytest.mark.parametrize("magnitude", [-1, 20.5, 25, "9", True])
def test_magnitude_outside_the_range_is_refused(magnitude):
  if isinstance(magnitude, int):  # the config field holds an int
    config = _vit_config()
    config.augment.randaugment_magnitude = magnitude
    with pytest.raises(errors.ConfigError, match="randaugment_magnitude.*must be"):
      checks.validate_config(config)
  with pytest.raises(ValueError, match="RandAugment's magnitude"):  # called with no config
    ra.randaugment(tf.constant(_image()), 2, magnitude, _seed(0, 0))


def test_config_validation_names_the_key_and_range():
  config = _vit_config()
  config.augment.randaugment_magnitude = 30
  with pytest.raises(errors.ConfigError, match=r"randaugment_magnitude=30 must be in \[0, 20\]"):
    checks.validate_config(config)
  for ok in (0, 15, 20):
    config.augment.randaugment_magnitude = ok
    checks.validate_config(config)


def _vit_config():
  return helpers.repo_file("configs/vit.py").get_config()


def test_policy_is_seeded_uses_many_ops_and_runs_in_tf_data():
  image = _image()
  ds = tf.data.Dataset.range(40).map(
      lambda i: ra.randaugment(tf.constant(image), 1, 9, tf.stack([i, tf.constant(3, tf.int64)]))
  )
  outs = [o for o in ds.as_numpy_iterator()]
  again = [o for o in ds.as_numpy_iterator()]
  np.testing.assert_array_equal(outs, again)
  # One layer at M=9: every output is one of the 16 ops' results (both signs, any Cutout center).
  singles = {
      _run(name, image, 9, sign).tobytes()
      for name in ra.OPS
      if name != "Cutout"
      for sign in (1.0, -1.0)
  }
  matched = sum(o.tobytes() in singles for o in outs)
  cutouts = sum(np.mean(o == 128) > 0.3 and o.tobytes() not in singles for o in outs)
  assert matched + cutouts == len(outs)
  assert len({o.tobytes() for o in outs}) >= 10  # many different ops were drawn
