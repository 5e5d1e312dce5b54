"""RandAugment as big_vision runs it, in pure TF (no tensorflow_addons), stateless.

big_vision's `randaug(N, M)` (big_vision/pp/archive/autoaugment.py, forked from the TF TPU
EfficientNet autoaugment.py) picks N of 16 ops uniformly with replacement and applies each at
magnitude M; there is no Identity op, so even M=0 changes the image ("light1" = randaug(2, 0),
"Actually not nothing!", big_vision/configs/vit_i1k.py). Each op here reproduces that file's
op and its level-to-argument rule:

  AutoContrast, Equalize, Invert      no argument
  Rotate                              +-M/10 * 30 degrees (sign random)
  Posterize                           keep int(M/10 * 4) bits (0 bits keeps 1: TF's shift clamp)
  Solarize                            invert pixels >= int(M/10 * 256) mod 256 (the threshold
                                      is a uint8 in the reference: M=10 and 20 invert every
                                      pixel, M=15 those >= 128)
  SolarizeAdd                         add int(M/10 * 110) to pixels < 128
  Color, Contrast, Brightness,        blend factor M/10 * 1.8 + 0.1 (M=5: 1, the identity)
  Sharpness
  ShearX, ShearY                      +-M/10 * 0.3 (sign random)
  TranslateX, TranslateY              +-M/10 * 100 pixels (sign random), whatever the image size
  Cutout                              a gray square of side 2 * int(M/10 * 40) pixels at a
                                      random center

Level rules: autoaugment.py lines 473-527; the ops: lines 92-401. tests/data/image/
test_randaugment.py compares every op, bit for bit, with that file's run by TensorFlow at
magnitudes 0 to 20.

Geometric ops sample the nearest pixel and fill with gray (128), as tfa's ops with the
reference's wrap/unwrap do. The blends truncate to uint8, as the reference's casts do. The
reference's Contrast blends toward a flat gray of (pixel count / 256) (its "mean" sums the
histogram's counts, not the gray levels), so it is kept that way; PIL uses the mean gray level.

Magnitudes run from 0 to 20 (vit_jax/config/defaults.py RANDAUGMENT_MAGNITUDES): big_vision's
recipes use 0, 10, 15 and 20 (vit_i1k.py's RANDAUG_DEF), and above 20 Posterize would keep more
than 8 bits.
"""

import math

import tensorflow as tf

from vit_jax.config import defaults

MAX_LEVEL = 10.0  # The reference's _MAX_LEVEL: each rule's full strength is at M=10.
FILL = 128  # Gray for pixels that geometric ops and Cutout leave empty.
TRANSLATE_PIXELS = 100  # Translation at M=10 (the reference's randaug translate_const).
CUTOUT_PIXELS = 40  # Cutout's half side at M=10 (its cutout_const).
SOLARIZE_ADD_MAX = 110
SOLARIZE_ADD_THRESHOLD = 128


def _to_float(image):
  return tf.cast(image, tf.float32)


def _blend(degenerate_HxWx3, image_HxWx3, factor: float):
  """The reference's blend: degenerate + factor * (image - degenerate), clipped, truncated."""
  degenerate = _to_float(degenerate_HxWx3)
  blended = degenerate + factor * (_to_float(image_HxWx3) - degenerate)
  return tf.cast(tf.clip_by_value(blended, 0.0, 255.0), tf.uint8)


def enhance_factor(magnitude: float) -> float:
  return magnitude / MAX_LEVEL * 1.8 + 0.1


def _transform(image_HxWx3, transform_8):
  """Projective transform (`transform_8` maps output (x, y) to input coordinates), nearest
  pixel, empty pixels gray."""
  out_1xHxWx3 = tf.raw_ops.ImageProjectiveTransformV3(
      images=image_HxWx3[None],
      transforms=tf.cast(tf.reshape(transform_8, [1, 8]), tf.float32),
      output_shape=tf.shape(image_HxWx3)[:2],
      fill_value=float(FILL),
      interpolation="NEAREST",
      fill_mode="CONSTANT",
  )
  return out_1xHxWx3[0]


# Every op: (image_HxWx3 uint8, magnitude (Python number), sign (+-1 float tensor), seed_2).


def autocontrast(image_HxWx3, magnitude, sign, seed_2):
  """Stretches each channel to span 0..255; flat channels stay as they are."""
  del magnitude, sign, seed_2
  image = _to_float(image_HxWx3)
  lo_3 = tf.reduce_min(image, axis=[0, 1])
  hi_3 = tf.reduce_max(image, axis=[0, 1])
  scale_3 = 255.0 / tf.maximum(hi_3 - lo_3, 1.0)
  stretched = tf.clip_by_value(image * scale_3 - lo_3 * scale_3, 0.0, 255.0)
  return tf.where(hi_3 > lo_3, tf.cast(stretched, tf.uint8), image_HxWx3)


def _equalize_channel(channel_HxW):
  """PIL's ImageOps.equalize for one uint8 channel."""
  values = tf.cast(channel_HxW, tf.int32)
  hist_256 = tf.math.bincount(values, minlength=256, maxlength=256)
  # PIL leaves the brightest present level out of the step.
  step = (tf.reduce_sum(hist_256) - hist_256[tf.reduce_max(values)]) // 255

  def equalized():
    lut_256 = (tf.cumsum(hist_256) + step // 2) // tf.maximum(step, 1)
    lut_256 = tf.clip_by_value(tf.concat([[0], lut_256[:-1]], 0), 0, 255)
    return tf.cast(tf.gather(lut_256, values), tf.uint8)

  return tf.cond(step > 0, equalized, lambda: channel_HxW)


def equalize(image_HxWx3, magnitude, sign, seed_2):
  del magnitude, sign, seed_2
  return tf.stack([_equalize_channel(image_HxWx3[:, :, c]) for c in range(3)], axis=-1)


def invert(image_HxWx3, magnitude, sign, seed_2):
  del magnitude, sign, seed_2
  return 255 - image_HxWx3


def rotate(image_HxWx3, magnitude, sign, seed_2):
  """Rotates about the center by M/10 * 30 degrees, counterclockwise for sign +1 (tfa's rotate)."""
  del seed_2
  angle = sign * (magnitude / MAX_LEVEL * 30.0 * math.pi / 180.0)
  shape_hw = tf.cast(tf.shape(image_HxWx3)[:2], tf.float32)
  h, w = shape_hw[0] - 1.0, shape_hw[1] - 1.0
  cos, sin = tf.cos(angle), tf.sin(angle)
  x_offset = (w - (cos * w - sin * h)) / 2.0
  y_offset = (h - (sin * w + cos * h)) / 2.0
  return _transform(image_HxWx3, tf.stack([cos, -sin, x_offset, sin, cos, y_offset, 0.0, 0.0]))


def posterize_shift(magnitude: float) -> int:
  """Low bits dropped: 8 - int(M/10 * 4), at most 7 (TF clamps a uint8 shift count to 7)."""
  bits = int(magnitude / MAX_LEVEL * 4)
  return min(8 - bits, 7)


def posterize(image_HxWx3, magnitude, sign, seed_2):
  del sign, seed_2
  shift = tf.constant(posterize_shift(magnitude), tf.uint8)
  return tf.bitwise.left_shift(tf.bitwise.right_shift(image_HxWx3, shift), shift)


def solarize_threshold(magnitude: float) -> int:
  """int(M/10 * 256) mod 256: the reference compares its uint8 image with the Python int, which
  TF converts to uint8, so 256 wraps to 0 (M=10 and M=20 invert every pixel, M=15 those >= 128)."""
  return int(magnitude / MAX_LEVEL * 256) % 256


def solarize(image_HxWx3, magnitude, sign, seed_2):
  """Inverts the pixels at or above solarize_threshold(M): all of them at M=0, 10 and 20."""
  del sign, seed_2
  threshold = tf.constant(solarize_threshold(magnitude), tf.uint8)
  return tf.where(image_HxWx3 < threshold, image_HxWx3, 255 - image_HxWx3)


def solarize_add(image_HxWx3, magnitude, sign, seed_2):
  """Adds int(M/10 * 110) to the pixels below 128, clipped at 255."""
  del sign, seed_2
  addition = int(magnitude / MAX_LEVEL * SOLARIZE_ADD_MAX)
  added = tf.cast(tf.clip_by_value(tf.cast(image_HxWx3, tf.int32) + addition, 0, 255), tf.uint8)
  return tf.where(image_HxWx3 < SOLARIZE_ADD_THRESHOLD, added, image_HxWx3)


def color(image_HxWx3, magnitude, sign, seed_2):
  del sign, seed_2
  gray_HxWx3 = tf.image.grayscale_to_rgb(tf.image.rgb_to_grayscale(image_HxWx3))
  return _blend(gray_HxWx3, image_HxWx3, enhance_factor(magnitude))


def contrast(image_HxWx3, magnitude, sign, seed_2):
  """Blends toward a flat gray of min(pixel count / 256, 255), as the reference computes it."""
  del sign, seed_2
  num_pixels = tf.cast(tf.shape(image_HxWx3)[0] * tf.shape(image_HxWx3)[1], tf.float32)
  gray = tf.cast(tf.clip_by_value(num_pixels / 256.0, 0.0, 255.0), tf.uint8)
  return _blend(tf.fill(tf.shape(image_HxWx3), gray), image_HxWx3, enhance_factor(magnitude))


def brightness(image_HxWx3, magnitude, sign, seed_2):
  del sign, seed_2
  return _blend(tf.zeros_like(image_HxWx3), image_HxWx3, enhance_factor(magnitude))


def sharpness(image_HxWx3, magnitude, sign, seed_2):
  """Blends with PIL's SMOOTH filter (truncated to uint8); the 1-pixel border stays as is."""
  del sign, seed_2
  kernel_3x3 = tf.constant([[1, 1, 1], [1, 5, 1], [1, 1, 1]], tf.float32) / 13.0
  kernel_3x3x3x1 = tf.tile(kernel_3x3[:, :, None, None], [1, 1, 3, 1])
  smooth = tf.nn.depthwise_conv2d(_to_float(image_HxWx3)[None], kernel_3x3x3x1, [1] * 4, "VALID")
  smooth_hxwx3 = tf.cast(tf.clip_by_value(smooth[0], 0.0, 255.0), tf.uint8)
  padded_HxWx3 = tf.pad(smooth_hxwx3, [[1, 1], [1, 1], [0, 0]])
  interior_HxWx3 = tf.pad(tf.ones_like(smooth_hxwx3, tf.bool), [[1, 1], [1, 1], [0, 0]])
  degenerate_HxWx3 = tf.where(interior_HxWx3, padded_HxWx3, image_HxWx3)
  return _blend(degenerate_HxWx3, image_HxWx3, enhance_factor(magnitude))


def shear_x(image_HxWx3, magnitude, sign, seed_2):
  del seed_2
  level = sign * (magnitude / MAX_LEVEL * 0.3)
  return _transform(image_HxWx3, tf.stack([1.0, level, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]))


def shear_y(image_HxWx3, magnitude, sign, seed_2):
  del seed_2
  level = sign * (magnitude / MAX_LEVEL * 0.3)
  return _transform(image_HxWx3, tf.stack([1.0, 0.0, 0.0, level, 1.0, 0.0, 0.0, 0.0]))


def translate_x(image_HxWx3, magnitude, sign, seed_2):
  """Output pixel (x, y) is input (x + pixels, y): content moves left for sign +1."""
  del seed_2
  pixels = sign * (magnitude / MAX_LEVEL * TRANSLATE_PIXELS)
  return _transform(image_HxWx3, tf.stack([1.0, 0.0, pixels, 0.0, 1.0, 0.0, 0.0, 0.0]))


def translate_y(image_HxWx3, magnitude, sign, seed_2):
  del seed_2
  pixels = sign * (magnitude / MAX_LEVEL * TRANSLATE_PIXELS)
  return _transform(image_HxWx3, tf.stack([1.0, 0.0, 0.0, 0.0, 1.0, pixels, 0.0, 0.0]))


def cutout_center(shape_hw, seed_2):
  """Cutout's center (y, x), each uniform over the image's rows and columns."""
  y_seed_2, x_seed_2 = tf.unstack(tf.random.experimental.stateless_split(seed_2, 2))
  y = tf.random.stateless_uniform([], y_seed_2, 0, shape_hw[0], dtype=tf.int32)
  x = tf.random.stateless_uniform([], x_seed_2, 0, shape_hw[1], dtype=tf.int32)
  return tf.stack([y, x])


def cutout(image_HxWx3, magnitude, sign, seed_2):
  """Grays rows [cy - p, cy + p) and columns [cx - p, cx + p), p = int(M/10 * 40), at a center
  drawn uniformly over the image."""
  del sign
  half = int(magnitude / MAX_LEVEL * CUTOUT_PIXELS)
  shape_hw = tf.shape(image_HxWx3)[:2]
  center_yx = cutout_center(shape_hw, seed_2)
  rel_y_H = tf.range(shape_hw[0]) - center_yx[0]
  rel_x_W = tf.range(shape_hw[1]) - center_yx[1]
  inside_HxW = ((rel_y_H >= -half) & (rel_y_H < half))[:, None] & (
      (rel_x_W >= -half) & (rel_x_W < half)
  )[None, :]
  return tf.where(inside_HxW[:, :, None], tf.constant(FILL, tf.uint8), image_HxWx3)


# The reference's order (distort_image_with_randaugment's available_ops).
OPS = {
    "AutoContrast": autocontrast,
    "Equalize": equalize,
    "Invert": invert,
    "Rotate": rotate,
    "Posterize": posterize,
    "Solarize": solarize,
    "Color": color,
    "Contrast": contrast,
    "Brightness": brightness,
    "Sharpness": sharpness,
    "ShearX": shear_x,
    "ShearY": shear_y,
    "TranslateX": translate_x,
    "TranslateY": translate_y,
    "Cutout": cutout,
    "SolarizeAdd": solarize_add,
}


def randaugment(image_HxWx3, num_layers: int, magnitude: float, seed_2) -> tf.Tensor:
  """Applies `num_layers` ops drawn uniformly (with replacement) from OPS, each at `magnitude`.

  Per layer, the op, the sign of the signed ops and Cutout's center come from `seed_2` alone.
  """
  low, high = defaults.RANDAUGMENT_MAGNITUDES  # a config's value is checked before any step
  if isinstance(magnitude, bool) or not isinstance(magnitude, (int, float)):
    raise ValueError(f"RandAugment's magnitude {magnitude!r} is not a number")
  if not low <= magnitude <= high:
    raise ValueError(f"RandAugment's magnitude {magnitude} is outside [{low}, {high}]")
  ops = list(OPS.values())
  for layer in range(num_layers):
    layer_seed_2 = tf.random.experimental.stateless_fold_in(seed_2, layer)
    op_seed_2, sign_seed_2, op_arg_seed_2 = tf.unstack(
        tf.random.experimental.stateless_split(layer_seed_2, 3)
    )
    op_index = tf.random.stateless_uniform([], op_seed_2, 0, len(ops), dtype=tf.int32)
    sign = tf.where(tf.random.stateless_uniform([], sign_seed_2) < 0.5, -1.0, 1.0)
    branches = [_keep_shape(op, image_HxWx3, magnitude, sign, op_arg_seed_2) for op in ops]
    image_HxWx3 = tf.switch_case(op_index, branches)
  return image_HxWx3


def _keep_shape(op, image_HxWx3, magnitude, sign, seed_2):
  """switch_case needs every branch to agree on the static shape."""

  def branch():
    return tf.ensure_shape(op(image_HxWx3, magnitude, sign, seed_2), image_HxWx3.shape)

  return branch
