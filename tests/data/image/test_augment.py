"""Per-example augmentations and batch mixing (RandAugment: test_randaugment.py)."""

import types

import numpy as np
import pytest
import tensorflow as tf

from vit_jax.analysis import images as analysis_images
from vit_jax.data.image import augment
from vit_jax.data.image import pipeline


def _seed(*ints):
  return tf.constant(ints, tf.int64)


def _image(h=48, w=64, seed=0):
  """A smooth-ish random uint8 image_HxWx3 (JPEG-friendly)."""
  rng = np.random.default_rng(seed)
  coarse = rng.integers(0, 256, size=(h // 8, w // 8, 3)).astype(np.uint8)
  return np.kron(coarse, np.ones((8, 8, 1), np.uint8))


def test_inception_crop_same_window_for_jpeg_and_png_and_deterministic():
  image = _image()
  png, jpeg = tf.io.encode_png(image), tf.io.encode_jpeg(image)
  areas, aspects = [], []
  for s in range(20):
    a = augment.decode_and_inception_crop(png, _seed(s, 1)).numpy()
    b = augment.decode_and_inception_crop(jpeg, _seed(s, 1)).numpy()
    again = augment.decode_and_inception_crop(png, _seed(s, 1)).numpy()
    assert a.shape == b.shape and a.dtype == np.uint8
    np.testing.assert_array_equal(a, again)
    areas.append(a.shape[0] * a.shape[1] / (48 * 64))
    aspects.append(a.shape[1] / a.shape[0])
  # Rounding to whole pixels loosens the bounds slightly on a small image.
  assert min(areas) >= 0.04 and max(areas) <= 1.0
  assert 0.6 <= min(aspects) and max(aspects) <= 1.6
  assert len({round(x, 4) for x in areas}) > 5  # Seeds actually vary the crop.


def test_inception_crop_tries_100_windows_before_taking_the_whole_image():
  # On a 17 x 440 strip few windows have both the aspect (3/4..4/3) and the area (>= 5%): with
  # TF's old 10 attempts about a quarter of the crops fall back to the whole strip.
  png = tf.io.encode_png(np.zeros((17, 440, 3), np.uint8))
  shapes = [augment.decode_and_inception_crop(png, _seed(s, 7)).shape[:2] for s in range(100)]
  whole = sum(shape == (17, 440) for shape in shapes)
  ten_attempts_whole = sum(
      tf.image.stateless_sample_distorted_bounding_box(
          image_size=[17, 440, 3],
          bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
          seed=_seed(s, 9),
          min_object_covered=0.0,
          aspect_ratio_range=augment.INCEPTION_ASPECT_RANGE,
          area_range=augment.INCEPTION_AREA_RANGE,
          max_attempts=10,
      )[1][1].numpy()
      == 440
      for s in range(100)
  )
  assert augment.INCEPTION_MAX_ATTEMPTS == 100
  assert whole <= 2 and ten_attempts_whole >= 12, (whole, ten_attempts_whole)


def test_eval_resize_averages_when_shrinking_and_is_bilinear_when_enlarging():
  # Stripes one black pixel in four, shrunk 4x: the area average is 191 (3/4 of 255) everywhere;
  # bilinear sampling without antialiasing reads only the white pixels between the black ones.
  stripes_HxW = np.tile(np.array([0, 255, 255, 255], np.uint8), (64, 16))
  stripes = np.repeat(stripes_HxW[:, :, None], 3, -1)
  small = augment.resize_small(tf.constant(stripes), 16).numpy()
  assert small.shape == (16, 16, 3)
  np.testing.assert_array_equal(small, np.full((16, 16, 3), 191, np.uint8))
  aliased = augment.resize(tf.constant(stripes), [16, 16]).numpy()
  assert (aliased == 255).all()
  # Enlarging matches the training resize (bilinear), not area's repeated blocks.
  tiny = _image(8, 8)
  np.testing.assert_array_equal(
      augment.resize_small(tf.constant(tiny), 16), augment.resize(tf.constant(tiny), [16, 16])
  )
  eval_view = augment.eval_crop(tf.io.encode_png(stripes), 16, 1.0).numpy()
  np.testing.assert_array_equal(eval_view, small)


def test_decode_replicates_grayscale():
  gray = tf.io.encode_png(_image()[:, :, :1])
  decoded = augment.decode(gray).numpy()
  assert decoded.shape == (48, 64, 3)
  assert (decoded[..., 0] == decoded[..., 2]).all()


def test_resizes_and_crops():
  image = tf.constant(_image())
  assert augment.resize(image, [20, 30]).shape == (20, 30, 3)
  small = augment.resize_small(image, 24)
  assert small.shape == (24, 32, 3) and small.dtype == tf.uint8
  assert augment.central_crop(small, 24).shape == (24, 24, 3)
  eval_view = augment.eval_crop(tf.io.encode_png(image), 28, 0.875)
  assert eval_view.shape == (28, 28, 3) and eval_view.dtype == tf.uint8
  # Same-size resize and crop_fraction=1 leave a square image untouched.
  square = image[:48, :48]
  np.testing.assert_array_equal(augment.eval_crop(tf.io.encode_png(square), 48, 1.0), square)


def test_eval_resize_keeps_the_whole_image():
  """crop_fraction None (fine-tuning's eval, vision_transformer input_pipeline.py): the whole
  non-square image squeezed to size x size, no border cut; the crop view cuts the long side."""
  image = tf.constant(_image())
  assert image.shape[0] != image.shape[1]
  png = tf.io.encode_png(image)
  whole = augment.eval_crop(png, 28, None)
  np.testing.assert_array_equal(whole, augment.resize(image, (28, 28)))
  assert not np.array_equal(whole, augment.eval_crop(png, 28, 1.0))


def test_eval_view_picks_the_crop_the_trainer_and_predict_use():
  """`eval_view` reaches the trainer's eval and predict/visualize (analysis.images.crop_fraction)
  through one function: "resize" is the whole image, "crop" follows the Inception-crop rule."""
  assert pipeline.eval_crop_fraction(True, "resize") is None
  assert pipeline.eval_crop_fraction(True, "crop") == 0.875
  assert pipeline.eval_crop_fraction(False) == 1.0
  finetuned = types.SimpleNamespace(
      workdir_config={"augment": {"inception_crop": True}, "eval_view": "resize"}
  )
  assert analysis_images.crop_fraction(finetuned) is None
  imported = types.SimpleNamespace(workdir_config=None)
  assert analysis_images.crop_fraction(imported) == 0.875


def test_flip_is_either_identity_or_mirror_and_seeded():
  image = _image()
  outcomes = set()
  for s in range(10):
    out = augment.random_flip(image, _seed(s, 0)).numpy()
    np.testing.assert_array_equal(out, augment.random_flip(image, _seed(s, 0)))
    if (out == image).all():
      outcomes.add("same")
    else:
      np.testing.assert_array_equal(out, image[:, ::-1])
      outcomes.add("mirror")
  assert outcomes == {"same", "mirror"}


def test_normalize_range():
  out = augment.normalize(tf.constant([[[0, 255, 128]]], tf.uint8)).numpy()
  np.testing.assert_allclose(out, [[[-1.0, 1.0, 128 / 127.5 - 1]]], atol=1e-6)


def test_label_smoothing():
  labels = augment.smooth_one_hot(tf.constant([0, 3]), 5, 0.1).numpy()
  np.testing.assert_allclose(labels.sum(1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(labels[1], [0.02, 0.02, 0.02, 0.92, 0.02], rtol=1e-6)


@pytest.mark.parametrize("mixup_alpha,cutmix_alpha", [(0.2, 0.0), (0.0, 1.0), (0.8, 1.0)])
def test_mixing_keeps_labels_distributions_and_is_seeded(mixup_alpha, cutmix_alpha):
  b, c = 6, 4
  # Constant images with value i make the mixing weights readable.
  images = tf.broadcast_to(tf.linspace(-1.0, 1.0, b)[:, None, None, None], [b, 8, 8, 3])
  labels = augment.smooth_one_hot(tf.range(b) % c, c, 0.1)
  for s in range(5):
    mix = lambda: augment.mix_batch(images, labels, _seed(s, 7), mixup_alpha, cutmix_alpha)
    (mixed, mixed_labels), (again, _) = mix(), mix()
    np.testing.assert_array_equal(mixed, again)
    np.testing.assert_allclose(mixed_labels.numpy().sum(1), 1.0, rtol=1e-5)
    assert mixed.shape == images.shape
    assert -1.0 <= mixed.numpy().min() and mixed.numpy().max() <= 1.0


@pytest.mark.parametrize("mixup_alpha,cutmix_alpha", [(0.4, 0.0), (0.0, 1.0)])
def test_image_weight_equals_label_weight(mixup_alpha, cutmix_alpha):
  """Image i holds the value v_i and has the one-hot label i: a mixed image's mean value is
  then its labels' weights dotted with v, whatever the mixing ratio was."""
  b = 5
  values_B = np.array([0.0, 1.0, 3.0, 7.0, 15.0], np.float32)
  images = tf.broadcast_to(tf.constant(values_B)[:, None, None, None], [b, 12, 12, 3])
  ratios = set()
  for s in range(6):
    mixed, labels = augment.mix_batch(
        images, tf.one_hot(tf.range(b), b), _seed(s, 1), mixup_alpha, cutmix_alpha
    )
    np.testing.assert_allclose(
        mixed.numpy().mean(axis=(1, 2, 3)), labels.numpy() @ values_B, rtol=1e-5, atol=1e-5
    )
    ratios.add(round(float(labels.numpy()[0, 0]), 4))
  assert len(ratios - {1.0}) > 2  # the batches were really mixed, by varying amounts


def test_cutmix_label_weight_is_pasted_area():
  b = 4
  images = tf.broadcast_to(tf.range(b, dtype=tf.float32)[:, None, None, None], [b, 16, 16, 3])
  labels = tf.one_hot(tf.range(b), b)
  for s in range(5):
    mixed, mixed_labels = augment.cutmix(images, labels, _seed(s, 0), alpha=1.0)
    # Row 0 receives pixels from row b-1 (roll by one).
    pasted = np.mean(mixed.numpy()[0] == b - 1)
    np.testing.assert_allclose(mixed_labels.numpy()[0, b - 1], pasted, atol=1e-6)
    np.testing.assert_allclose(mixed_labels.numpy()[0, 0], 1 - pasted, atol=1e-6)
