"""BiT ResNet-v2: the published parameter counts, shapes, weight standardization, GroupNorm,
FLOPs, bad options, and agreement with timm's port of BiT (which loads the released weights)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax import errors
from vit_jax.models import build_model
from vit_jax.models import resnet
from vit_jax.training import flops

TINY = {"name": "resnet", "block_counts": (1, 1), "width": 32, "stem": "small", "num_classes": 5}


def abstract_init(model, images):
  """(output, params) as shapes only: no memory, no compile."""
  out, variables = jax.eval_shape(lambda: model.init_with_output(jax.random.PRNGKey(0), images))
  return out, variables["params"]


def bit_params(counts, factor: int, num_classes: int) -> int:
  """BiT ResNet-v2 parameters counted by hand: bias-free convs, GroupNorm scale and bias."""
  root = 64 * factor
  total, channels = 7 * 7 * 3 * root, root
  for i, units in enumerate(counts):
    width = root * 2**i
    for j in range(units):
      total += 2 * channels + channels * width  # gn1, conv1 (1x1)
      total += 2 * width + 9 * width * width  # gn2, conv2 (3x3)
      total += 2 * width + width * 4 * width  # gn3, conv3 (1x1)
      if j == 0:
        total += channels * 4 * width  # conv_proj (1x1)
      channels = 4 * width
  return total + 2 * channels + channels * num_classes + num_classes  # final norm, head


# timm 1.0.31's resnetv2_{50x1,101x1,50x3}_bit(num_classes=1000), the port that loads the released
# BiT weights, count exactly these (sum of p.numel(); checked when this test was written).
# ResNet-50x1 is the "about 25.5 M" of the BiT paper.
@pytest.mark.parametrize(
    "variant,counts,factor,expected",
    [
        ("50x1", (3, 4, 6, 3), 1, 25_549_352),
        ("101x1", (3, 4, 23, 3), 1, 44_541_480),
        ("50x3", (3, 4, 6, 3), 3, 217_319_080),
    ],
)
def test_published_param_counts(variant, counts, factor, expected):
  model = build_model({"name": "resnet", "variant": variant, "num_classes": 1000})
  _, params = abstract_init(model, jnp.zeros((1, 224, 224, 3)))
  assert flops.count_params(params) == expected == bit_params(counts, factor, 1000)


@pytest.mark.parametrize(
    "cfg,size,grid,features",
    [
        ({"variant": "50x1"}, 224, 7, 2048),  # 224 / 32
        ({"variant": "26x1"}, 160, 5, 2048),
        ({"variant": "26x2", "stem": "small"}, 32, 4, 4096),  # 32 / 8: no root downsampling
        ({"block_counts": (1, 1, 1), "width": 16, "num_groups": 8, "stem": "small"}, 16, 4, 256),
        ({"variant": "50x1", "width_factor": 2, "block_counts": (1, 2)}, 64, 8, 1024),
    ],
)
def test_output_shapes(cfg, size, grid, features):
  model = build_model({"name": "resnet", "num_classes": 7, **cfg})
  images = jnp.zeros((2, size, size, 3))
  logits, variables = jax.eval_shape(
      lambda: model.init_with_output(
          jax.random.PRNGKey(0),
          images,
          capture_intermediates=lambda m, _: m.name == "pre_head_norm",
      )
  )
  assert logits.shape == (2, 7)
  (final,) = variables["intermediates"]["pre_head_norm"]["__call__"]
  assert final.shape == (2, grid, grid, features)
  pooled, _ = abstract_init(build_model({"name": "resnet", "num_classes": 0, **cfg}), images)
  assert pooled.shape == (2, features)


def test_weight_standardization_per_output_channel():
  """The effective kernel (read through a 1x1 conv on one-hot pixels) has zero mean and unit
  variance per output channel, whatever the stored kernel's offset and scale."""
  conv = resnet.StdConv(6, (1, 1), use_bias=False)
  kernel_1x1x4x6 = 5.0 + 3.0 * jax.random.normal(jax.random.PRNGKey(0), (1, 1, 4, 6))
  one_hot_1x1x4x4 = jnp.eye(4).reshape(4, 1, 1, 4)
  effective_4x6 = conv.apply({"params": {"kernel": kernel_1x1x4x6}}, one_hot_1x1x4x4).reshape(4, 6)
  np.testing.assert_allclose(effective_4x6.mean(axis=0), 0.0, atol=1e-5)
  np.testing.assert_allclose(effective_4x6.var(axis=0), 1.0, rtol=1e-4)
  raw = nn.Conv(6, (1, 1), use_bias=False).apply(
      {"params": {"kernel": kernel_1x1x4x6}}, one_hot_1x1x4x4
  )
  assert not np.allclose(raw.reshape(4, 6), effective_4x6, atol=0.1)  # it did change the kernel

  # A 3x3 kernel is standardized over (height, width, input channels) together.
  kernel_3x3x2x4 = 1.0 + jax.random.normal(jax.random.PRNGKey(1), (3, 3, 2, 4))
  x_1x5x5x2 = jax.random.normal(jax.random.PRNGKey(2), (1, 5, 5, 2))
  ours = resnet.StdConv(4, (3, 3), use_bias=False).apply(
      {"params": {"kernel": kernel_3x3x2x4}}, x_1x5x5x2
  )
  flat_18x4 = kernel_3x3x2x4.reshape(18, 4)
  expected_kernel = ((flat_18x4 - flat_18x4.mean(0)) / flat_18x4.std(0)).reshape(3, 3, 2, 4)
  plain = nn.Conv(4, (3, 3), use_bias=False).apply(
      {"params": {"kernel": expected_kernel}}, x_1x5x5x2
  )
  np.testing.assert_allclose(ours, plain, atol=1e-4)


def test_group_norm_normalizes_groups_of_channels():
  """Every GroupNorm has 32 groups and (at init: scale 1, bias 0) gives each example's group of
  C/32 channels zero mean and unit variance over space and the group's channels."""
  cfg = {"name": "resnet", "variant": "26x1", "block_counts": (1, 1), "num_classes": 3}
  model = build_model(cfg)
  images = np.random.default_rng(1).normal(size=(2, 32, 32, 3)).astype(np.float32)
  groups = []

  def record(next_fun, args, kwargs, context):
    if isinstance(context.module, nn.GroupNorm):
      groups.append(context.module.num_groups)
    return next_fun(*args, **kwargs)

  with nn.intercept_methods(record):
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(1), images))
  assert groups == [32] * (2 * 3 + 1)  # three per unit, one before the head

  # Random kernels from numpy (jax's initializers compile for ~20 s on a busy CPU), GroupNorm
  # scale 1 and bias 0 as initialized.
  rng = np.random.default_rng(0)
  init = {"scale": np.ones, "bias": np.zeros}
  random = lambda shape: rng.normal(size=shape)
  params = jax.tree_util.tree_map_with_path(
      lambda path, x: init.get(path[-1].key, random)(x.shape).astype(np.float32),
      shapes["params"],
  )
  is_norm = lambda module, _: isinstance(module, nn.GroupNorm)
  apply = jax.jit(lambda p, x: model.apply({"params": p}, x, capture_intermediates=is_norm))
  outputs = jax.tree.leaves(apply(params, images)[1]["intermediates"])
  assert len(outputs) == len(groups)
  for out_BxHxWxC in outputs:
    b, h, w, c = out_BxHxWxC.shape
    grouped = np.asarray(out_BxHxWxC).reshape(b, h * w, 32, c // 32)
    np.testing.assert_allclose(grouped.mean(axis=(1, 3)), 0.0, atol=1e-4)
    np.testing.assert_allclose(grouped.var(axis=(1, 3)), 1.0, atol=2e-3)


def test_flops_counted_by_hand():
  """StdConv counts as a conv: 2 x outputs x kernel area x input channels, per example."""
  model = build_model({**TINY, "num_classes": 10})
  counted = flops.forward_flops_per_example(model, (jnp.zeros((1, 8, 8, 3)),))
  root = 2 * (8 * 8 * 32) * 9 * 3  # 3x3/1 conv, 3 -> 32 channels at 8x8
  stage1 = 2 * 64 * (128 * 32 + 32 * 32 + 32 * 9 * 32 + 128 * 32)  # proj, conv1, conv2, conv3
  # Stage 2 (width 64, strided in conv2 and proj): conv1 at 8x8, the rest at 4x4.
  stage2 = 2 * 64 * (64 * 128) + 2 * 16 * (256 * 128 + 64 * 9 * 64 + 256 * 64)
  head = 2 * 256 * 10
  assert counted == root + stage1 + stage2 + head == 6_276_096


@pytest.mark.parametrize(
    "cfg,message",
    [
        ({"variant": "51x1"}, "unknown ResNet variant '51x1'"),
        ({"variant": "B/16"}, "unknown ResNet variant 'B/16'"),
        ({"stem": "tiny"}, "Unknown ResNet stem 'tiny'"),
        ({"width": 48}, r"width 48 is not divisible by num_groups=32"),
        ({"block_counts": (2, 0)}, r"block_counts=\[2, 0\]"),
    ],
)
def test_bad_options_are_config_errors(cfg, message):
  model = build_model({"name": "resnet", "num_classes": 3, **cfg})
  with pytest.raises(errors.ConfigError, match=message):
    model.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)))


def test_unknown_option_names_the_valid_ones():
  with pytest.raises(errors.ConfigError, match=r"\['depth'\] for model 'resnet'.*'block_counts'"):
    build_model({"name": "resnet", "depth": 50})


# ---- Agreement with timm's BiT port ------------------------------------------------------------
def timm_to_ours(state_dict) -> dict:
  """timm resnetv2 names (OIHW convs, 1x1-conv head) -> our nested params (HWIO, Dense head)."""
  params = {}

  def put(path, value):
    node = params
    for key in path[:-1]:
      node = node.setdefault(key, {})
    node[path[-1]] = value

  for name, tensor in state_dict.items():
    value = tensor.detach().numpy()
    parts = name.split(".")
    if name.startswith("stem.conv."):
      put(["root_block", "conv_root", "kernel"], value.transpose(2, 3, 1, 0))
    elif name.startswith("stages."):
      unit = ["block%d" % (int(parts[1]) + 1), "unit%02d" % (int(parts[3]) + 1)]
      layer = "conv_proj" if parts[4] == "downsample" else parts[4].replace("norm", "gn")
      if layer.startswith("conv"):
        put(unit + [layer, "kernel"], value.transpose(2, 3, 1, 0))
      else:
        put(unit + [layer, {"weight": "scale", "bias": "bias"}[parts[5]]], value)
    elif name.startswith("norm."):
      put(["pre_head_norm", {"weight": "scale", "bias": "bias"}[parts[1]]], value)
    elif name == "head.fc.weight":
      put(["head", "kernel"], value[:, :, 0, 0].T)
    elif name == "head.fc.bias":
      put(["head", "bias"], value)
    else:
      raise KeyError(name)
  return params


def bit_reference(timm, torch, layers):
  """timm's resnetv2_50x1_bit, or for other block counts its ResNetV2 built as the BiT models
  are (`_create_resnetv2_bit`: the "fixed" stem, zero padding before the pool, StdConv2d eps
  1e-8); random weights, the norms and head away from their 1 / 0 init so every parameter
  matters."""
  if tuple(layers) == (3, 4, 6, 3):
    reference = timm.create_model("resnetv2_50x1_bit", pretrained=False, num_classes=10)
  else:
    conv = lambda *a, **k: timm.layers.StdConv2d(*a, eps=1e-8, **k)
    reference = timm.models.resnetv2.ResNetV2(
        list(layers), num_classes=10, stem_type="fixed", conv_layer=conv
    )
  reference.eval()
  torch.manual_seed(0)
  with torch.no_grad():
    for name, p in reference.named_parameters():
      if p.ndim == 1:  # GroupNorm scale / bias, head bias
        p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
      else:
        p.copy_(torch.randn_like(p) * (0.05 if name.startswith("head") else 1.0))
  return reference


@pytest.mark.parametrize(
    "layers,size",
    [
        pytest.param((1, 1, 1, 1), 32, id="R50x1-widths-one-unit-per-stage"),
        pytest.param((3, 4, 6, 3), 64, id="R50x1", marks=pytest.mark.slow),
    ],
)
def test_logits_match_timm_bit(layers, size):
  """Same random weights, same images: the logits of timm's BiT port (resnetv2_50x1_bit has
  layers (3, 4, 6, 3)), so stem padding, strides, shortcuts, WS and GN all agree with BiT."""
  timm = pytest.importorskip("timm")
  torch = pytest.importorskip("torch")
  reference = bit_reference(timm, torch, layers)
  params = timm_to_ours(reference.state_dict())
  model = build_model(
      {"name": "resnet", "variant": "50x1", "block_counts": layers, "num_classes": 10}
  )
  _, expected = abstract_init(model, jnp.zeros((1, size, size, 3)))
  assert jax.tree.map(np.shape, params) == jax.tree.map(lambda x: x.shape, expected)

  images_BxHxWxC = np.random.default_rng(0).normal(size=(2, size, size, 3)).astype(np.float32)
  with torch.no_grad():
    theirs = reference(torch.from_numpy(images_BxHxWxC.transpose(0, 3, 1, 2))).numpy()
  ours = np.asarray(jax.jit(model.apply)({"params": params}, images_BxHxWxC))
  assert np.std(theirs) > 0.1  # the logits are not trivially equal
  np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3 * np.abs(theirs).max())
