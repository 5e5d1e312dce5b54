"""Batch-level label ops: label smoothing, mixup, cutmix (stateless TF).

A batch is mixed with itself rolled by one row, with one mixing ratio per
batch drawn from Beta(alpha, alpha) under the batch's own seed, so a resumed
pipeline re-creates exactly the same mixed batches.
"""

import tensorflow as tf


def smooth_one_hot(label_b: tf.Tensor, num_classes: int, smoothing: float) -> tf.Tensor:
  """Hard labels -> float32 (b, num_classes) rows summing to 1."""
  return smooth(tf.one_hot(label_b, num_classes, dtype=tf.float32), smoothing)


def smooth(targets_bxC: tf.Tensor, smoothing: float) -> tf.Tensor:
  """Label smoothing of one-hot or multi-hot float32 (b, num_classes) targets."""
  return targets_bxC * (1.0 - smoothing) + smoothing / targets_bxC.shape[-1]


def multi_hot(label: tf.Tensor, labels_n: tf.Tensor, num_classes: int) -> tf.Tensor:
  """float32 (num_classes,): 1 at `label` and at every class in `labels_n` (big_vision's onehot
  of a multi-label example), 0 elsewhere."""
  classes = tf.concat([tf.reshape(label, [1]), tf.reshape(labels_n, [-1])], axis=0)
  return tf.reduce_max(tf.one_hot(tf.cast(classes, tf.int32), num_classes, dtype=tf.float32), 0)


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
