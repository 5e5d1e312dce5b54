"""The named model sizes against their sources: the published ViT table, the rules the BERT and
GPT-2 families follow, the ResNet depth formula, GPT-2's own config, and the 1,000-class
default every image classifier shares with ImageNet."""

import jax
import jax.numpy as jnp
import pytest

from tests import peers
from vit_jax.models import bert
from vit_jax.models import build_model
from vit_jax.models import gpt
from vit_jax.models import mixer
from vit_jax.models import resnet
from vit_jax.models import vit

# (width, depth, MLP width, heads): ViT paper Table 1 (B, L, H); DeiT (Ti, S); Zhai et al. 2022,
# "Scaling Vision Transformers" (M, g, G).
PUBLISHED_VIT = {
    "Ti": (192, 12, 768, 3),
    "S": (384, 12, 1536, 6),
    "M": (512, 12, 2048, 8),
    "B": (768, 12, 3072, 12),
    "L": (1024, 24, 4096, 16),
    "H": (1280, 32, 5120, 16),
    "g": (1408, 40, 6144, 16),
    "G": (1664, 48, 8192, 16),
}


def test_vit_presets_are_the_published_shapes():
  assert set(vit.PRESETS) == set(PUBLISHED_VIT)
  for name, (width, depth, mlp, heads) in PUBLISHED_VIT.items():
    shape, patch = vit.parse_variant(f"{name}/14")
    assert (shape.width, shape.depth, shape.mlp_dim, shape.num_heads) == (width, depth, mlp, heads)
    assert patch == (14, 14)


def test_vit_builds_its_preset_heads():
  model = build_model({"name": "vit", "variant": "Ti/16", "num_classes": 10})
  params = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3))))
  attention = params["params"]["Transformer"]["encoderblock_0"]["MultiHeadDotProductAttention_1"]
  assert attention["query"]["kernel"].shape == (192, 3, 64)  # D x H x head width
  assert len([k for k in params["params"]["Transformer"] if k.startswith("encoderblock")]) == 12


def test_bert_presets_follow_turc_et_al():
  """Every BERT size has 64-wide heads and an MLP 4x its width (Turc et al. 2019, Devlin 2019)."""
  for name, shape in bert.PRESETS.items():
    assert shape.width == 64 * shape.num_heads, name
    assert shape.mlp_dim == 4 * shape.width, name
  depths = {name: (s.depth, s.width) for name, s in bert.PRESETS.items()}
  assert depths == {
      "tiny": (2, 128),
      "mini": (4, 256),
      "small": (4, 512),
      "medium": (8, 512),
      "base": (12, 768),
      "large": (24, 1024),
  }


def test_gpt_presets_and_default_vocabulary_follow_gpt2():
  transformers = peers.require("transformers")
  assert gpt.Gpt.vocab_size == transformers.GPT2Config().vocab_size == 50257
  hf = {"gpt2": (768, 12, 12), "gpt2-medium": (1024, 24, 16)}
  hf.update({"gpt2-large": (1280, 36, 20), "gpt2-xl": (1600, 48, 25)})
  for name, (width, depth, heads) in hf.items():
    shape = gpt.PRESETS[name]
    assert (shape.width, shape.depth, shape.num_heads) == (width, depth, heads), name
  # The CPU sizes grow in width and depth, with 32-wide heads.
  small = [gpt.PRESETS[n] for n in ("pico", "nano", "micro")]
  assert all(s.width == 32 * s.num_heads for s in small)
  assert [s.width for s in small] == [64, 128, 256] and [s.depth for s in small] == [2, 4, 6]


@pytest.mark.parametrize("depth", sorted(resnet.BLOCK_COUNTS))
def test_resnet_block_counts_make_their_depth(depth):
  """Bottleneck ResNets: 3 convolutions per block, plus the stem convolution and the head."""
  counts, width = resnet.parse_variant(f"{depth}x2")
  assert 3 * sum(counts) + 2 == depth and len(counts) == 4 and width == 2


@pytest.mark.parametrize(
    "config",
    [
        {"name": "vit", "variant": "Ti/16"},
        {"name": "mixer", "variant": "S/16"},
        {"name": "fnet", "patch_size": 16, "width": 32, "depth": 1, "mlp_dim": 64},
        {"name": "resnet", "variant": "26x1"},
    ],
    ids=lambda c: c["name"],
)
def test_image_classifiers_default_to_imagenet_classes(config):
  model = build_model(config)
  logits = jax.eval_shape(
      lambda: model.init_with_output(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)))[0]
  )
  assert logits.shape == (1, 1000)


def test_mixer_presets_are_the_published_shapes():
  """Tolstikhin et al. 2021, Table 1: (hidden width, blocks, token-MLP width, channel-MLP width)."""
  published = {"S": (512, 8, 256, 2048), "B": (768, 12, 384, 3072), "L": (1024, 24, 512, 4096)}
  for name, expected in published.items():
    shape, patch = mixer.parse_mixer_variant(f"{name}/32")
    actual = (shape.hidden_dim, shape.num_blocks, shape.tokens_mlp_dim, shape.channels_mlp_dim)
    assert actual == expected and patch == 32, name
