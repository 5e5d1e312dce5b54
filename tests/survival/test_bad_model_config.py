"""Bad input gets a clear error naming the problem."""

import jax
import jax.numpy as jnp
import pytest

from vit_jax.models import build_model
from vit_jax.models import vit


def test_image_size_not_divisible_by_patch():
  model = build_model({"name": "vit", "variant": "Ti/16", "num_classes": 10})
  with pytest.raises(
      ValueError, match=r"Image size 30x32 is not divisible by the patch size 16x16"
  ):
    model.init(jax.random.PRNGKey(0), jnp.zeros((1, 30, 32, 3)))


@pytest.mark.parametrize(
    "variant,message",
    [
        ("Q/16", "Unknown ViT preset 'Q'"),
        ("B16", "Malformed ViT variant 'B16'"),
        ("B/", "Malformed ViT variant"),
    ],
)
def test_bad_vit_variant(variant, message):
  with pytest.raises(ValueError, match=message):
    vit.parse_variant(variant)


@pytest.mark.parametrize(
    "cfg,message",
    [
        ({"name": "gpt", "variant": "gpt7"}, "Unknown GPT preset 'gpt7'"),
        ({"name": "bert", "variant": "huge"}, "Unknown BERT preset 'huge'"),
        ({"name": "mixer", "variant": "XL/16"}, "Mixer variant 'XL/16'"),
    ],
)
def test_unknown_presets(cfg, message):
  model = build_model(cfg)
  inputs = jnp.zeros((1, 32, 32, 3)) if cfg["name"] == "mixer" else jnp.zeros((1, 4), jnp.int32)
  with pytest.raises(ValueError, match=message):
    model.init(jax.random.PRNGKey(0), inputs)


def test_unknown_model_and_unknown_option():
  with pytest.raises(ValueError, match="Unknown model 'resnext'"):
    build_model({"name": "resnext"})
  with pytest.raises(ValueError, match=r"Unknown option\(s\) \['widht'\] for model 'vit'"):
    build_model({"name": "vit", "widht": 3})


@pytest.mark.parametrize(
    "cfg",
    [
        {"name": "gpt", "variant": "pico", "vocab_size": 11, "max_len": 8},
        {"name": "bert", "variant": "tiny", "vocab_size": 11, "max_len": 8},
    ],
)
def test_sequence_longer_than_position_table(cfg):
  model = build_model(cfg)
  with pytest.raises(ValueError, match=r"has 9 tokens but .* max_len=8"):
    model.init(jax.random.PRNGKey(0), jnp.zeros((1, 9), jnp.int32))


def test_learned_posemb_length_mismatch_names_resampling():
  model = build_model({"name": "vit", "variant": "Ti/8", "num_classes": 3, "depth": 1})
  params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)))
  with pytest.raises(Exception, match="pos_embedding"):
    model.apply(params, jnp.zeros((1, 64, 64, 3)))
