"""Every paper recipe, resolved as `vit_jax.main` resolves it, against the reference's values.

Each expected value names where it comes from: a peer's file and line (big_vision,
vision_transformer, google-research/bert, openai/gpt-2, karpathy/nanoGPT) or a paper's section.
Keys are config keys, or, for what the model code fixes rather than the config, `built.ATTR`
(an attribute of the module the model table builds from the resolved config) and `init.GROUP` (the
standard deviation of a group of parameters of the built model, initialized narrow: see
`init_stds`). Where a config departs from its reference on purpose, DIFFERENCES says so and why;
those keys are checked to hold our value, so the list stays true.
"""

import functools
import json
import math
import os

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from vit_jax import errors
from vit_jax import models
from vit_jax.models import resnet
from vit_jax.sweep import checks as sweep_checks
from vit_jax.sweep import spec

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BV = "big_vision/configs/"
VT = "vision_transformer/vit_jax/"


def config_module(name: str):
  return helpers.repo_file(f"configs/{name}.py")


def resolve(config: str):
  """The config main trains with for `--config=configs/...` (config_flags, then the checks)."""
  return sweep_checks.run_config(spec.Run("recipe", config, ()))


def epochs(config, train_images: int) -> float:
  return config.total_steps * config.batch_size / train_images


# ---- ImageNet-1k from scratch ------------------------------------------------------------------
def imagenet_common(ref: str, lines: dict) -> dict:
  """What big_vision's i1k ViT configs share; `lines` gives each key's line in `ref`."""
  return {
      "train_split": ("train[:99%]", f"{ref}:{lines['split']}"),
      "eval_split": ("validation", f"{ref} evals.val"),
      "augment.inception_crop": (True, f"{ref}:{lines['pp']} decode_jpeg_and_inception_crop"),
      "augment.flip": (True, f"{ref}:{lines['pp']} flip_lr"),
      "optimizer.name": ("adamw", f"{ref}:{lines['optax']} scale_by_adam"),
      "optimizer.b1": (0.9, "optax.scale_by_adam default"),
      "optimizer.b2": (0.999, "optax.scale_by_adam default"),
      "optimizer.mu_dtype": ("bfloat16", f"{ref}:{lines['optax'] + 1}"),
      "optimizer.lr": (1e-3, f"{ref}:{lines['lr']}"),
      "optimizer.weight_decay": (1e-4, f"{ref}:{lines['lr'] + 1}"),
      "optimizer.decoupled_weight_decay": (True, "big_vision/optax.py:130-136, decoupled only"),
      "optimizer.warmup_steps": (10_000, f"{ref}:{lines['lr'] + 2}"),
      "optimizer.schedule": ("cosine", f"{ref}:{lines['lr'] + 2}"),
      "optimizer.grad_clip_norm": (1.0, f"{ref}:{lines['clip']}"),
      "image_size": (224, f"{ref}:{lines['pp']} inception_crop(224)"),
      "eval_view": ("crop", f"{ref}:{lines['eval']} resize_small(256)|central_crop(224)"),
      "shuffle_buffer": (250_000, f"{ref}:{lines['shuffle']}"),
      "built.activation": ("gelu_tanh", "big_vision/models/vit.py:75 nn.gelu (approximate=True)"),
  }


def imagenet1k_evals(ref: str, log_line: int, first_line: int) -> dict:
  """big_vision's i1k evaluators: `log_line` has their log_steps, `first_line` the first one."""
  return {
      "eval_every": (2_500, f"{ref}:{log_line} log_steps"),
      "evals.train.split": ("train[:2%]", f"{ref}:{first_line}"),
      "evals.minival.split": ("train[99%:]", f"{ref}:{first_line + 1}"),
      "evals.v2.dataset": ("imagenet_v2", f"{ref}:{first_line + 3}"),
      "evals.v2.split": ("test", f"{ref}:{first_line + 3}"),
      "evals.v2.optional": (True, "skipped with a line where not prepared (downloaded)"),
      "evals.real.dataset": ("imagenet2012_real", f"{ref}:{first_line + 4}"),
      "evals.real.split": ("validation", f"{ref}:{first_line + 4}"),
      "evals.real.optional": (True, "skipped with a line where not prepared (downloaded)"),
  }


S16 = BV + "vit_s16_i1k.py"
VIT_S16_I1K = {
    **imagenet_common(S16, dict(split=45, pp=57, optax=79, lr=82, clip=78, eval=60, shuffle=49)),
    **imagenet1k_evals(S16, log_line=95, first_line=98),
    "epochs": (90, f"{S16}:38"),
    "batch_size": (1024, f"{S16}:47"),
    "loss": ("softmax_xent", f"{S16}:40"),
    "model.variant": ("S/16", f"{S16}:71"),
    "model.representation_size": (384, f"{S16}:72 rep_size=True: the width"),
    "model.classifier": ("gap", f"{S16}:73"),
    "model.posemb": ("sincos2d", f"{S16}:74"),
    "model.dropout_rate": (0.0, "big_vision/models/vit.py:197 default"),
    "model.head_bias_init": (0.0, "big_vision/models/vit.py:271 (no init_head_bias)"),
    "augment.randaugment_layers": (2, f"{S16}:57 randaug(2,10)"),
    "augment.randaugment_magnitude": (10, f"{S16}:57 randaug(2,10)"),
    "augment.mixup_alpha": (0.2, f"{S16}:86"),
}

I1K = BV + "vit_i1k.py"


def augreg_i1k(variant: str, width: int) -> dict:
  return {
      **imagenet_common(
          I1K, dict(split=89, pp=101, optax=129, lr=139, clip=128, eval=105, shuffle=93)
      ),
      **imagenet1k_evals(I1K, log_line=152, first_line=156),
      "epochs": (300, f"{I1K}:69"),
      "batch_size": (4096, f"{I1K}:91"),
      "loss": ("sigmoid_xent", f"{I1K}:71"),
      "model.head_bias_init": (-6.9, f"{I1K}:72"),
      "model.variant": (variant, f"{I1K}:122"),
      "model.representation_size": (width, f"{I1K}:123 rep_size=True: the width"),
      "model.classifier": ("token", f"{I1K}:124 pool_type='tok'"),
      "model.posemb": ("learn", "big_vision/models/vit.py:195 default"),
      "model.posemb_init_std": (None, "None: 1/sqrt(width), big_vision/models/vit.py:49"),
      "model.dropout_rate": (0.0, f"{I1K}:18 'does NOT include regularization'"),
      # S/16, B/16 and L/16 take "medium2" (lines 80-83): randaug(2,15) (line 57), mixup 0.5 (47).
      "augment.randaugment_layers": (2, f"{I1K}:57"),
      "augment.randaugment_magnitude": (15, f"{I1K}:57"),
      "augment.mixup_alpha": (0.5, f"{I1K}:47"),
  }


I21K = BV + "vit_i21k.py"
# (RandAugment layers, magnitude, mixup) of each variant's setting, lines 65-72 -> 30-48.
I21K_AUGMENT = {
    "S/16": ((2, 0, 0.0), "light1, lines 42, 32"),
    "B/16": ((2, 10, 0.2), "light2, lines 43, 33"),
    "L/16": ((2, 15, 0.5), "medium2, lines 45, 35"),
}


def augreg_i21k(variant: str) -> dict:
  (layers, magnitude, mixup), lines = I21K_AUGMENT[variant]
  return {
      **imagenet_common(
          I21K, dict(split=77, pp=85, optax=105, lr=109, clip=107, eval=86, shuffle=80)
      ),
      "train_split": ("full[51200:]", f"{I21K}:77"),
      "eval_split": ("full[:25600]", f"{I21K}:125"),
      "evals.val.split": ("full[25600:51200]", f"{I21K}:126"),
      "evals.train.split": ("full[51200:76800]", f"{I21K}:127"),
      "epochs": (300, f"{I21K}:57"),
      "num_classes": (21843, f"{I21K}:58"),
      "model.head_bias_init": (-10.0, f"{I21K}:59"),
      "loss": ("sigmoid_xent", f"{I21K}:60"),
      "batch_size": (4096, f"{I21K}:79"),
      "model.variant": (variant, f"{I21K}:102"),
      "model.classifier": ("gap", f"{I21K}:102"),
      "model.posemb": ("learn", f"{I21K}:102"),
      "model.representation_size": (None, f"{I21K}:102 (no rep_size)"),
      "model.dropout_rate": (0.0, f"{I21K}:22-23"),
      "augment.randaugment_layers": (layers, f"{I21K}: {lines}"),
      "augment.randaugment_magnitude": (magnitude, f"{I21K}: {lines}"),
      "augment.mixup_alpha": (mixup, f"{I21K}: {lines}"),
  }


# ---- ViT-g/14 and ViT-G/14 (Zhai et al. 2022) --------------------------------------------------
SCALING = BV + "proj/scaling_laws/train_vit_g.py"
BV_OPTAX = "big_vision/optax.py"


def scaling(variant: str, variant_line: str) -> dict:
  return {
      "batch_size": (16_384, f"{SCALING}:44"),
      "total_steps": (1_000_000, f"{SCALING}:81"),
      "loss": ("sigmoid_xent", "big_vision/train.py:299 default"),
      "image_size": (224, f"{SCALING}:49 inception_crop(224)"),
      "augment.inception_crop": (True, f"{SCALING}:49"),
      "augment.flip": (True, f"{SCALING}:49 flip_lr"),
      "augment.randaugment_layers": (0, f"{SCALING}:49 (no randaug)"),
      "augment.mixup_alpha": (0.0, f"{SCALING}:49 (no mixup)"),
      "eval_view": ("crop", f"{SCALING}:50 resize_small(256)|central_crop(224)"),
      "shuffle_buffer": (250_000, f"{SCALING}:51"),
      "log_every": (50, f"{SCALING}:53"),
      "eval_every": (1_000, f"{SCALING}:54"),
      "checkpoint_every": (1_000, f"{SCALING}:57"),
      "model.variant": (variant, f"{SCALING}:{variant_line}"),
      "model.classifier": ("map", f"{SCALING}:67 pool_type='map'"),
      "model.posemb": ("learn", "big_vision/models/vit.py:195 default"),
      "model.representation_size": (None, "big_vision/models/vit.py:196 rep_size=False"),
      "model.dropout_rate": (0.0, "big_vision/models/vit.py:197 default"),
      "model.head_bias_init": (-10.0, f"{SCALING}:41"),
      "built.activation": ("gelu_tanh", "big_vision/models/vit.py:75 nn.gelu (approximate=True)"),
      "optimizer.name": ("adafactor", f"{SCALING}:70 big_vision.scale_by_adafactor"),
      "optimizer.momentum": (0.9, f"{BV_OPTAX}:191"),
      "optimizer.mu_dtype": ("bfloat16", f"{BV_OPTAX}:191 dtype_momentum"),
      "optimizer.grad_clip_norm": (1.0, f"{SCALING}:71"),
      "optimizer.lr": (8e-4, f"{SCALING}:72"),
      "optimizer.weight_decay": (0.03 * 8e-4, f"{SCALING}:73"),
      "optimizer.decoupled_weight_decay": (True, f"{BV_OPTAX}:132-148, decoupled only"),
      "optimizer.head_weight_decay_mult": (100.0, f"{SCALING}:75"),
      "optimizer.schedule": ("rsqrt", f"{SCALING}:79"),
      "optimizer.rsqrt_timescale": (10_000, f"{SCALING}:79"),
      "optimizer.warmup_steps": (10_000, f"{SCALING}:79"),
      "optimizer.cooldown_steps": (50_000, f"{SCALING}:80"),
      "optimizer.cooldown_shape": ("linear", "big_vision/utils.py:1138-1139"),
  }


# ---- Fine-tuning (ViT paper) -------------------------------------------------------------------
COMMON = VT + "configs/common.py"
FINETUNE_STEPS = {
    "imagenet2012": (20_000, f"{COMMON}:101"),
    "cifar10": (10_000, f"{COMMON}:87"),
    "cifar100": (10_000, f"{COMMON}:94"),
    "oxford_iiit_pet": (500, "ViT paper (Dosovitskiy et al. 2021), Table 4"),
    "oxford_flowers102": (500, "ViT paper, Table 4"),
}


# common.py DATASET_PRESETS: the training split, the rest a minival (None: no preset, all of it).
FINETUNE_TRAIN_PERCENT = {"imagenet2012": (99, 103), "cifar10": (98, 89), "cifar100": (98, 96)}


def finetune(dataset: str, variant: str) -> dict:
  dropout = 0.1 if variant.startswith(("L/", "H/")) else 0.0
  percent, line = FINETUNE_TRAIN_PERCENT.get(dataset, (None, None))
  if percent:
    split = {
        "train_split": (f"train[:{percent}%]", f"{COMMON}:{line}"),
        "evals.minival.split": (f"train[{percent}%:]", f"{COMMON}:84 'leave out a subset'"),
    }
  else:
    split = {"train_split": ("train", f"{COMMON}: no preset for {dataset}, the whole split")}
  return {
      **split,
      "total_steps": FINETUNE_STEPS[dataset],
      "batch_size": (512, f"{COMMON}:48"),
      "image_size": (384, f"{COMMON}:91 crop"),
      "eval_view": ("resize", f"{VT}input_pipeline.py:213 tf.image.resize to 384x384"),
      "optimizer.name": ("sgd", f"{VT}train.py:140"),
      "optimizer.momentum": (0.9, f"{VT}train.py:142"),
      "optimizer.mu_dtype": ("bfloat16", f"{VT}train.py:143 accumulator_dtype"),
      "shuffle_buffer": (50_000, f"{COMMON}:52"),
      "built.activation": ("gelu_tanh", f"{VT}models_vit.py:90 nn.gelu (approximate=True)"),
      "optimizer.lr": (0.03, f"{COMMON}:64"),
      "optimizer.schedule": ("cosine", f"{COMMON}:66"),
      "optimizer.warmup_steps": (500, f"{COMMON}:68"),
      "optimizer.grad_clip_norm": (1.0, f"{COMMON}:41"),
      "optimizer.weight_decay": (0.0, "ViT paper, Table 4 caption: no weight decay"),
      "augment.inception_crop": (True, f"{VT}input_pipeline.py:199"),
      "augment.flip": (True, f"{VT}input_pipeline.py:210"),
      "model.dropout_rate": (dropout, f"{VT}configs/models.py:124 (B/16), 142 (L/16), 160 (H/14)"),
  }


# ---- BiT ResNet-50x1 ---------------------------------------------------------------------------
BIT = BV + "bit_i1k.py"
BIT_I1K = {
    "epochs": (90, f"{BIT}:35"),
    "loss": ("softmax_xent", f"{BIT}:37"),
    "train_split": ("train[:99%]", f"{BIT}:42"),
    "batch_size": (4096, f"{BIT}:44"),
    "shuffle_buffer": (250_000, f"{BIT}:46"),
    "augment.inception_crop": (True, f"{BIT}:50"),
    "augment.flip": (True, f"{BIT}:50"),
    "augment.randaugment_layers": (0, f"{BIT}:50 (no randaug)"),
    "augment.mixup_alpha": (0.0, f"{BIT} (no mixup)"),
    "model.name": ("resnet", f"{BIT}:57"),
    "model.variant": ("50x1", f"{BIT}:59-60"),
    "optimizer.name": ("sgd", f"{BIT}:64 momentum_hp"),
    "optimizer.momentum": (0.9, "big_vision/optax.py:220 momentum_hp"),
    "optimizer.mu_dtype": ("bfloat16", "big_vision/optax.py:220 momentum_hp"),
    "optimizer.grad_clip_norm": (1.0, f"{BIT}:65"),
    "optimizer.weight_decay": (1e-4 * 4096 / 256, f"{BIT}:68"),
    "optimizer.decoupled_weight_decay": (True, "big_vision/optax.py:130-136"),
    "optimizer.lr": (0.1 * 4096 / 256, f"{BIT}:69"),
    "optimizer.schedule": ("cosine", f"{BIT}:70"),
    "optimizer.warmup_steps": (1_000, f"{BIT}:70"),
    "eval_view": ("crop", f"{BIT}:51 resize_small(256)|central_crop(224)"),
}

# ---- BERT-base ---------------------------------------------------------------------------------
OPT, MODELING = "bert/optimization.py", "bert/modeling.py"


def bert_base(phase: int) -> dict:
  common = {
      "batch_size": (256, "BERT paper appendix A.2"),
      "model.variant": ("base", "BERT paper section 3"),
      "model.max_len": (512, f"{MODELING}:43"),
      "model.dropout_rate": (0.1, f"{MODELING}:41"),
      "model.attention_dropout_rate": (0.1, f"{MODELING}:42"),
      "model.kernel_init": ("truncated_normal", f"{MODELING}:375 create_initializer (0.02)"),
      "built.bert.init_std": (0.02, f"{MODELING}:375 initializer_range"),
      # The layer output is dropped (line 879), the intermediate activation is not (line 870).
      "built.bert.mlp_hidden_dropout": (False, f"{MODELING}:862-879"),
      "built.bert.activation": ("gelu_tanh", f"{MODELING}:264-277 gelu, tanh form"),
      "optimizer.bias_correction": (False, f"{OPT}:131-137 m / (sqrt(v) + eps), raw moments"),
      "optimizer.b1": (0.9, f"{OPT}:62"),
      "optimizer.b2": (0.999, f"{OPT}:63"),
      "optimizer.eps": (1e-6, f"{OPT}:64"),
      "optimizer.weight_decay": (0.01, f"{OPT}:61"),
      "optimizer.decoupled_weight_decay": (False, f"{OPT} AdamWeightDecay: wd x lr"),
      "optimizer.grad_clip_norm": (1.0, f"{OPT}:74"),
      "optimizer.schedule": ("linear", f"{OPT}:32-38 polynomial_decay, power 1"),
      "masking.rate": (0.15, "BERT paper section 3.1"),
  }
  # Paper A.2: 1M steps, lr 1e-4, 10k warmup, linear decay; 128 tokens for 90% of the steps.
  if phase == 1:
    return {
        **common,
        "seq_len": (128, "BERT paper A.2, 90% of the steps"),
        "total_steps": (900_000, "BERT paper A.2: 90% of 1M"),
        "optimizer.lr": (1e-4, "BERT paper A.2"),
        "optimizer.warmup_steps": (10_000, "BERT paper A.2; bert/run_pretraining.py:72"),
        "optimizer.end_lr_ratio": (0.1, "the 1M-step line at 900k steps: 1e-4 x 0.1"),
    }
  return {
      **common,
      "seq_len": (512, "BERT paper A.2, the last 10% of the steps"),
      "total_steps": (100_000, "BERT paper A.2: 10% of 1M"),
      "optimizer.lr": (1e-5, "the 1M-step line at step 900k"),
      "optimizer.warmup_steps": (0, "the line continues: no second warmup"),
      "optimizer.end_lr_ratio": (0.0, f"{OPT}:36 end_learning_rate=0.0"),
  }


# ---- GPT-2 124M --------------------------------------------------------------------------------
NANO = "nanoGPT/train.py"
GPT2 = {
    "seq_len": (1024, "GPT-2 paper section 2.3; gpt-2/src/model.py:8 n_ctx"),
    "model.max_len": (1024, "gpt-2/src/model.py:8 n_ctx"),
    "batch_size": (512, "GPT-2 paper section 2.3"),
    "model.variant": ("gpt2", "GPT-2 paper Table 2, 117M (124M with the tied embedding)"),
    "model.posemb": ("learn", "gpt-2/src/model.py:152 wpe"),
    "model.dropout_rate": (0.0, f"{NANO}:55"),
    "built.activation": ("gelu_tanh", "gpt-2/src/model.py:25-26 gelu, tanh form"),
    "built.mlp_hidden_dropout": (False, "gpt-2/src/model.py:115-120 (no dropout in its MLP)"),
    "built.kernel_init": ("normal", "gpt-2/src/model.py:53 random_normal_initializer"),
    "init.token_embedding": (0.02, "gpt-2/src/model.py:155 wte stddev 0.02"),
    "init.position_embedding": (0.01, "gpt-2/src/model.py:153 wpe stddev 0.01"),
    "init.input_projections": (0.02, "gpt-2/src/model.py:53 conv1d w_init_stdev=0.02"),
    "init.residual_projections": (
        0.02 / math.sqrt(2 * 12),
        "GPT-2 paper 2.3 (1/sqrt(N) at init); nanoGPT/model.py:144-145 0.02/sqrt(2 x n_layer)",
    ),
    "init.biases": (0.0, "gpt-2/src/model.py:54 constant_initializer(0)"),
    "optimizer.lr": (6e-4, f"{NANO}:58"),
    "optimizer.weight_decay": (0.1, f"{NANO}:60"),
    "optimizer.b1": (0.9, f"{NANO}:61"),
    "optimizer.b2": (0.95, f"{NANO}:62"),
    "optimizer.grad_clip_norm": (1.0, f"{NANO}:63"),
    "optimizer.warmup_steps": (2_000, f"{NANO}:66"),
    "optimizer.end_lr_ratio": (0.1, f"{NANO}:68 min_lr 6e-5"),
    "optimizer.schedule": ("cosine", f"{NANO} get_lr"),
    "total_steps": (600_000, "nanoGPT/config/train_gpt2.py:16"),
}


# ---- Today's decoders: SmolLM2, Qwen2.5, Llama 3 -------------------------------------------------
SMOL = "smollm/text/pretraining/smollm2/config_smollm2_{}.yaml"  # the runs' own nanotron configs


def smollm2(size: str, batch: int, steps: int, decay: int, std: float, depth: int) -> dict:
  ref = SMOL.format(size)
  return {
      "seq_len": (2048, f"{ref}:97 sequence_length"),
      "batch_size": (batch, f"{ref}:96 micro_batch_size x :78 dp (:93 no accumulation)"),
      "total_steps": (steps, f"{ref}:98 train_steps"),
      "model.rope_base": (10_000.0, f"{ref}:54 rope_theta"),
      "optimizer.name": ("adamw", f"{ref}:73"),
      "optimizer.lr": (3e-3, f"{ref}:62"),
      "optimizer.b1": (0.9, f"{ref}:70"),
      "optimizer.b2": (0.95, f"{ref}:71"),
      "optimizer.eps": (1e-8, f"{ref}:72"),
      "optimizer.weight_decay": (0.01, f"{ref}:75"),
      "optimizer.decoupled_weight_decay": (False, "nanotron: torch.optim.AdamW, decay x lr"),
      "optimizer.grad_clip_norm": (1.0, f"{ref}:60"),
      "optimizer.warmup_steps": (2_000, f"{ref}:66"),
      "optimizer.schedule": ("wsd", f"{ref}:63-65 constant, then linear decay"),
      # Starting at total_steps - cooldown_steps, lr_decay_starting_step (line 63).
      "optimizer.cooldown_steps": (decay, f"{ref}:64 lr_decay_steps"),
      "optimizer.cooldown_shape": ("linear", f"{ref}:65 lr_decay_style"),
      "init.input_projections": (std, f"{ref}:35 init_method std"),
      "init.residual_projections": (
          std / math.sqrt(2 * depth),
          "nanotron scaling/parametrization.py _parametrize_row_linear: std / sqrt(2 x layers)",
      ),
  }


QWEN25 = "Qwen2.5 report (arXiv 2412.15115)"
QWEN = "Qwen report (arXiv 2309.16609)"
LLAMA1 = "LLaMA paper (arXiv 2302.13971) 2.3"
QWEN25_0_5B = {
    "seq_len": (4096, f"{QWEN25} 3.3, the initial phase"),
    "model.rope_base": (10_000.0, f"{QWEN25} 3.3: 1,000,000 only for the final stage"),
    "batch_size": (1024, f"{QWEN} Table 1: 4M tokens"),
    "total_steps": (4_291_534, f"{QWEN25} 3.1: 18T tokens, at 4M a step"),
    "model.biases": ("qkv", "Qwen/Qwen2.5-0.5B is a Qwen2ForCausalLM"),
    "optimizer.lr": (3e-4, f"{QWEN} Table 1"),
    "optimizer.b1": (0.9, f"{QWEN} 2.4"),
    "optimizer.b2": (0.95, f"{QWEN} 2.4"),
    "optimizer.eps": (1e-8, f"{QWEN} 2.4"),
    "optimizer.schedule": ("cosine", f"{QWEN} 2.4"),
    "optimizer.end_lr_ratio": (0.1, f"{QWEN} 2.4: a minimum of 10% of the peak"),
    "optimizer.weight_decay": (0.1, f"{LLAMA1} (no Qwen report gives it)"),
    "optimizer.grad_clip_norm": (1.0, f"{LLAMA1} (no Qwen report gives it)"),
    "optimizer.warmup_steps": (2_000, f"{LLAMA1} (no Qwen report gives it)"),
    "init.input_projections": (0.02, "Qwen/Qwen2.5-0.5B config.json initializer_range"),
    "init.residual_projections": (0.02, "transformers Qwen2 _init_weights: every Linear alike"),
    "init.biases": (0.0, "transformers Qwen2 _init_weights: biases zero"),
}

LLAMA3 = "Llama 3 paper (arXiv 2407.21783)"
LLAMA2 = "Llama 2 paper (arXiv 2307.09288) 2.2"


def llama3(steps: int, tokens: str, repo: str) -> dict:
  return {
      "seq_len": (8192, f"{LLAMA3} 3.4.1"),
      "batch_size": (2048, f"{LLAMA3} 3.4.1: 16M tokens after 2.87T"),
      "total_steps": (steps, f"{tokens} tokens at 16M a step"),
      "model.rope_base": (500_000.0, f"{LLAMA3} Table 3"),
      "model.rope_scaling": ("none", f"{LLAMA3} Table 3: RoPE, unscaled at 8,192 tokens"),
      "optimizer.name": ("adamw", f"{LLAMA3} 3.4.1"),
      "optimizer.lr": (3e-4, f"{LLAMA3} Table 3, 8B"),
      "optimizer.warmup_steps": (8_000, f"{LLAMA3} 3.4.1"),
      "optimizer.schedule": ("cosine", f"{LLAMA3} 3.4.1"),
      "optimizer.end_lr_ratio": (0.01, f"{LLAMA3} 3.4.1: 8e-5 to 8e-7"),
      "optimizer.b1": (0.9, LLAMA2),
      "optimizer.b2": (0.95, LLAMA2),
      "optimizer.eps": (1e-5, LLAMA2),
      "optimizer.weight_decay": (0.1, LLAMA2),
      "optimizer.grad_clip_norm": (1.0, LLAMA2),
      "init.input_projections": (0.02, f"{repo} config.json initializer_range"),
      "init.residual_projections": (0.02, "transformers Llama _init_weights: every Linear alike"),
  }


# ---- Transformer base (encoder-decoder) -------------------------------------------------------
AIAYN = "Vaswani et al. 2017"
TRANSFORMER_BASE = {
    "model.width": (512, f"{AIAYN} Table 3 base: d_model"),
    "model.num_layers": (6, f"{AIAYN} Table 3 base: N"),
    "model.num_decoder_layers": (None, f"{AIAYN} Table 3 base: N, the encoder's"),
    "model.num_heads": (8, f"{AIAYN} Table 3 base: h"),
    "model.mlp_dim": (2048, f"{AIAYN} Table 3 base: d_ff"),
    "model.dropout_rate": (0.1, f"{AIAYN} section 5.4, Table 3 base: P_drop"),
    "model.pre_ln": (False, f"{AIAYN} section 3.1: LayerNorm(x + Sublayer(x))"),
    "model.posemb": ("sincos1d", f"{AIAYN} section 3.5"),
    "model.activation": ("relu", f"{AIAYN} section 3.3, equation (2)"),
    "label_smoothing": (0.1, f"{AIAYN} section 5.4, Table 3 base: epsilon_ls"),
    "optimizer.b1": (0.9, f"{AIAYN} section 5.3"),
    "optimizer.b2": (0.98, f"{AIAYN} section 5.3"),
    "optimizer.eps": (1e-9, f"{AIAYN} section 5.3"),
    "optimizer.weight_decay": (0.0, f"{AIAYN} section 5.3: Adam"),
    "optimizer.warmup_steps": (4000, f"{AIAYN} section 5.3: warmup_steps = 4000"),
    "optimizer.lr": (512**-0.5 * 4000**-0.5, f"{AIAYN} equation (3) at step = warmup_steps"),
    "optimizer.schedule": ("rsqrt", f"{AIAYN} equation (3): step^-0.5 after warmup"),
    "optimizer.rsqrt_timescale": (4000, f"{AIAYN} equation (3): lr x sqrt(warmup / step)"),
    "total_steps": (100_000, f"{AIAYN} section 5.2: base models, 100,000 steps"),
    "tokenizer.vocab_size": (32_000, "flax examples/wmt/configs/default.py vocab_size"),
    "evals.bleu.beam_size": (4, f"{AIAYN} section 6.1: beam size 4"),
    "evals.bleu.length_penalty": (0.6, f"{AIAYN} section 6.1: length penalty alpha = 0.6"),
}

RECIPES = {
    "vit_s16_i1k": ("configs/vit.py:dataset=imagenet2012,variant=S/16", VIT_S16_I1K),
    "vit_s16_i1k_augreg": (
        "configs/vit.py:dataset=imagenet2012,variant=S/16,recipe=augreg",
        augreg_i1k("S/16", 384),
    ),
    "vit_b16_i1k": ("configs/vit.py:dataset=imagenet2012,variant=B/16", augreg_i1k("B/16", 768)),
    "vit_l16_i1k": ("configs/vit.py:dataset=imagenet2012,variant=L/16", augreg_i1k("L/16", 1024)),
    **{
        f"vit_{v[0].lower()}16_i21k": (
            f"configs/vit.py:dataset=imagenet21k,variant={v}",
            augreg_i21k(v),
        )
        for v in I21K_AUGMENT
    },
    "vit_g14_i21k": ("configs/vit.py:dataset=imagenet21k,variant=g/14", scaling("g/14", "66")),
    "vit_G14_i21k": (
        "configs/vit.py:dataset=imagenet21k,variant=G/14",
        scaling("G/14", "18-19 (g/14 with this one line changed)"),
    ),
    **{
        f"finetune_{d}": (f"configs/vit.py:dataset={d},variant=B/16,finetune", finetune(d, "B/16"))
        for d in FINETUNE_STEPS
    },
    "finetune_imagenet2012_l16": (
        "configs/vit.py:dataset=imagenet2012,variant=L/16,finetune",
        finetune("imagenet2012", "L/16"),
    ),
    "finetune_imagenet2012_h14": (
        "configs/vit.py:dataset=imagenet2012,variant=H/14,finetune",
        finetune("imagenet2012", "H/14"),
    ),
    "bit_r50x1_i1k": ("configs/resnet.py:dataset=imagenet2012", BIT_I1K),
    "bert_base_phase1": ("configs/bert.py:dataset=wikipedia,variant=base,nsp", bert_base(1)),
    "bert_base_phase2": (
        "configs/bert.py:dataset=wikipedia,variant=base,nsp,phase=2",
        bert_base(2),
    ),
    "gpt2_124m": ("configs/gpt.py:dataset=c4,variant=gpt2", GPT2),
    "smollm2_135m": (
        "configs/gpt.py:dataset=c4,variant=smollm2-135m",
        smollm2("135M", 8 * 64, 2_000_000, 400_000, 0.041666666666666664, 30),
    ),
    "smollm2_360m": (
        "configs/gpt.py:dataset=c4,variant=smollm2-360m",
        smollm2("360M", 6 * 128, 2_600_000, 520_000, 0.03227, 32),
    ),
    "qwen2.5_0.5b": ("configs/gpt.py:dataset=c4,variant=qwen2.5-0.5b", QWEN25_0_5B),
    "llama3.2_1b": (
        "configs/gpt.py:dataset=c4,variant=llama3.2-1b",
        llama3(536_442, "Llama 3.2 model card: 9T", "meta-llama/Llama-3.2-1B"),
    ),
    "llama3.1_8b": (
        "configs/gpt.py:dataset=c4,variant=llama3.1-8b",
        llama3(894_070, f"{LLAMA3} 1: about 15T", "meta-llama/Llama-3.1-8B"),
    ),
    "transformer_base": (
        "configs/seq2seq.py:dataset=wmt14_translate/de-en,variant=base",
        TRANSFORMER_BASE,
    ),
}
# The decoders' tokenizers: byte-level BPEs (SmolLM2's cosmo2, Qwen's, Llama 3's tiktoken-based).
DECODER_TOKENIZERS = ("smollm2_135m", "smollm2_360m", "qwen2.5_0.5b", "llama3.2_1b", "llama3.1_8b")

# Deliberate differences: (recipe, what) -> (ours, the reference's, why). Those naming a config
# key are checked to hold our value.
DIFFERENCES = {
    ("bit_r50x1_i1k", "model.zero_init_last_norm"): (
        None,
        True,
        "big_vision/models/bit.py:67 zero-inits gn3 of its ResNet-v1 unit (norm before the sum); "
        "ours is BiT's ResNet-v2 (pre-activation, the released checkpoints' layout) whose unit "
        "ends in a weight-standardized conv: a zero GroupNorm scale before ReLU gets no gradient, "
        "and a zero standardized kernel divides by sqrt(eps). Units start as initialized.",
    ),
    ("bert_base_phase2", "optimizer state"): (
        "fresh",
        "fresh",
        "phase 2 starts from phase 1's parameters with new Adam moments, as BERT's own two-run "
        "recipe does (optimization.py:57-58: 'the Adam m/v variables are NOT loaded')",
    ),
    ("bert_base_phase1", "tokenizer.kind"): (
        "char",
        "wordpiece",
        "no WordPiece trainer here: the documented command sets spm_unigram with vocab 30522",
    ),
    ("gpt2_124m", "tokenizer.kind"): (
        "char",
        "byte_bpe",
        "the documented command sets byte_bpe with vocab 50257; configs stay offline-buildable",
    ),
    **{
        (name, "tokenizer.kind"): (
            "char",
            "byte_bpe",
            "the documented commands set byte_bpe with the model's vocabulary size; configs stay "
            "offline-buildable",
        )
        for name in DECODER_TOKENIZERS
    },
    **{
        (name, "init.token_embedding"): (
            0.02,
            std,
            "nanotron scaling/parametrization.py _parametrize_embedding: N(0, init_method std); "
            "the GPT model's token embedding is N(0, 0.02) whatever the recipe",
        )
        for name, std in (("smollm2_135m", 0.041666666666666664), ("smollm2_360m", 0.03227))
    },
    ("llama3.1_8b", "batch ramp"): (
        "16M tokens of 8,192 from step 1",
        "4M of 4,096, then 8M of 8,192 after 252M tokens, then 16M after 2.87T",
        f"{LLAMA3} 3.4.1; a config has one batch size and one context",
    ),
    ("llama3.2_1b", "training"): (
        "from scratch, the Llama 3 recipe",
        "pruned from Llama 3.1 8B, then trained on the 8B's and 70B's logits",
        "Llama 3.2's model card, 'Training Data': no recipe of its own is published",
    ),
    ("vit_b16_i1k", "cls token position slot"): (
        True,
        False,
        "big_vision adds the position table to the patches and prepends the cls token after "
        "(models/vit.py); ours keeps the original ViT's layout, a table slot added to the cls "
        "token (both learned, so their sum is one learned first token; vit_npz.py folds it on "
        "export to big_vision's layout, bit for bit)",
    ),
    ("bit_r50x1_i1k", "weight standardization eps"): (
        1e-8,
        1e-5,
        "big_vision/models/bit.py:28-39 divides by std + 1e-5; ours by sqrt(var + 1e-8), the "
        "released BiT checkpoints' form (BiT: 1e-10) with timm's eps, so converted checkpoints "
        "give timm's logits. For a kernel of std s the two differ by about 1e-5 / s relative "
        "(below 0.1% for s > 0.01)",
    ),
    ("vit_g14_i21k", "dataset"): (
        "imagenet21k",
        "jft_3b",
        f"{SCALING}:37: JFT-3B is not public; the docstring (line 22) says one can test the "
        "recipe with ImageNet-21k, which trains here with the AugReg ImageNet-21k recipe's splits",
    ),
    ("vit_g14_i21k", "num_classes"): (21_843, 29_593, f"{SCALING}:40 counts JFT-3B's classes"),
    ("vit_g14_i21k", "evals.val.split"): (
        "full[25600:51200]",
        "few-shot linear probes",
        f"{SCALING}:84-85 evaluates few-shot probes on other datasets every 10k steps; ours "
        "evaluates prec@1 on ImageNet-21k's held-out images as the AugReg recipe does",
    ),
    ("vit_g14_i21k", "keep_checkpoints"): (
        3,
        "every 10,000th step kept",
        f"{SCALING}:58 keep_ckpt_steps keeps every 10,000th checkpoint for good; ours keeps the "
        "last 3",
    ),
    ("vit_g14_i21k", "model.dtype"): (
        "bfloat16",
        "float32",
        "as every ImageNet recipe here (configs/vit.py _imagenet_common): bf16 matmuls with fp32 "
        "parameters, where big_vision computes in fp32 (models/vit.py:61 dtype_mm)",
    ),
    ("bert_base_phase1", "text shuffle"): (
        "a seeded permutation of all rows per epoch",
        "a 100-example buffer",
        "bert/run_pretraining.py:357-369 shuffles its files, then 100 examples, of instances "
        "create_pretraining_data.py shuffled beforehand; ours reads rows of a token store by "
        "index (vit_jax/data/text/order.py), so each epoch is an exact shuffle of every row",
    ),
}


def flat(config, key: str):
  """A config key's value, or for `built.ATTR` / `init.GROUP` keys what the model code fixes."""
  if key.startswith("built."):
    value = models.build_model(config.model)
    for part in key.split(".")[1:]:
      value = getattr(value, part)
    return value
  if key.startswith("init."):
    return init_stds(config)[key[len("init.") :]]
  value = config
  for part in key.split("."):
    value = value[part]
  return value


def init_stds(config) -> dict:
  """Standard deviations of the GPT's initial parameters by group, from the built model made 64
  wide (4 heads, each with its keys and values; an MLP of 4 x 64) with a 1,000-token vocabulary,
  so that initializing it is quick (the depth, which scales the residual projections, stays);
  every group pools at least 12k values (about 1% error). The layers are scanned: one block
  compiles, jitted, whatever the depth; none is recomputed (remat changes no initial value)."""
  return _init_stds(json.dumps(config.model.to_dict(), sort_keys=True))


@functools.cache
def _init_stds(model_json: str) -> dict:
  model = models.build_model(
      json.loads(model_json),
      width=64,
      num_heads=4,
      num_kv_heads=None,
      mlp_dim=None,
      vocab_size=1_000,
      scan_layers=True,
      remat="none",
  )
  params = jax.jit(model.init)(jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32))["params"]
  params = jax.device_get(params)  # one transfer, not one per array
  groups = {}
  for path, value in flax.traverse_util.flatten_dict(params, sep="/").items():
    if path.endswith("bias"):
      group = "biases"
    elif path.startswith(("wte/", "wpe/")):
      group = {"wte": "token_embedding", "wpe": "position_embedding"}[path[:3]]
    elif path.endswith(("out/kernel", "Dense_1/kernel")):
      group = "residual_projections"
    elif path.endswith("kernel"):
      group = "input_projections"
    else:
      continue  # LayerNorm scales
    groups.setdefault(group, []).append(np.ravel(value))
  return {group: float(np.std(np.concatenate(v))) for group, v in groups.items()}


def matches(got, want) -> bool:
  if isinstance(want, float):
    return got == pytest.approx(want, rel=0.03, abs=1e-9)
  return got == want


@pytest.mark.parametrize("name", list(RECIPES))
def test_recipe_matches_its_reference(name):
  path, expected = RECIPES[name]
  config = resolve(path)
  module = config_module(os.path.basename(path.split(":")[0])[: -len(".py")])
  mismatches = []
  for key, (want, source) in expected.items():
    if key == "epochs":
      i21k = config.dataset == "imagenet21k"
      train = module.I21K_TRAIN if i21k else module.IMAGENET_TRAIN_EXAMPLES
      got = round(epochs(config, train))
    else:
      got = flat(config, key)
    if not matches(got, want):
      mismatches.append(f"{key}: {got!r}, reference {want!r} ({source})")
  assert not mismatches, f"{path}:\n" + "\n".join(mismatches)


@pytest.mark.parametrize(
    "recipe, key",
    [k for k in DIFFERENCES if k[1].startswith(("tokenizer.", "init.")) or k[0] == "vit_g14_i21k"],
)
def test_listed_differences_hold(recipe, key):
  ours, reference, _ = DIFFERENCES[(recipe, key)]
  assert not matches(ours, reference)
  assert matches(flat(resolve(RECIPES[recipe][0]), key), ours)


def test_token_pooling_keeps_a_cls_position_slot():
  """The listed difference: with classifier="token" the position table has 1 + 196 slots."""
  config = resolve(RECIPES["vit_b16_i1k"][0])
  model = models.build_model(config.model, num_classes=10)
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, 224, 224, 3)))
  table = shapes["params"]["Transformer"]["posembed_input"]["pos_embedding"]
  assert table.shape == (1, 1 + 14 * 14, 768)
  assert DIFFERENCES[("vit_b16_i1k", "cls token position slot")][0] is True


def test_weight_standardization_eps_is_the_listed_one():
  ours, _, _ = DIFFERENCES[("bit_r50x1_i1k", "weight standardization eps")]
  assert resnet.StdConv.eps == ours
  kernel = np.random.default_rng(0).normal(size=(3, 3, 8, 4)).astype(np.float32)
  var_O = kernel.var(axis=(0, 1, 2), keepdims=True)
  want = (kernel - kernel.mean(axis=(0, 1, 2), keepdims=True)) / np.sqrt(var_O + ours)
  np.testing.assert_allclose(resnet.standardize(kernel, resnet.StdConv.eps), want, rtol=1e-5)


def test_bit_units_have_no_zero_init_option():
  """The listed BiT difference: our ResNet takes no such option (a new one must update it)."""
  config = resolve(RECIPES["bit_r50x1_i1k"][0])
  assert "zero_init_last_norm" not in config.model


def test_scaling_recipe_decays_big_visions_kernels_and_the_head_100x():
  """train_vit_g.py:74-77: wd_mults 100x on '.*head/kernel', 1x on every other '.*/kernel' (the
  first pattern that matches, big_vision/utils.py:1195-1202), none on anything else."""
  import re  # pylint: disable=g-import-not-at-top

  from vit_jax.training import optimizer  # pylint: disable=g-import-not-at-top

  config = resolve(RECIPES["vit_g14_i21k"][0])
  model = models.build_model(config.model, num_classes=10, depth=2)
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, 224, 224, 3)))
  params = shapes["params"]
  mult = config.optimizer.head_weight_decay_mult
  body = flax.traverse_util.flatten_dict(optimizer.decay_mask(params, in_head=False), sep="/")
  head = flax.traverse_util.flatten_dict(optimizer.decay_mask(params, in_head=True), sep="/")
  for path in body:
    want = 100.0 if re.fullmatch(".*head/kernel", path) else float(path.endswith("/kernel"))
    got = mult if head[path] else float(body[path])
    assert got == want, path


@pytest.mark.parametrize(
    "sweep, recipes",
    [
        (
            "vit_i1k_paper.py",
            {"S/16": "vit_s16_i1k_augreg", "B/16": "vit_b16_i1k", "L/16": "vit_l16_i1k"},
        ),
        (
            "vit_i21k_paper.py",
            {"S/16": "vit_s16_i21k", "B/16": "vit_b16_i21k", "L/16": "vit_l16_i21k"},
        ),
    ],
)
def test_paper_sweep_runs_use_their_size_recipe(sweep, recipes):
  """Every run of the paper sweeps trains its size's recipe; only the epoch budget varies (and
  the sweep's own eval cadence)."""
  loaded = spec.load(os.path.join(REPO, "experiments", "sweeps", sweep))
  budgets = {}
  for run in loaded.runs:
    config = sweep_checks.run_config(run)
    _, expected = RECIPES[recipes[config.model.variant]]
    for key, (want, source) in expected.items():
      if key not in ("epochs", "eval_every"):
        assert matches(flat(config, key), want), f"{run.name}: {key} ({source})"
    budgets.setdefault(config.model.variant, set()).add(config.total_steps)
  assert sorted(budgets) == sorted(recipes) and all(len(b) == 3 for b in budgets.values())


@pytest.mark.parametrize(
    "sweep, metric", [("vit_i1k_paper.py", "error"), ("vit_i21k_paper.py", "prec1_error")]
)
def test_paper_sweep_fits_one_recipe_and_its_metric(sweep, metric):
  """One compute frontier is fitted over every run, so every run shares the recipe (loss, batch,
  pooling, position embedding; only size and epochs vary); ImageNet-21k is scored by prec@1."""
  loaded = spec.load(os.path.join(REPO, "experiments", "sweeps", sweep))
  recipes = set()
  for run in loaded.runs:
    c = sweep_checks.run_config(run)
    recipes.add((c.loss, c.batch_size, c.model.classifier, c.model.posemb, c.optimizer.name))
  assert len(recipes) == 1, recipes
  assert loaded.metric == metric


@pytest.mark.parametrize(
    "arg, message",
    [
        ("dataset=imagenet2012,recipe=deit", "must be one of plain, augreg for imagenet2012"),
        ("dataset=imagenet2012,recipe=scaling", "must be one of plain, augreg"),
        ("dataset=imagenet21k,recipe=plain", "must be one of augreg, scaling for imagenet21k"),
        ("dataset=cifar10,recipe=augreg", "leave it out for other datasets"),
        ("dataset=imagenet2012,recipe=plain,finetune", "and for fine-tuning"),
    ],
)
def test_recipe_argument_is_checked(arg, message):
  with pytest.raises(errors.ConfigError, match=message):
    config_module("vit").get_config(arg)
