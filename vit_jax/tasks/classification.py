"""Image classification: TFDS/folder images in; softmax or sigmoid cross-entropy, top-1 and top-5
accuracy out."""

import jax
import jax.numpy as jnp
import optax

from vit_jax import data
from vit_jax import tasks


def _pipeline():
  """The image input pipeline (TensorFlow), imported on first use: the step itself needs no TF, so
  a step built without data (`vit_jax.compile`, the benchmarks) runs where TF is not installed."""
  from vit_jax.data.image import pipeline  # pylint: disable=g-import-not-at-top

  return pipeline


def softmax_xent(logits_BxC, labels_BxC):
  """Cross-entropy of one softmax over the classes: labels sum to 1 (soft labels allowed)."""
  return optax.softmax_cross_entropy(logits_BxC, labels_BxC)


def sigmoid_xent(logits_BxC, labels_BxC):
  """An independent binary cross-entropy per class, summed over classes (big_vision's
  sigmoid_xent, utils.py): multi-label targets, and the AugReg recipes' loss."""
  return jnp.sum(optax.sigmoid_binary_cross_entropy(logits_BxC, labels_BxC), axis=-1)


LOSSES = {"softmax_xent": softmax_xent, "sigmoid_xent": sigmoid_xent}
# The class probabilities each loss trains the logits for (what vit_jax.predict reports).
PROBABILITIES = {softmax_xent: jax.nn.softmax, sigmoid_xent: jax.nn.sigmoid}


def loss_name(config) -> str:
  """The loss a config (or a workdir's saved config.json) trains with; an imported checkpoint,
  which has no config, gets the softmax's."""
  return config["loss"] if config else "softmax_xent"


class ImageClassification(tasks.Task):
  """Images in, class logits out; labels may be soft (smoothed or mixed) in training."""

  def __init__(self, config, workdir=None, *, num_classes: int | None = None):
    """`num_classes` given: the dataset is not opened (e.g. to compile the step without data)."""
    super().__init__(config, workdir)
    if num_classes is None:
      info = _pipeline().dataset_info(
          config.dataset,
          data_dir=config.data_dir,
          download=config.download,
          read_options=data.read_options(config),
      )
      num_classes = config.num_classes or info.num_classes
    self.num_classes = num_classes
    self.loss_fn = LOSSES[loss_name(config)]

  def model_overrides(self) -> dict:
    return {"num_classes": self.num_classes}

  def init_from_rules(self) -> dict:
    """A ViT with a cls token keeps one slot ahead of the position grid; other pools none."""
    return {"prefix_tokens": 1 if self.config.model.get("classifier", "token") == "token" else 0}

  def init_inputs(self, batch_size: int = 1):
    size = self.config.image_size
    return (jnp.zeros((batch_size, size, size, 3), jnp.float32),)

  def batch_spec(self, batch_size: int) -> dict:
    size = self.config.image_size
    return {
        "image": jax.ShapeDtypeStruct((batch_size, size, size, 3), jnp.float32),
        "label": jax.ShapeDtypeStruct((batch_size,), jnp.int32),
        "labels": jax.ShapeDtypeStruct((batch_size, self.num_classes), jnp.float32),  # soft
    }

  def train_batches(self, start_step: int, shard: int, shard_count: int):
    c, a = self.config, self.config.augment
    augment = _pipeline().Augment(
        inception_crop=a.inception_crop,
        flip=a.flip,
        randaugment=(a.randaugment_layers, a.randaugment_magnitude)
        if a.randaugment_layers
        else None,
        mixup_alpha=a.mixup_alpha,
        cutmix_alpha=a.cutmix_alpha,
        label_smoothing=a.label_smoothing,
    )
    return _pipeline().train_iterator(
        c.dataset,
        c.train_split,
        seed=c.seed,
        start_step=start_step,
        augment=augment,
        shuffle_buffer=c.shuffle_buffer,
        **self._pipeline_settings(shard, shard_count),
    )

  def eval_batches(self, shard: int, shard_count: int, *, dataset=None, split=None):
    c = self.config
    return _pipeline().eval_iterator(
        dataset or c.dataset,
        split or c.eval_split,
        crop_fraction=_pipeline().eval_crop_fraction(c.augment.inception_crop, c.eval_view),
        **self._pipeline_settings(shard, shard_count),
    )

  def train_size(self) -> int:
    c = self.config
    return _pipeline().split_size(
        c.dataset,
        c.train_split,
        data_dir=c.data_dir,
        download=c.download,
        read_options=data.read_options(c),
    )

  def _pipeline_settings(self, shard: int, shard_count: int) -> dict:
    """What the train and eval pipelines share: batch and image size, the source, the shard."""
    c = self.config
    return dict(
        global_batch_size=c.batch_size,
        image_size=c.image_size,
        data_dir=c.data_dir,
        process_index=shard,  # the pipeline reads share `shard` of `shard_count`
        process_count=shard_count,
        download=c.download,
        # the label field, an hf: dataset's columns, subset and held-out slice, and whether an
        # image that does not decode is skipped or refused
        read_options=data.read_options(c),
    )

  def model_inputs(self, batch):
    return (batch["image"],)

  @staticmethod
  def totals(batch):
    """Full-batch normalizer of the loss: the number of examples."""
    return {"examples": jnp.asarray(batch["label"].shape[0], jnp.float32)}

  def loss(self, logits_BxC, batch, totals):
    """`config.loss` on soft labels (smoothed or mixed) and accuracy, per example."""
    loss_B = self.loss_fn(logits_BxC, batch["labels"])
    correct_B = jnp.argmax(logits_BxC, -1) == batch["label"]
    return (
        jnp.sum(loss_B) / totals["examples"],
        {"train_accuracy": jnp.sum(correct_B) / totals["examples"]},
    )

  def eval_sums(self, logits_BxC, batch):
    """Masked sums over the batch; padded rows (mask 0) count nowhere. The loss is against the
    eval `labels` (one-hot, or multi-hot for multi-label data); accuracy and top-5 against
    `label`; prec@1 counts a row whose top-1 class is any of its labels, over the rows that have
    labels (big_vision's prec@1, evaluators/classification.py:40-51; on single-label data it is
    the accuracy)."""
    mask_B = batch["mask"].astype(jnp.float32)
    labels_BxC = batch["labels"].astype(jnp.float32)
    labelled_B = mask_B * jnp.max(labels_BxC, axis=-1)  # ReaL leaves some images without labels
    loss_B = self.loss_fn(logits_BxC, labels_BxC)
    top1_B = jnp.argmax(logits_BxC, -1)
    correct_B = (top1_B == batch["label"]).astype(jnp.float32)
    prec1_B = (jnp.take_along_axis(labels_BxC, top1_B[:, None], axis=1)[:, 0] > 0).astype(
        jnp.float32
    )
    _, top5_BxK = jax.lax.top_k(logits_BxC, min(5, logits_BxC.shape[-1]))
    top5_B = jnp.any(top5_BxK == batch["label"][:, None], axis=-1).astype(jnp.float32)
    return {
        "loss": jnp.sum(loss_B * mask_B),
        "correct": jnp.sum(correct_B * mask_B),
        "correct_any": jnp.sum(prec1_B * labelled_B),
        "labelled": jnp.sum(labelled_B),
        "correct_top5": jnp.sum(top5_B * mask_B),
        "count": jnp.sum(mask_B),
    }

  @staticmethod
  def eval_summary(sums: dict) -> dict:
    summary = tasks.per_example_summary(
        sums["loss"], sums["correct"], sums["count"], sums["correct_top5"]
    )
    prec1 = float(sums["correct_any"]) / max(float(sums["labelled"]), 1.0)
    return {"prec@1": prec1, **summary}
