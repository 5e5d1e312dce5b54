"""RandAugment in pure TF (no tensorflow_addons), stateless.

Each op maps a uint8 image_HxWx3 and a strength `level` in [0, 1]
(= magnitude / 10) with a random `sign` (+1/-1, used by the symmetric ops) to
a uint8 image of the same shape. Value ranges follow the common
AutoAugment/timm conventions: rotate up to 30 degrees, shear up to 0.3,
translate up to 45% of the side, enhance factors 1 +- 0.9, posterize down to
4 bits, solarize threshold down to 0. Geometric ops fill with gray (128).
"""

import math

import tensorflow as tf

_FILL = 128.0
_MAX_MAGNITUDE = 10.0


def _to_float(image):
  return tf.cast(image, tf.float32)


def _to_uint8(image):
  return tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)


def _blend(degenerate, image_HxWx3, factor):
  """PIL ImageEnhance semantics: factor 0 -> degenerate, 1 -> image, >1 extrapolates."""
  degenerate = _to_float(degenerate)
  return _to_uint8(degenerate + factor * (_to_float(image_HxWx3) - degenerate))


def _enhance_factor(level, sign):
  return 1.0 + sign * 0.9 * level


def _grayscale_HxWx1(image_HxWx3):
  return tf.image.rgb_to_grayscale(_to_float(image_HxWx3))


def _transform(image_HxWx3, transform_8):
  """Projective transform; `transform_8` maps output (x, y) to input coords."""
  out_1xHxWx3 = tf.raw_ops.ImageProjectiveTransformV3(
      images=image_HxWx3[None],
      transforms=tf.cast(tf.reshape(transform_8, [1, 8]), tf.float32),
      output_shape=tf.shape(image_HxWx3)[:2],
      fill_value=_FILL,
      interpolation="BILINEAR",
      fill_mode="CONSTANT",
  )
  return out_1xHxWx3[0]


def identity(image_HxWx3, level, sign):
  del level, sign
  return image_HxWx3


def autocontrast(image_HxWx3, level, sign):
  """Stretches each channel to span 0..255 (channels that are flat stay)."""
  del level, sign
  image = _to_float(image_HxWx3)
  lo_3 = tf.reduce_min(image, axis=[0, 1])
  hi_3 = tf.reduce_max(image, axis=[0, 1])
  scale_3 = tf.where(hi_3 > lo_3, 255.0 / tf.maximum(hi_3 - lo_3, 1.0), 1.0)
  offset_3 = tf.where(hi_3 > lo_3, lo_3, 0.0)
  return _to_uint8((image - offset_3) * scale_3)


def _equalize_channel(channel_HxW):
  """PIL's ImageOps.equalize for one uint8 channel."""
  values = tf.cast(channel_HxW, tf.int32)
  hist_256 = tf.math.bincount(values, minlength=256, maxlength=256)
  # PIL leaves the most extreme (brightest present) level out of the step.
  step = (tf.reduce_sum(hist_256) - hist_256[tf.reduce_max(values)]) // 255

  def equalized():
    lut_256 = (tf.cumsum(hist_256) + step // 2) // tf.maximum(step, 1)
    lut_256 = tf.clip_by_value(tf.concat([[0], lut_256[:-1]], 0), 0, 255)
    return tf.cast(tf.gather(lut_256, values), tf.uint8)

  return tf.cond(step > 0, equalized, lambda: channel_HxW)


def equalize(image_HxWx3, level, sign):
  del level, sign
  return tf.stack([_equalize_channel(image_HxWx3[:, :, c]) for c in range(3)], axis=-1)


def rotate(image_HxWx3, level, sign):
  angle = sign * level * 30.0 * math.pi / 180.0
  shape_hw = tf.cast(tf.shape(image_HxWx3)[:2], tf.float32)
  cy, cx = (shape_hw[0] - 1.0) / 2.0, (shape_hw[1] - 1.0) / 2.0
  cos, sin = tf.cos(angle), tf.sin(angle)
  # Rotation about the image center.
  transform_8 = tf.stack(
      [
          cos,
          sin,
          cx - cos * cx - sin * cy,
          -sin,
          cos,
          cy + sin * cx - cos * cy,
          0.0,
          0.0,
      ]
  )
  return _transform(image_HxWx3, transform_8)


def solarize(image_HxWx3, level, sign):
  """Inverts pixels at or above a threshold that falls as `level` grows."""
  del sign
  threshold = 256.0 - level * 256.0
  image = _to_float(image_HxWx3)
  return _to_uint8(tf.where(image >= threshold, 255.0 - image, image))


def color(image_HxWx3, level, sign):
  gray_HxWx3 = tf.tile(_grayscale_HxWx1(image_HxWx3), [1, 1, 3])
  return _blend(gray_HxWx3, image_HxWx3, _enhance_factor(level, sign))


def posterize(image_HxWx3, level, sign):
  """Keeps the top 8 - round(4 * level) bits of each pixel."""
  del sign
  drop_bits = tf.cast(tf.round(4.0 * tf.minimum(level, 1.0)), tf.uint8)
  return tf.bitwise.left_shift(tf.bitwise.right_shift(image_HxWx3, drop_bits), drop_bits)


def contrast(image_HxWx3, level, sign):
  mean = tf.reduce_mean(_grayscale_HxWx1(image_HxWx3))
  return _blend(tf.fill(tf.shape(image_HxWx3), mean), image_HxWx3, _enhance_factor(level, sign))


def brightness(image_HxWx3, level, sign):
  return _blend(tf.zeros_like(image_HxWx3), image_HxWx3, _enhance_factor(level, sign))


def sharpness(image_HxWx3, level, sign):
  """Blends with PIL's SMOOTH-filtered image; the 1-pixel border stays as is."""
  kernel_3x3 = tf.constant([[1, 1, 1], [1, 5, 1], [1, 1, 1]], tf.float32) / 13.0
  kernel_3x3x3x1 = tf.tile(kernel_3x3[:, :, None, None], [1, 1, 3, 1])
  image_1xHxWx3 = _to_float(image_HxWx3)[None]
  smooth_1xHxWx3 = tf.nn.depthwise_conv2d(image_1xHxWx3, kernel_3x3x3x1, [1, 1, 1, 1], "SAME")
  shape_hw = tf.shape(image_HxWx3)[:2]
  interior_HxW = tf.pad(tf.ones(shape_hw - 2, tf.bool), [[1, 1], [1, 1]])
  degenerate = tf.where(interior_HxW[:, :, None], smooth_1xHxWx3[0], image_1xHxWx3[0])
  return _blend(degenerate, image_HxWx3, _enhance_factor(level, sign))


def shear_x(image_HxWx3, level, sign):
  return _transform(image_HxWx3, tf.stack([1.0, sign * 0.3 * level, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]))


def shear_y(image_HxWx3, level, sign):
  return _transform(image_HxWx3, tf.stack([1.0, 0.0, 0.0, sign * 0.3 * level, 1.0, 0.0, 0.0, 0.0]))


def translate_x(image_HxWx3, level, sign):
  dx = sign * 0.45 * level * tf.cast(tf.shape(image_HxWx3)[1], tf.float32)
  return _transform(image_HxWx3, tf.stack([1.0, 0.0, dx, 0.0, 1.0, 0.0, 0.0, 0.0]))


def translate_y(image_HxWx3, level, sign):
  dy = sign * 0.45 * level * tf.cast(tf.shape(image_HxWx3)[0], tf.float32)
  return _transform(image_HxWx3, tf.stack([1.0, 0.0, 0.0, 0.0, 1.0, dy, 0.0, 0.0]))


OPS = (
    identity,
    autocontrast,
    equalize,
    rotate,
    solarize,
    color,
    posterize,
    contrast,
    brightness,
    sharpness,
    shear_x,
    shear_y,
    translate_x,
    translate_y,
)


def randaugment(image_HxWx3, num_layers: int, magnitude: float, seed_2) -> tf.Tensor:
  """Applies `num_layers` ops drawn uniformly (with replacement) from OPS."""
  level = tf.constant(magnitude / _MAX_MAGNITUDE, tf.float32)
  for layer in range(num_layers):
    layer_seed_2 = tf.random.experimental.stateless_fold_in(seed_2, layer)
    op_seed_2, sign_seed_2 = tf.unstack(tf.random.experimental.stateless_split(layer_seed_2, 2))
    op_index = tf.random.stateless_uniform([], op_seed_2, 0, len(OPS), dtype=tf.int32)
    sign = tf.where(tf.random.stateless_uniform([], sign_seed_2) < 0.5, -1.0, 1.0)
    branches = [_keep_shape(op, image_HxWx3, level, sign) for op in OPS]
    image_HxWx3 = tf.switch_case(op_index, branches)
  return image_HxWx3


def _keep_shape(op, image_HxWx3, level, sign):
  """switch_case needs every branch to agree on the static shape."""

  def branch():
    out = op(image_HxWx3, level, sign)
    out = tf.ensure_shape(out, image_HxWx3.shape)
    return out

  return branch
