"""The image pipeline's TF ops: per example, decode, crops, resizes, flips and normalization; per
batch, label smoothing, mixup and cutmix (RandAugment's op set is in randaugment.py).

Every random op is stateless and takes an explicit `seed` (int tensor of
shape [2]), so an example's augmentation depends only on its seed, never on
thread scheduling or on how many examples were produced before it. That is
what makes exact resume possible.

Images are uint8 (H, W, 3) until `normalize`, so that RandAugment's
pixel-value ops see the usual 0..255 range.
"""

import tensorflow as tf

from vit_jax.data.image import randaugment as image_randaugment

INCEPTION_AREA_RANGE = (0.05, 1.0)
INCEPTION_ASPECT_RANGE = (3 / 4, 4 / 3)
# Windows tried before falling back to the whole image: TF's sample_distorted_bounding_box
# default, which big_vision's inception crop uses.
INCEPTION_MAX_ATTEMPTS = 100


def fold_in(seed_2: tf.Tensor, *data) -> tf.Tensor:
  """Derives an independent stateless seed from `seed_2` and integers `data`."""
  for d in data:
    seed_2 = tf.random.experimental.stateless_fold_in(seed_2, tf.cast(d, tf.int64))
  return seed_2


def decode(image_bytes: tf.Tensor) -> tf.Tensor:
  """Encoded JPEG/PNG/BMP/GIF -> image_HxWx3 uint8 (grayscale is replicated)."""
  image_HxWx3 = tf.io.decode_image(image_bytes, channels=3, expand_animations=False)
  image_HxWx3.set_shape([None, None, 3])
  return image_HxWx3


def _inception_window(shape_hw: tf.Tensor, seed_2: tf.Tensor):
  """Samples a crop (begin_yx, size_hw) covering 5%..100% of the area."""
  begin_yxc, size_hwc, _ = tf.image.stateless_sample_distorted_bounding_box(
      image_size=tf.concat([shape_hw, [3]], axis=0),
      bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
      seed=seed_2,
      min_object_covered=0.0,  # Any window is acceptable; the area range decides.
      aspect_ratio_range=INCEPTION_ASPECT_RANGE,
      area_range=INCEPTION_AREA_RANGE,
      max_attempts=INCEPTION_MAX_ATTEMPTS,
      use_image_if_no_bounding_boxes=True,
  )
  return begin_yxc[:2], size_hwc[:2]


def decode_and_inception_crop(image_bytes: tf.Tensor, seed_2: tf.Tensor) -> tf.Tensor:
  """Decodes a random Inception-style crop (not yet resized): uint8 (h, w, 3).

  JPEGs decode only the crop window, which is several times cheaper for
  ImageNet-sized images; other formats decode fully, then crop the same
  window (the window depends only on the image shape and the seed).
  """

  def jpeg():
    shape_hw = tf.image.extract_jpeg_shape(image_bytes)[:2]
    begin_yx, size_hw = _inception_window(shape_hw, seed_2)
    window = tf.concat([begin_yx, size_hw], axis=0)
    return tf.image.decode_and_crop_jpeg(image_bytes, window, channels=3)

  def other():
    image_HxWx3 = decode(image_bytes)
    begin_yx, size_hw = _inception_window(tf.shape(image_HxWx3)[:2], seed_2)
    return tf.slice(image_HxWx3, tf.concat([begin_yx, [0]], 0), tf.concat([size_hw, [3]], 0))

  crop_hxwx3 = tf.cond(tf.io.is_jpeg(image_bytes), jpeg, other)
  crop_hxwx3.set_shape([None, None, 3])
  return crop_hxwx3


def resize(image_HxWx3: tf.Tensor, size_hw, method: str = "bilinear") -> tf.Tensor:
  """Resize to exactly `size_hw` (aspect ratio not kept), uint8."""
  resized = tf.image.resize(image_HxWx3, size_hw, method=method)
  return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)


def resize_small(image_HxWx3: tf.Tensor, smaller_side: int) -> tf.Tensor:
  """Resizes so the shorter side is `smaller_side`, keeping aspect ratio.

  Shrinking averages every source pixel a target pixel covers ("area", big_vision's
  resize_small), so fine detail does not alias; enlarging is bilinear, as the training resize
  is (area would repeat pixels in blocks).
  """
  shape_hw = tf.cast(tf.shape(image_HxWx3)[:2], tf.float32)
  scale = smaller_side / tf.reduce_min(shape_hw)
  new_hw = tf.maximum(tf.cast(tf.round(shape_hw * scale), tf.int32), smaller_side)
  return tf.cond(
      scale < 1.0,
      lambda: resize(image_HxWx3, new_hw, "area"),
      lambda: resize(image_HxWx3, new_hw, "bilinear"),
  )


def central_crop(image_HxWx3: tf.Tensor, size: int) -> tf.Tensor:
  """Crops the central (size, size) window; the image must be at least that."""
  shape_hw = tf.shape(image_HxWx3)[:2]
  top, left = (shape_hw[0] - size) // 2, (shape_hw[1] - size) // 2
  return image_HxWx3[top : top + size, left : left + size, :]


def random_flip(image_HxWx3: tf.Tensor, seed_2: tf.Tensor) -> tf.Tensor:
  return tf.image.stateless_random_flip_left_right(image_HxWx3, seed_2)


def randaugment(
    image_HxWx3: tf.Tensor, num_layers: int, magnitude: float, seed_2: tf.Tensor
) -> tf.Tensor:
  """RandAugment (Cubuk et al. 2019) as big_vision runs it: `num_layers` random ops at
  `magnitude` (0..20, 10 is each op's full strength) on a uint8 image. See `image_randaugment`."""
  return image_randaugment.randaugment(image_HxWx3, num_layers, magnitude, seed_2)


def normalize(image_HxWx3: tf.Tensor) -> tf.Tensor:
  """uint8 [0, 255] -> float32 [-1, 1]."""
  return tf.cast(image_HxWx3, tf.float32) / 127.5 - 1.0


def eval_crop(image_bytes: tf.Tensor, size: int, crop_fraction: float | None) -> tf.Tensor:
  """Standard eval view: resize the short side to size/crop_fraction (`resize_small`), then
  take the central size x size crop. uint8 (size, size, 3). crop_fraction None: the whole
  image resized to size x size, aspect ratio not kept (vision_transformer's fine-tuning eval,
  input_pipeline.py: `tf.image.resize(im, [crop_size, crop_size])`, bilinear)."""
  image_HxWx3 = decode(image_bytes)
  if crop_fraction is None:
    image_SxSx3 = resize(image_HxWx3, (size, size))
    image_SxSx3.set_shape([size, size, 3])
    return image_SxSx3
  image_HxWx3 = resize_small(image_HxWx3, int(round(size / crop_fraction)))
  image_SxSx3 = central_crop(image_HxWx3, size)
  image_SxSx3.set_shape([size, size, 3])
  return image_SxSx3


# --- batch ops: label smoothing, mixup, cutmix -------------------------------
# A batch is mixed with itself rolled by one row, with one mixing ratio per
# batch drawn from Beta(alpha, alpha) under the batch's own seed, so a resumed
# pipeline re-creates exactly the same mixed batches.


def smooth_one_hot(label_b: tf.Tensor, num_classes: int, smoothing: float) -> tf.Tensor:
  """Hard labels -> float32 (b, num_classes) rows summing to 1."""
  return smooth(tf.one_hot(label_b, num_classes, dtype=tf.float32), smoothing)


def smooth(targets_bxC: tf.Tensor, smoothing: float) -> tf.Tensor:
  """Label smoothing of one-hot or multi-hot float32 (b, num_classes) targets."""
  return targets_bxC * (1.0 - smoothing) + smoothing / targets_bxC.shape[-1]


def multi_hot(
    label: tf.Tensor, labels_n: tf.Tensor, num_classes: int, *, labels_alone: bool = False
) -> tf.Tensor:
  """float32 (num_classes,): 1 at `label` and at every class in `labels_n` (big_vision's onehot
  of a multi-label example), 0 elsewhere; with `labels_alone`, at `labels_n`'s classes only (all
  0 when it is empty)."""
  classes = tf.reshape(labels_n, [-1])
  if not labels_alone:
    classes = tf.concat([tf.reshape(label, [1]), classes], axis=0)
  one_hot_nxC = tf.one_hot(tf.cast(classes, tf.int32), num_classes, dtype=tf.float32)
  return tf.reduce_max(tf.concat([one_hot_nxC, tf.zeros([1, num_classes])], 0), 0)


def _sample_beta(seed_2, alpha: float) -> tf.Tensor:
  """Beta(alpha, alpha) as a ratio of two gammas (TF has no stateless beta)."""
  gamma_2 = tf.random.stateless_gamma([2], seed_2, alpha=alpha)
  # Small alphas can underflow both gammas to 0; then keep the batch unmixed.
  return 1.0 - tf.math.divide_no_nan(gamma_2[1], gamma_2[0] + gamma_2[1])


def mixup(images_bxHxWx3, labels_bxC, seed_2, alpha: float):
  """x = lam * x + (1 - lam) * roll(x); same for labels."""
  lam = _sample_beta(seed_2, alpha)
  images = lam * images_bxHxWx3 + (1.0 - lam) * tf.roll(images_bxHxWx3, 1, axis=0)
  labels = lam * labels_bxC + (1.0 - lam) * tf.roll(labels_bxC, 1, axis=0)
  return images, labels


def cutmix(images_bxHxWx3, labels_bxC, seed_2, alpha: float):
  """Pastes one box from roll(x) into every image; labels mix by the box's
  true (clipped) area, so they stay exact even when the box hits a border."""
  beta_seed_2, box_seed_2 = tf.unstack(tf.random.experimental.stateless_split(seed_2, 2))
  lam = _sample_beta(beta_seed_2, alpha)
  shape = tf.shape(images_bxHxWx3)
  height, width = shape[1], shape[2]
  hw_f = tf.cast(tf.stack([height, width]), tf.float32)
  # Box of area (1 - lam) * H * W with the image's aspect ratio, centered anywhere.
  box_hw = hw_f * tf.sqrt(1.0 - lam)
  center_yx = tf.random.stateless_uniform([2], box_seed_2) * hw_f
  lo_yx = tf.cast(tf.round(tf.clip_by_value(center_yx - box_hw / 2, 0.0, hw_f)), tf.int32)
  hi_yx = tf.cast(tf.round(tf.clip_by_value(center_yx + box_hw / 2, 0.0, hw_f)), tf.int32)
  rows_H = tf.range(height)
  cols_W = tf.range(width)
  in_rows_H = (rows_H >= lo_yx[0]) & (rows_H < hi_yx[0])
  in_cols_W = (cols_W >= lo_yx[1]) & (cols_W < hi_yx[1])
  box_HxW = in_rows_H[:, None] & in_cols_W[None, :]
  images = tf.where(box_HxW[None, :, :, None], tf.roll(images_bxHxWx3, 1, axis=0), images_bxHxWx3)
  kept = 1.0 - tf.reduce_mean(tf.cast(box_HxW, tf.float32))
  labels = kept * labels_bxC + (1.0 - kept) * tf.roll(labels_bxC, 1, axis=0)
  return images, labels


def mix_batch(images_bxHxWx3, labels_bxC, seed_2, mixup_alpha: float, cutmix_alpha: float):
  """Mixup, cutmix, or (both enabled) one of them per batch with prob 1/2."""
  if mixup_alpha <= 0 and cutmix_alpha <= 0:
    return images_bxHxWx3, labels_bxC
  choice_seed_2, mix_seed_2 = tf.unstack(tf.random.experimental.stateless_split(seed_2, 2))
  do_mixup = lambda: mixup(images_bxHxWx3, labels_bxC, mix_seed_2, mixup_alpha)
  do_cutmix = lambda: cutmix(images_bxHxWx3, labels_bxC, mix_seed_2, cutmix_alpha)
  if cutmix_alpha <= 0:
    return do_mixup()
  if mixup_alpha <= 0:
    return do_cutmix()
  use_mixup = tf.random.stateless_uniform([], choice_seed_2) < 0.5
  return tf.cond(use_mixup, do_mixup, do_cutmix)
