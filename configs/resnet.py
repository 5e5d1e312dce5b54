"""BiT ResNet-v2 classification: configs/vit.py's datasets and recipes with a ResNet for the ViT,
and BiT's own recipe on ImageNet-1k.

Arguments after the colon, `k=v` separated by commas (as configs/vit.py):
  dataset   sklearn_digits (default), cifar10, cifar100, imagenet2012, or any TFDS image dataset /
            `folder:/path`; each gets configs/vit.py's data, augmentation, optimizer and cadence,
            except imagenet2012, which gets big_vision's BiT recipe (below).
  variant   DEPTHxWIDTH, e.g. 50x1, 101x3 (depth 26, 50, 101 or 152; each dataset has a default).
  finetune  fine-tune from --config.init_from (one of our ResNet workdirs) at 384 px.
  runlocal  shrink everything to a smoke run of a few steps.
Small custom nets: --config.model.block_counts="(1,1,1)" --config.model.width=16
--config.model.num_groups=8 (the digits default; GroupNorm needs width divisible by num_groups).

Embedded default: a 3-stage net of one unit each (0.13 M parameters, 10.2 M forward FLOPs per
image, as many as configs/vit.py's digits ViT's 10.6 M) on configs/vit.py's digits recipe:
  python -m vit_jax.main --config=configs/resnet.py --workdir=workdirs/resnet_digits
  -> should take about 2-3 min on 2 CPU cores and reach about 99% test accuracy and about 99%
     10-shot probe accuracy (measured: docs/results.md).

CIFAR-10 from scratch (ResNet-26x1 with the 3x3 "small" root, 32 px; not run here, needs a GPU):
  python -m vit_jax.main --config=configs/resnet.py:dataset=cifar10 --workdir=W
  -> not measured (He et al. 2016 report 94.5% for a pre-activation ResNet-164 with BatchNorm
     and SGD; treat it as a reference point, not a prediction).

ImageNet-1k from scratch, ResNet-50x1 on big_vision's BiT recipe (configs/bit_i1k.py): batch
4096, SGD momentum 0.9 (bfloat16 accumulator), lr 0.1 x 4096/256 = 1.6 and decoupled weight
decay 1e-4 x 4096/256, 1k warmup steps, cosine, clipping at 1, Inception crop and flip only
(no RandAugment or mixup), 90 epochs:
  python -m vit_jax.main --config=configs/resnet.py:dataset=imagenet2012 \
      --workdir=workdirs/resnet_imagenet
  -> "Run training of a BiT-ResNet-50x1 variant, which takes ~32min on v3-128" (bit_i1k.py);
     it quotes no accuracy. Not reproduced here. One difference: bit_i1k.py trains big_vision's
     ResNet-v1 (models/bit.py), whose units end in a GroupNorm with zero-initialized scale before
     the residual sum; ours is BiT's ResNet-v2 (pre-activation, the released BiT checkpoints'
     layout), whose units end in a weight-standardized conv, so they start as initialized.

Fine-tuning at 384 px from one of our ResNet-50x1 workdirs (BiT's released .npz files are not
read):
  python -m vit_jax.main --config=configs/resnet.py:dataset=cifar10,finetune \
      --config.init_from=workdirs/resnet_imagenet --workdir=W
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax.config import args
from vit_jax.config import defaults

# (variant, stem) per dataset; "small" is a 3x3/1 root without pooling, for 32-px images.
DEFAULTS = {
    "sklearn_digits": ("26x1", "small"),
    "cifar10": ("26x1", "small"),
    "cifar100": ("26x1", "small"),
    "imagenet2012": ("50x1", "imagenet"),
}


_VIT = args.load_beside(__file__, "vit.py")
IMAGENET_TRAIN_EXAMPLES = _VIT.IMAGENET_TRAIN_EXAMPLES


def _vit_config(arg: str) -> ml_collections.ConfigDict:
  """configs/vit.py's config, whose model this one replaces."""
  return _VIT.get_config(arg)


def get_config(arg=None):
  options = args.parse(
      arg, dict(dataset="sklearn_digits", variant="", finetune=False, runlocal=False)
  )
  c = _vit_config(f"dataset={options['dataset']},finetune={options['finetune']}")
  # Fine-tuning starts from an ImageNet-style model: its root conv (7x7 or 3x3) must match.
  variant, stem = ("50x1", "imagenet")
  if not options["finetune"]:
    variant, stem = DEFAULTS.get(options["dataset"], (variant, stem))
  c.model = ml_collections.ConfigDict(
      dict(
          name="resnet",
          variant=options["variant"] or variant,
          # None keeps the variant's published shape; set them for small custom nets.
          block_counts=placeholder(tuple),
          width_factor=placeholder(int),
          width=placeholder(int),
          stem=stem,
          num_groups=32,
          head_bias_init=0.0,
          dtype="float32",
      )
  )
  if c.dataset == "sklearn_digits" and not options["finetune"]:
    _digits(c)
  elif c.dataset == "imagenet2012" and not options["finetune"]:
    _bit_imagenet(c)
  if options["runlocal"]:
    _runlocal(c)
  return c


def _digits(c):
  """A 3-stage ResNet on 16-px digits: the ViT recipe's data, augmentation and optimizer."""
  c.model.update(block_counts=(1, 1, 1), width=16, num_groups=8)


def _bit_imagenet(c):
  """big_vision configs/bit_i1k.py (lines 34-70)."""
  c.loss = "softmax_xent"
  c.augment.update(
      inception_crop=True, flip=True, randaugment_layers=0, mixup_alpha=0.0, cutmix_alpha=0.0
  )
  c.batch_size = 4096
  c.target_topology = None  # not compiled for a slice yet (the ViT recipe's is for a ViT)
  c.total_steps = 90 * IMAGENET_TRAIN_EXAMPLES // c.batch_size  # 90 epochs of train[:99%]
  c.optimizer.update(
      name="sgd",
      momentum=0.9,
      mu_dtype="bfloat16",  # big_vision's momentum_hp keeps the momentum in bfloat16
      lr=0.1 * c.batch_size / 256,  # the linear scaling rule, as bit_i1k.py writes it
      weight_decay=1e-4 * c.batch_size / 256,
      decoupled_weight_decay=True,
      warmup_steps=1_000,
      schedule="cosine",
      grad_clip_norm=1.0,
  )


def _runlocal(c):
  """A few steps with a 2-stage net of one unit each: checks the wiring, not accuracy."""
  c.model.update(block_counts=(1, 1), width=16, num_groups=8)
  defaults.shrink_for_runlocal(c)
