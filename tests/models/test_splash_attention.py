"""The splash (Pallas TPU) kernel, run by Pallas's interpreter on the CPU, against the einsum
reference: outputs and gradients to 1e-5 in float32 for causal, packed-segment and padded masks,
given as MaskSpec parts. Also which kernel "auto" picks on each platform."""

import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from vit_jax.models import attention
from vit_jax.models import masks
from vit_jax.models import splash_attention

BATCH, LENGTH, HEADS, DEPTH = 2, 100, 2, 16  # 100 tokens: the kernel pads them to 128


def qkv(q_len=LENGTH, kv_len=LENGTH):
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  shapes = [(BATCH, q_len, HEADS, DEPTH)] + [(BATCH, kv_len, HEADS, DEPTH)] * 2
  return [jax.random.normal(key, shape) for key, shape in zip(keys, shapes)]


def spec_and_valid_rows(kind):
  """The MaskSpec of a case, and the (B, T) query rows a model reads (the others are padding)."""
  if kind == "causal":
    return masks.MaskSpec(causal=True), np.ones((BATCH, LENGTH), bool)
  if kind == "segments":  # two and three packed sequences, then padding (id 0)
    ids = np.zeros((BATCH, LENGTH), np.int32)
    ids[0, :40], ids[0, 40:90] = 1, 2
    ids[1, :30], ids[1, 30:70], ids[1, 70:97] = 1, 2, 3
    return masks.MaskSpec(causal=True).with_segments(jnp.asarray(ids)), ids > 0
  valid = np.arange(LENGTH)[None, :] < np.array([[LENGTH], [57]])  # "padded": right padding
  return masks.MaskSpec().with_padding(jnp.asarray(valid)), valid


@pytest.mark.parametrize("kind", ["causal", "segments", "padded"])
def test_splash_matches_the_reference_forward_and_backward(kind):
  spec, valid_BxT = spec_and_valid_rows(kind)
  q, k, v = qkv()
  cotangent = jax.random.normal(jax.random.PRNGKey(1), q.shape) * valid_BxT[:, :, None, None]

  def loss(fn):  # a loss that reads only the rows a model reads
    return lambda q, k, v: jnp.sum(fn(q, k, v) * cotangent)

  splash = lambda q, k, v: splash_attention.splash_attention(q, k, v, spec, interpret=True)
  dense = spec.dense(BATCH, LENGTH, LENGTH)
  reference = lambda q, k, v: attention.einsum_attention(q, k, v, dense)[0]

  out, out_ref = splash(q, k, v), reference(q, k, v)
  rows = valid_BxT[:, :, None, None]
  np.testing.assert_allclose(np.where(rows, out, 0), np.where(rows, out_ref, 0), atol=1e-5)
  grads = jax.grad(loss(splash), argnums=(0, 1, 2))(q, k, v)
  grads_ref = jax.grad(loss(reference), argnums=(0, 1, 2))(q, k, v)
  for name, g, g_ref in zip("qkv", grads, grads_ref):
    np.testing.assert_allclose(g, g_ref, atol=1e-5, err_msg=f"d{name}")


def test_a_splash_layer_equals_the_einsum_layer_on_mask_parts():
  """Through MultiHeadAttention: causal cross-attention with fewer queries than keys (offset)."""
  x_q, x_kv = jax.random.normal(jax.random.PRNGKey(0), (1, 20, 32)), jnp.ones((1, 30, 32))
  spec = masks.MaskSpec(causal=True)
  layer = lambda impl: attention.MultiHeadAttention(num_heads=2, implementation=impl)
  params = layer("einsum").init(jax.random.PRNGKey(1), x_q, x_kv)
  out = layer("splash").apply(params, x_q, x_kv, mask=spec)
  np.testing.assert_allclose(out, layer("einsum").apply(params, x_q, x_kv, mask=spec), atol=1e-5)


MESH_SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    from vit_jax.models import attention, masks, splash_attention
    from vit_jax.training import mesh as mesh_lib
    q, k, v = (jax.random.normal(jax.random.PRNGKey(i), (4, 128, 2, 16)) for i in range(3))
    for spec in (masks.MaskSpec(), masks.MaskSpec(causal=True)):
      with jax.set_mesh(mesh_lib.make_mesh("data:2,model:2")):
        fn = jax.jit(lambda q, k, v: splash_attention.splash_attention(q, k, v, spec, True))
        out, program = fn(q, k, v), fn.lower(q, k, v).as_text()
      ref = attention.einsum_attention(q, k, v, spec.dense(4, 128, 128))[0]
      # A shard_map (Shardy's manual computation) taking batch over data and heads over model.
      assert '[{"data"}, {"model"}, {}, {}]' in program and "manual_computation" in program
      np.testing.assert_allclose(out, ref, atol=1e-5)
    print("ok")
""")


def test_under_a_mesh_splash_runs_per_device_and_matches_the_reference():
  """Batch over `data`, heads over `model` of a 4-device CPU mesh, in a shard_map."""
  result = helpers.run([sys.executable, "-c", MESH_SCRIPT], devices=4)
  assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


@pytest.mark.parametrize(
    "platform, dtype, head_dim, tokens, expected",
    [
        ("tpu", jnp.float32, 64, 1024, "splash"),
        ("tpu", jnp.bfloat16, 64, 1024, "splash"),
        ("gpu", jnp.bfloat16, 64, 1024, "cudnn"),
        ("gpu", jnp.float16, 128, 1024, "cudnn"),
        ("gpu", jnp.float32, 64, 1024, "xla"),  # cuDNN's fused attention takes no float32
        ("gpu", jnp.bfloat16, 12, 1024, "xla"),  # head width not a multiple of 8
        ("gpu", jnp.bfloat16, 64, 197, "cudnn"),  # ViT-B/16: padded to an even length
        ("cpu", jnp.bfloat16, 64, 1024, "xla"),
    ],
)
def test_auto_picks_the_kernel_of_the_platform(platform, dtype, head_dim, tokens, expected):
  spec = masks.MaskSpec(causal=True)
  chosen = attention.choose_implementation(
      "auto", platform, dtype, head_dim, tokens, tokens, spec, False
  )
  assert chosen == expected


@pytest.mark.parametrize("tokens, expected", [(197, "xla"), (198, "cudnn")])
def test_auto_on_gpu_leaves_odd_lengths_with_a_mask_beyond_causality_to_xla(tokens, expected):
  """Padding hides keys by the kernel's key lengths, which packed segments cannot use."""
  spec = masks.MaskSpec(causal=True).with_segments(jnp.ones((2, tokens), jnp.int32))
  chosen = attention.choose_implementation(
      "auto", "gpu", jnp.bfloat16, 64, tokens, tokens, spec, False
  )
  assert chosen == expected


@pytest.mark.parametrize(
    "tokens, head_dim, expected",
    [
        (197, 64, "xla"),  # ViT-B/16: 131k elements kept per example and head against 77k
        (320, 64, "xla"),  # padded to 384: 197k against 164k
        (384, 64, "splash"),  # 197k against 221k
        (1024, 64, "splash"),  # GPT-2: 524k against 1.2M
        (197, 128, "xla"),  # no lane padding, but 256 padded tokens: 131k against 115k
        (256, 128, "splash"),  # 131k against 164k
        (64, 128, "xla"),
    ],
)
def test_auto_on_tpu_picks_the_kernel_that_keeps_less(tokens, head_dim, expected):
  spec = masks.MaskSpec()
  assert (
      attention.choose_implementation(
          "auto", "tpu", jnp.bfloat16, head_dim, tokens, tokens, spec, False
      )
      == expected
  )


def test_splash_leaves_dense_masks_and_keyless_rows_to_xla():
  causal = masks.MaskSpec(causal=True)
  choose = lambda q_len, kv_len, dense: attention.choose_implementation(
      "splash", "tpu", jnp.float32, 64, q_len, kv_len, causal, dense
  )
  assert choose(8, 8, dense=False) == "splash"
  assert choose(8, 8, dense=True) == "xla"  # e.g. the KV cache's mask
  assert choose(9, 8, dense=False) == "xla"  # the first query would see no key


def test_the_platform_is_the_mesh_devices_not_the_host():
  tpu = jax.sharding.AbstractDevice(device_kind="TPU v5", num_cores=1, platform="tpu")
  mesh = jax.sharding.AbstractMesh((1,), ("data",), abstract_device=tpu)
  assert attention.target_platform() == jax.default_backend()
  with jax.sharding.use_abstract_mesh(mesh):
    assert attention.target_platform() == "tpu"
