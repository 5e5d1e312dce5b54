"""MFU inputs: model FLOPs equal the hand-computed PaLM formula; the peak comes from the device."""

import jax.numpy as jnp
import pytest

from vit_jax.tpu_planning import chips
from vit_jax.training import flops


@pytest.mark.parametrize("head_dim", [None, 48])  # pico's 2 heads: 32 wide, or 48
def test_gpt_flops_are_palm_formula(head_dim):
  width, depth, vocab, seq = 64, 2, 29, 16
  config = {
      "name": "gpt",
      "variant": "pico",
      "vocab_size": vocab,
      "max_len": 32,
      "scan_layers": True,
      "head_dim": head_dim,
  }
  heads_width = 2 * head_dim if head_dim else width  # H Q
  # Matmul parameters used per token: Q, K, V, out (4 D H Q), MLP (2 x 4 D^2), tied LM head (D V).
  n = depth * (4 * width * heads_width + 8 * width**2) + width * vocab
  per_token = 6 * n + 12 * depth * heads_width * seq  # 12 L H Q T
  got = flops.train_flops_per_example(config, (jnp.zeros((1, seq), jnp.int32),))
  assert got == per_token * seq


def test_vit_flops_count_patches_attention_and_a_once_per_image_head():
  width, mlp, patches, classes = 32, 64, 16, 10
  config = {
      "name": "vit",
      "variant": "Ti/8",
      "width": width,
      "depth": 1,
      "mlp_dim": mlp,
      "num_heads": 2,
      "num_classes": classes,
  }
  tokens = patches + 1  # and the cls token
  forward = (
      2 * patches * (8 * 8 * 3) * width  # patch embedding
      + 2 * tokens * (4 * width**2 + 2 * width * mlp)  # projections and MLP
      + 4 * tokens * tokens * width  # Q K^T and weights x V
      + 2 * width * classes
  )  # head, on the cls token only
  got = flops.train_flops_per_example(config, (jnp.zeros((1, 32, 32, 3)),))
  assert got == 3 * forward


def test_published_peaks_by_device_kind():
  assert chips.peak_bf16("TPU v5 lite")[0] == 197e12  # v5e, before v5p's "TPU v5"
  assert chips.peak_bf16("TPU v5")[0] == 459e12
  assert chips.peak_bf16("NVIDIA H100 PCIe")[0] == 756e12  # before "H100"
  assert chips.peak_bf16("NVIDIA H100 80GB HBM3")[0] == 989e12
  assert chips.peak_bf16("cpu") is None


def test_peak_is_a_spec_or_a_measurement():
  peak, source = flops.peak_flops_per_device()
  assert peak > 1e9 and ("spec" in source or "measured" in source)
  meter = flops.MfuMeter(
      {"name": "gpt", "variant": "pico", "vocab_size": 29, "max_len": 32},
      (jnp.zeros((1, 8), jnp.int32),),
  )
  assert meter.mfu(100.0) == pytest.approx(meter.flops_per_example * 100.0 / meter.peak)
  assert 0 < meter.mfu(100.0) < 1


def test_bert_mlm_counts_its_tied_output_projection():
  width, vocab, seq, masked = 32, 50, 16, 3
  config = {
      "name": "bert_mlm",
      "variant": "base",
      "width": width,
      "depth": 1,
      "num_heads": 2,
      "mlp_dim": 64,
      "vocab_size": vocab,
      "max_len": 32,
  }
  tokens = jnp.zeros((1, seq), jnp.int32)
  positions = jnp.arange(masked)[None]
  forward = (
      2 * seq * (4 * width**2 + 2 * width * 64)
      + 4 * seq * seq * width  # encoder layer
      + 2 * width * width  # pooler, on the first token
      + 2 * masked * (width**2 + width * vocab)
  )  # MLM transform and tied projection
  got = flops.train_flops_per_example(config, (tokens, None, None, None, None, positions))
  assert got == 3 * forward
