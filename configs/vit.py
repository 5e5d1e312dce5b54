"""ViT classification: the embedded default, synthetic shapes, CIFAR, ImageNet from scratch, and
fine-tuning.

Arguments after the colon, `k=v` separated by commas:
  dataset   sklearn_digits (default), synthetic_shapes, marks_pair, cifar10, cifar100,
            imagenet2012, or any TFDS image dataset / `folder:/path` (those get the fine-tuning
            recipe's data settings).
  variant   ViT preset/patch, e.g. S/16 (each dataset has a default).
  recipe    imagenet2012 from scratch: "plain" (big_vision's vit_s16_i1k.py; S/16's default) or
            "augreg" (vit_i1k.py; every other size's default). imagenet21k: "augreg"
            (vit_i21k.py) or "scaling" (proj/scaling_laws/train_vit_g.py; the default of g/14
            and G/14).
  finetune  fine-tune from --config.init_from at the dataset's fine-tuning resolution.
  runlocal  shrink everything to a smoke run of a few steps.

Embedded default (bash scripts/train.sh runs the same):
  python -m vit_jax.main --config=configs/vit.py --workdir=workdirs/digits
  -> should take about 2-3 min on 2 CPU cores and reach about 98.5% test accuracy (measured:
     docs/results.md).

Synthetic shapes (offline: 50k train / 10k test 32 px images, drawn on first use; see
vit_jax/data/image/shapes.py), ViT with 8x8 patches, 128 wide, 6 blocks, 800 steps:
  python -m vit_jax.main --config=configs/vit.py:dataset=synthetic_shapes --workdir=workdirs/shapes
  -> should take about 2 min on 2 CPU cores once the dataset is built and reach about 45% test
     accuracy, still rising (measured: docs/results.md).
  Fewer training examples for a data-size axis: --config.train_split='train[:10%]' (5,000).

Two marks d px apart, same colour or not (offline: 24 px, built on first use; see
vit_jax/data/image/marks_pair.py): a ViT with 4x4 patches, width 96, 4 blocks, 2,000 steps of 64,
with one evaluator per distance; the ViT half of the locality experiment (experiments/locality.py):
  python -m vit_jax.main --config=configs/vit.py:dataset=marks_pair --workdir=workdirs/marks_vit
  -> should take about 6 min on 2 CPU cores and reach 100% test accuracy at every distance from
     3 to 21 px, 2,000 images each (measured: experiments/results/locality_cpu/README.md).

CIFAR-10 from scratch (ViT-S/4, 32 px; not run here, needs a GPU):
  python -m vit_jax.main --config=configs/vit.py:dataset=cifar10 --workdir=W
  -> expected ~90% test accuracy, similar to published small-ViT CIFAR-10 results without
     extra data; treat as an estimate, not a measured figure.

ImageNet-1k from scratch, ViT-S/16: big_vision's plain baseline (configs/vit_s16_i1k.py; Beyer
et al. 2022): batch 1024, Adam lr 1e-3, decoupled weight decay 1e-4, 10k warmup, cosine,
RandAugment(2, 10), mixup 0.2, GAP, tanh pre-logits layer, sin-cos posemb, 90 epochs:
  python -m vit_jax.main --config=configs/vit.py:dataset=imagenet2012,variant=S/16 --workdir=W
  -> "This should take 6-7h to finish 90ep on a TPU-v3-8 and reach 76.5%" (vit_s16_i1k.py);
     300 epochs (--config.total_steps=371_588) "reach 80% in less than one day" (Beyer et al.
     2022, abstract). Not reproduced here. Those are ImageNet validation top-1, logged as
     eval/accuracy; the run also logs big_vision's other evaluators (train[:2%], minival,
     ImageNet-v2 and ReaL: docs/imagenet.md, which says how to prepare the data).

ImageNet-1k from scratch, any other variant (e.g. B/16, L/16): big_vision's AugReg recipe
(configs/vit_i1k.py; Steiner et al. 2021, "How to train your ViT?"): batch 4096, 300 epochs,
sigmoid cross-entropy with head bias -6.9, cls token, pre-logits, learned posemb, and the
augmentation vit_i1k.py picks per size (B/16, L/16: RandAugment(2, 15) + mixup 0.5):
  python -m vit_jax.main --config=configs/vit.py:dataset=imagenet2012,variant=B/16 --workdir=W
  -> not reproduced here. vit_i1k.py quotes no figure or run time; its docstring notes the
     recipe leaves out the dropout and stochastic depth "shown to help with B/32, B/16, L/16
     models in the paper (Figure 4)". It evaluates as the S/16 recipe does (validation top-1 as
     eval/accuracy, beside train[:2%], minival, ImageNet-v2 and ReaL).

ImageNet-21k pretraining, big_vision's AugReg recipe (configs/vit_i21k.py): batch 4096, 300
epochs, sigmoid cross-entropy with head bias -10, GAP, learned posemb, Adam as above, and the
augmentation vit_i21k.py picks per size. Needs a TFDS builder named imagenet21k (not in public
TFDS; see experiments/sweeps/vit_i21k_paper.py); examples whose `labels` feature lists several
classes train on all of them (multi-hot targets), as big_vision's i21k input does:
  python -m vit_jax.main --config=configs/vit.py:dataset=imagenet21k,variant=B/16 --workdir=W
  -> the published targets per size and epoch count, with the differences in augmentation
     between them and this recipe, are in experiments/sweeps/vit_i21k_paper.py; not reproduced
     here.

ImageNet-21k pretraining of ViT-g/14 and ViT-G/14, big_vision's scaling-laws recipe
(configs/proj/scaling_laws/train_vit_g.py; Zhai et al. 2022, "Scaling Vision Transformers"),
taken by variant=g/14 and G/14 (recipe=scaling): batch 16,384, MAP pooling, head bias -10,
sigmoid cross-entropy, Inception crop and flip only, Adafactor (factored second moment, bf16
momentum 0.9) at lr 8e-4, decoupled weight decay 2.4e-5 (the head's kernel 100x), clipping at 1,
10k warmup, rsqrt (timescale 10k), 1M steps ending in a 50k linear cooldown. big_vision trains it
on JFT-3B (29,593 classes), which is not public; this trains on ImageNet-21k, as its docstring
says one can (line 22), with the ImageNet-21k recipe's data and held-out evaluators; 1M steps of
16,384 are about 1,300 epochs of ImageNet-21k (set --config.total_steps for fewer; the cooldown
stays the last 50k):
  python -m vit_jax.main --config=configs/vit.py:dataset=imagenet21k,variant=g/14 --workdir=W
  -> not reproduced here; the paper's figures are for JFT-3B pretraining, and the recipe's size
     on a TPU slice is in docs/pod.md ("The paper recipes on their slices").

Fine-tuning at 384 px from a checkpoint (ours or an original ViT .npz), the ViT paper's recipe
(vision_transformer configs/common.py): SGD momentum 0.9, lr 0.03, batch 512, cosine with 500
warmup steps, clipping at 1, no weight decay; 20k steps on ImageNet, 10k on CIFAR, 500 on Pets
and Flowers (ViT paper, Table 4), 2,500 elsewhere (VTAB's); eval resizes the whole image to 384:
  python -m vit_jax.main --config=configs/vit.py:dataset=imagenet2012,variant=B/16,finetune \
      --config.init_from=ViT-B_16.npz --workdir=W
  -> vision_transformer's README ("replicated" table) lists ViT-B/16 from ImageNet-21k at 384 px
     reaching 84.53% on ImageNet in 6.5 h on A100 GPUs (dropout 0.0; 84.12% with dropout 0.1,
     19.3 h on V100s); not reproduced here.
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax import errors
from vit_jax import evaluate as evaluators
from vit_jax.config import args
from vit_jax.config import defaults
from vit_jax.models import vit as vit_model

# ImageNet-1k's TFDS train split has 1,281,167 images; the recipe trains on train[:99%], which
# TFDS rounds to 1,268,355 (the rest is minival), so epochs are counted over those, as big_vision
# counts total_epochs over its split (vit_s16_i1k.py:38,45).
IMAGENET_TRAIN_SPLIT = "train[:99%]"
IMAGENET_TRAIN_EXAMPLES = 1_268_355

# big_vision configs/vit_i1k.py (lines 42-60, 77-84): the AugReg augmentation per variant, as
# (RandAugment layers, magnitude, mixup alpha); variants it does not list get "medium2".
AUGREG_I1K_AUGMENT = {
    "Ti/16": (2, 0, 0.0),  # light1
    "S/32": (2, 15, 0.2),  # medium1
    "S/16": (2, 15, 0.5),  # medium2
    "B/32": (2, 15, 0.5),  # medium2
    "B/16": (2, 15, 0.5),  # medium2
    "L/16": (2, 15, 0.5),  # medium2
}
# big_vision configs/vit_i21k.py (lines 30-48, 65-72): the same per variant for ImageNet-21k.
AUGREG_I21K_AUGMENT = {
    "Ti/16": (0, 10, 0.0),  # none
    "S/32": (0, 10, 0.0),  # none
    "S/16": (2, 0, 0.0),  # light1
    "B/32": (2, 10, 0.2),  # light2
    "B/16": (2, 10, 0.2),  # light2
    "L/16": (2, 15, 0.5),  # medium2
}
I21K_CLASSES = 21_843  # vit_i21k.py line 58
# ~12.4M training images ("12.4M examples for training", vision_transformer issue #2); set it to
# your copy's count: it only sets the step budget.
I21K_TRAIN = 12_400_000

# vision_transformer configs/common.py DATASET_PRESETS (lines 85-107) and the ViT paper's Table 4.
FINETUNE_STEPS = {
    "imagenet2012": 20_000,
    "cifar10": 10_000,
    "cifar100": 10_000,
    "oxford_iiit_pet": 500,
    "oxford_flowers102": 500,
}
FINETUNE_DEFAULT_STEPS = 2_500  # VTAB's fine-tuning budget (Zhai et al. 2019)
# The same presets' training splits (lines 89, 96, 103): the rest of each is a minival.
FINETUNE_TRAIN_SPLIT = {"imagenet2012": 99, "cifar10": 98, "cifar100": 98}
# vision_transformer configs/models.py: L/16 and H/14 fine-tune with dropout 0.1 (lines 142, 160).
FINETUNE_DROPOUT = {"L": 0.1, "H": 0.1}

DEFAULT_VARIANT = {
    "sklearn_digits": "Ti/4",
    "synthetic_shapes": "Ti/8",
    "marks_pair": "Ti/4",
    "cifar10": "S/4",
    "cifar100": "S/4",
    "imagenet2012": "S/16",
}


def get_config(arg=None):
  options = args.parse(
      arg, dict(dataset="sklearn_digits", variant="", finetune=False, recipe="", runlocal=False)
  )
  recipes = RECIPES.get(options["dataset"], {})
  if options["recipe"] and (not recipes or options["finetune"]):
    raise errors.ConfigError(
        f"configs/vit.py: recipe={options['recipe']} chooses how {' or '.join(RECIPES)} train "
        "from scratch; leave it out for other datasets and for fine-tuning."
    )
  if options["recipe"] not in ("", *recipes):
    raise errors.ConfigError(
        f"configs/vit.py: recipe={options['recipe']} must be one of {', '.join(recipes)} for "
        f"{options['dataset']}."
    )
  # eval_split None: the dataset's own, also after --config.dataset= names another (its row in
  # data/tfds_builders.py IMAGE_DATASETS, "test" for other TFDS datasets, a folder's test/,
  # validation/ or val/).
  c = defaults.dataset_defaults("image_classification", options["dataset"], eval_split=None)
  c.download = False  # a missing TFDS dataset is an error naming `python -m vit_jax.prepare`
  # What an image that does not decode is, in a folder: or wds: dataset (config/defaults.py CHOICES)
  c.bad_images = "skip"
  # An hf: dataset's Image and ClassLabel columns; label_key is also the field of a wds: sample's
  # KEY.json that holds its class (where the sample has no KEY.cls).
  c.image_key, c.label_key = "image", "label"
  # folder: datasets whose train and eval splits hold different classes are refused unless true
  c.allow_class_mismatch = False
  c.num_classes = placeholder(int)  # None: read from the dataset
  # Examples shuffled at a time (encoded bytes; files are also read in a new order each epoch).
  c.shuffle_buffer = 10_000
  c.loss = "softmax_xent"  # vit_jax/tasks/classification.py LOSSES
  c.eval_view = "crop"  # what eval sees of an image (config/defaults.py CHOICES)
  c.image_size = 224
  c.model = ml_collections.ConfigDict(
      dict(
          name="vit",
          variant=options["variant"] or DEFAULT_VARIANT.get(options["dataset"], "B/16"),
          # None keeps the variant's published shape.
          width=placeholder(int),
          depth=placeholder(int),
          num_heads=placeholder(int),
          mlp_dim=placeholder(int),
          classifier="token",
          posemb="learn",
          representation_size=placeholder(int),
          posemb_init_std=placeholder(float),  # None: 1/sqrt(width), big_vision's
          dropout_rate=0.0,
          attention_dropout_rate=0.0,
          droppath_rate=0.0,
          activation=vit_model.ViT.activation,  # GELU's tanh form, as the references' nn.gelu
          head_bias_init=0.0,
          attention_impl="auto",
          remat="none",
          scan_layers=False,
          dtype="float32",
      )
  )
  c.augment = ml_collections.ConfigDict(
      dict(
          inception_crop=True,
          flip=True,
          randaugment_layers=0,
          randaugment_magnitude=10,
          mixup_alpha=0.0,
          cutmix_alpha=0.0,
          label_smoothing=0.0,
      )
  )

  if options["finetune"]:
    _finetune(c)
  elif c.dataset == "sklearn_digits":
    _digits(c)
  elif c.dataset == "synthetic_shapes":
    _shapes(c)
  elif c.dataset == "marks_pair":
    _marks(c)
  elif c.dataset in ("cifar10", "cifar100"):
    _cifar(c)
  elif c.dataset == "imagenet2012":
    recipe = options["recipe"] or ("plain" if c.model.variant == "S/16" else "augreg")
    I1K_RECIPES[recipe](c)
  elif c.dataset == "imagenet21k":
    recipe = options["recipe"] or ("scaling" if c.model.variant in SCALING_TOPOLOGY else "augreg")
    I21K_RECIPES[recipe](c)
  else:
    _finetune(c)  # other datasets are small: fine-tune rather than train from scratch
  if options["runlocal"]:
    _runlocal(c)
  return c


def _digits(c):
  """Tiny ViT on 8x8 digits upsampled to 16 px: 4x4 patches, no flips (digits are not symmetric)."""
  c.image_size = 16
  c.model.update(width=96, depth=4, num_heads=4, mlp_dim=192, dropout_rate=0.1)
  # 1.4k training images overfit quickly: mild RandAugment, mixup and smoothing add ~1.5 points.
  c.augment.update(
      inception_crop=False,
      flip=False,
      randaugment_layers=2,
      randaugment_magnitude=5,
      mixup_alpha=0.2,
      label_smoothing=0.1,
  )
  c.batch_size = 128
  c.total_steps = 1500
  c.optimizer.update(lr=2e-3, weight_decay=0.05, warmup_steps=100)
  c.log_every = 100
  c.eval_every = 500
  c.checkpoint_every = 500
  # Besides the test split every 500 steps: linear probes of the frozen features on 1, 5, 10 and
  # 25 training images per class (3 draws each), scored on the test split, every 750 steps.
  c.evals.fewshot = evaluators.entry(c, "fewshot", every=750)


def _shapes(c):
  """Small ViT on the 32 px synthetic shapes: 8x8 patches (16 tokens), which trained 5x faster on
  2 CPU cores than 4x4 patches at the same width (130 vs 25 examples/s, busy machine). Flips
  only: every class is closed under mirroring, and random crops could cut the shape out."""
  c.image_size = 32
  c.model.update(width=128, depth=6, num_heads=4, mlp_dim=256)
  c.augment.update(inception_crop=False, flip=True)
  c.batch_size = 128
  c.total_steps = 800  # 102k examples: about 2 epochs of the 50k training split
  c.optimizer.update(lr=1e-3, weight_decay=0.05, warmup_steps=100)
  c.log_every = 100
  c.eval_every = 400
  c.checkpoint_every = 400


def _marks(c):
  """Do two 3x3 marks d px apart have the same colour? (vit_jax/data/image/marks_pair.py, 24 px).
  4x4 patches (36 tokens), so every token attends to every other from the first block. No crops
  or flips (a crop can cut a mark out). Besides the mixed-distance test split, one evaluator per
  distance (`d03/accuracy`, ...), all only at the end. The locality experiment runs it beside
  configs/local_cnn.py (experiments/sweeps/locality_cpu.py)."""
  from vit_jax.data.image import marks_pair  # pylint: disable=g-import-not-at-top  (this data only)

  c.image_size = marks_pair.IMAGE_SIZE
  c.model.update(width=96, depth=4, num_heads=4, mlp_dim=192)
  c.augment.update(inception_crop=False, flip=False)
  c.batch_size = 64
  c.total_steps = 2000  # 128k examples, about 2 epochs
  c.optimizer.update(lr=1e-3, weight_decay=0.05, warmup_steps=100)
  c.log_every = 100
  c.eval_every = defaults.follows(c, "total_steps")  # once, at the end
  c.checkpoint_every = 500
  for distance in marks_pair.TEST_DISTANCES:
    c.evals[f"d{distance:02d}"] = evaluators.entry(
        c, "classification", split=marks_pair.split_name(distance)
    )


def _cifar(c):
  c.image_size = 32
  c.model.update(classifier="gap", posemb="sincos2d", droppath_rate=0.1)
  c.augment.update(inception_crop=True, flip=True, randaugment_layers=2, randaugment_magnitude=9)
  c.batch_size = 512
  c.total_steps = 40_000
  c.optimizer.update(lr=1e-3, weight_decay=0.05, warmup_steps=2_000)
  c.eval_every = 2_000
  c.checkpoint_every = 2_000


# A v5p slice per variant where `python -m vit_jax.compile` finds the ImageNet-1k step (batch
# 1024, bf16, splash attention, no remat) fits (docs/pod.md, "Before you spend pod hours").
I1K_TOPOLOGY = {"S/16": "v5p-8", "B/16": "v5p-8", "L/16": "v5p-32"}
# The batch-4096 recipes (AugReg ImageNet-1k, ImageNet-21k): the slices where the ImageNet-21k
# steps at batch 4096 compile and fit (docs/pod.md, "Before you spend pod hours").
BATCH_4096_TOPOLOGY = {"S/16": "v5p-32", "B/16": "v5p-32", "L/16": "v5p-64"}


def _imagenet_common(c):
  """What big_vision's ImageNet ViT configs share (vit_s16_i1k.py, vit_i1k.py, vit_i21k.py): data,
  Adam with a bfloat16 first moment, decoupled weight decay 1e-4, 10k warmup, cosine, clip at 1."""
  c.train_split = IMAGENET_TRAIN_SPLIT  # the last 1% is a minival split, as in big_vision
  c.eval_split = "validation"  # big_vision's evals.val
  c.num_classes = 1000  # ImageNet-1k; also lets the step compile without the data
  c.image_size = 224
  c.augment.update(inception_crop=True, flip=True)
  # big_vision/configs/vit_s16_i1k.py:49. Host memory: 250k JPEGs at ~110 KB each, ~27 GB.
  c.shuffle_buffer = 250_000
  c.optimizer.update(
      name="adamw",
      lr=1e-3,
      b2=0.999,
      weight_decay=1e-4,
      decoupled_weight_decay=True,
      grad_clip_norm=1.0,
      warmup_steps=10_000,
      schedule="cosine",
      mu_dtype="bfloat16",  # big_vision vit_s16_i1k.py:80, vit_i1k.py:130, vit_i21k.py:106
  )
  # Accelerators: bf16 matmuls, fp32 params, softmax, norms, logits and loss. big_vision computes
  # in fp32 (dtype_mm="float32", models/vit.py:61); bf16 halves activation memory and feeds the
  # MXU at full rate, where TPUs round fp32 matmul inputs to bf16 passes anyway.
  c.model.dtype = "bfloat16"
  c.log_every = 100
  c.eval_every = 5_000
  c.checkpoint_every = 2_000
  c.keep_checkpoints = 3


def _imagenet1k_evals(c):
  """big_vision's ImageNet-1k evaluators (vit_s16_i1k.py:95-103, vit_i1k.py:152-161), every 2,500
  steps: besides `eval` on validation, top-1 on 2% of train, on the held-out 1% of train
  (minival), on ImageNet-v2 and on ReaL (validation relabelled: prec@1 against its labels). The
  papers quote validation, ReaL and v2; v2 and ReaL are skipped with a line where they are not
  prepared (they download: python -m vit_jax.prepare fetches them with the config's dataset).
  `train` and `minival` read the run's dataset: imagenet2012, or its webdataset shards
  (docs/imagenet.md)."""
  c.eval_every = 2_500
  for name, dataset, split, optional in (
      ("train", None, "train[:2%]", False),
      ("minival", None, "train[99%:]", False),
      ("v2", "imagenet_v2", "test", True),
      ("real", "imagenet2012_real", "validation", True),
  ):
    elsewhere = {"dataset": dataset} if dataset else {}  # None: the run's
    c.evals[name] = evaluators.entry(
        c, "classification", split=split, optional=optional, **elsewhere
    )


def _imagenet_plain(c):
  """big_vision configs/vit_s16_i1k.py: the plain ViT-S/16 baseline, 90 epochs."""
  _imagenet_common(c)
  _imagenet1k_evals(c)
  # rep_size=True in big_vision: a pre-logits layer as wide as the model.
  preset, _ = vit_model.parse_variant(c.model.variant)
  c.model.update(classifier="gap", posemb="sincos2d", representation_size=preset.width)
  c.augment.update(randaugment_layers=2, randaugment_magnitude=10, mixup_alpha=0.2)
  c.batch_size = 1024
  c.target_topology = I1K_TOPOLOGY.get(c.model.variant)
  c.total_steps = 90 * IMAGENET_TRAIN_EXAMPLES // c.batch_size  # 90 epochs of train[:99%]


def _imagenet_augreg(c):
  """big_vision configs/vit_i1k.py: AugReg, 300 epochs, sigmoid loss."""
  _imagenet_common(c)
  _imagenet1k_evals(c)
  preset, _ = vit_model.parse_variant(c.model.variant)
  c.loss = "sigmoid_xent"
  # classifier="token": as vit_i1k.py's pool_type="tok", but the position table keeps a slot for
  # the cls token (the original ViT's layout); big_vision prepends the cls token after adding
  # positions. Both are learned, so the first token is the same function (cls + its slot).
  c.model.update(
      classifier="token", posemb="learn", representation_size=preset.width, head_bias_init=-6.9
  )
  layers, magnitude, mixup = AUGREG_I1K_AUGMENT.get(c.model.variant, (2, 15, 0.5))
  c.augment.update(randaugment_layers=layers, randaugment_magnitude=magnitude, mixup_alpha=mixup)
  c.batch_size = 4096
  c.target_topology = BATCH_4096_TOPOLOGY.get(c.model.variant)
  c.total_steps = 300 * IMAGENET_TRAIN_EXAMPLES // c.batch_size  # 300 epochs of train[:99%]


# ImageNet-1k from scratch, by the `recipe` argument.
I1K_RECIPES = {"plain": _imagenet_plain, "augreg": _imagenet_augreg}


def _imagenet21k_data(c):
  """big_vision configs/vit_i21k.py's data: the first 51,200 images are held out (25,600 test,
  25,600 validation). Every evaluator logs prec@1, the top-1 class among all of an image's labels,
  which is what big_vision reports for this multi-label data (evaluators/classification.py:47-51).
  """
  _imagenet_common(c)
  c.train_split, c.eval_split = "full[51200:]", "full[:25600]"  # eval: vit_i21k.py:125 "test"
  c.evals.val = evaluators.entry(c, "classification", split="full[25600:51200]")  # line 126
  c.evals.train = evaluators.entry(c, "classification", split="full[51200:76800]")  # line 127
  c.num_classes = I21K_CLASSES
  c.loss = "sigmoid_xent"


def _imagenet21k(c):
  """big_vision configs/vit_i21k.py: AugReg ImageNet-21k pretraining, 300 epochs, sigmoid loss."""
  _imagenet21k_data(c)
  c.model.update(classifier="gap", posemb="learn", head_bias_init=-10.0)
  layers, magnitude, mixup = AUGREG_I21K_AUGMENT.get(c.model.variant, (2, 15, 0.5))
  c.augment.update(randaugment_layers=layers, randaugment_magnitude=magnitude, mixup_alpha=mixup)
  c.batch_size = 4096
  c.target_topology = BATCH_4096_TOPOLOGY.get(c.model.variant)
  c.total_steps = 300 * I21K_TRAIN // c.batch_size
  c.eval_every = 10_000
  c.checkpoint_every = 5_000


# big_vision configs/proj/scaling_laws/train_vit_g.py (referred to by line below): ViT-g/14, and
# ViT-G/14 by changing only the variant (its lines 18-19). The slice per variant where the step
# at the published batch of 16,384 compiles and fits (docs/pod.md, "Before you spend pod hours"):
# 256 v5p chips, 64 images each: the chip count of the 512 TPUv3 cores (32 images each, line 43)
# the batch was sized for.
SCALING_TOPOLOGY = {"g/14": "v5p-512", "G/14": "v5p-512"}


def _imagenet21k_scaling(c):
  """Zhai et al. 2022's ViT-g/14 and ViT-G/14 pretraining (train_vit_g.py) on ImageNet-21k in
  place of JFT-3B (line 37; not public; line 22 suggests ImageNet-21k to test with): its classes,
  held-out splits and evaluators are the ImageNet-21k recipe's, not JFT's 29,593 classes (line 40)
  and few-shot probes (lines 84-85)."""
  _imagenet21k_data(c)
  c.model.update(classifier="map", posemb="learn", head_bias_init=-10.0)  # lines 67, 41
  # Lines 49-50: Inception crop and flip; eval 256 -> central 224 (eval_view "crop").
  c.augment.update(randaugment_layers=0, mixup_alpha=0.0)
  c.batch_size = 16_384  # line 44
  c.optimizer.update(
      name="adafactor",  # line 70: big_vision optax.py scale_by_adafactor with its defaults
      momentum=0.9,  # optax.py:191
      mu_dtype="bfloat16",  # optax.py:191 dtype_momentum
      grad_clip_norm=1.0,  # line 71
      lr=8e-4,  # line 72
      # Line 73, 0.03 x 8e-4, times the schedule's factor only (big_vision's decay is decoupled,
      # optax.py:132-148); lines 74-77: 100x on the head's kernel, 1x on every other kernel.
      weight_decay=0.03 * 8e-4,
      decoupled_weight_decay=True,
      head_weight_decay_mult=100.0,
      # Lines 78-80.
      schedule="rsqrt",
      rsqrt_timescale=10_000,
      warmup_steps=10_000,
      cooldown_steps=50_000,
      cooldown_shape="linear",
  )
  c.total_steps = 1_000_000  # line 81
  c.target_topology = SCALING_TOPOLOGY.get(c.model.variant)
  c.log_every = 50  # line 53
  c.eval_every = 1_000  # line 54
  c.checkpoint_every = 1_000  # line 57


# ImageNet-21k from scratch, by the `recipe` argument.
I21K_RECIPES = {"augreg": _imagenet21k, "scaling": _imagenet21k_scaling}
RECIPES = {"imagenet2012": I1K_RECIPES, "imagenet21k": I21K_RECIPES}


def _finetune(c):
  """ViT paper fine-tuning (vision_transformer configs/common.py, train.py): SGD momentum 0.9
  with a bfloat16 accumulator, no weight decay, clip 1, cosine, 384 px, a 50k shuffle buffer,
  eval on the whole image resized (input_pipeline.py). ImageNet and CIFAR train on the first 99%
  and 98% of their training split; the rest is a minival, evaluated once, at the end."""
  if c.dataset in FINETUNE_TRAIN_SPLIT:
    percent = FINETUNE_TRAIN_SPLIT[c.dataset]
    c.train_split = f"train[:{percent}%]"
    c.evals.minival = evaluators.entry(
        c, "classification", split=f"train[{percent}%:]", every=defaults.follows(c, "total_steps")
    )
  c.shuffle_buffer = 50_000  # common.py:52
  c.image_size = 384
  c.eval_view = "resize"
  c.augment.update(inception_crop=True, flip=True)
  c.model.dropout_rate = FINETUNE_DROPOUT.get(c.model.variant.split("/")[0], 0.0)
  c.batch_size = 512
  c.total_steps = FINETUNE_STEPS.get(c.dataset, FINETUNE_DEFAULT_STEPS)
  c.optimizer.update(
      name="sgd",
      lr=0.03,
      momentum=0.9,
      weight_decay=0.0,
      grad_clip_norm=1.0,
      warmup_steps=500,
      schedule="cosine",
      mu_dtype="bfloat16",  # vision_transformer train.py:143, accumulator_dtype
  )
  c.eval_every = 1_000
  c.checkpoint_every = 1_000


def _runlocal(c):
  """A few steps at the real image size with a small model: checks the wiring, not accuracy."""
  c.model.update(depth=2)
  defaults.shrink_for_runlocal(c)
