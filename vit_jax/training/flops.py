"""What a run counts of its model: parameters, model FLOPs per training example, and the device's
peak for MFU (model FLOPs utilization). run_info.json records the first two; the sweeps' compute
axis is their product with the examples seen.

Model FLOPs count the matmuls the model needs, not what the compiler runs (no remat, no optimizer):
training costs 3x the forward pass (forward, and twice that for the backward). For a transformer
this is the PaLM appendix B formula per token, 6N + 12·L·H·Q·T (N matmul parameters used per token,
L layers, H heads, Q head width, T attended length; causal attention counted in full, as there).
Instead of reading L/H/Q/T and N off each model family, one abstract forward pass (batch 1, no
arrays allocated) records every Dense/DenseGeneral/Conv/attend call and every attention call, so
the count also covers heads applied once per example (ViT) and cross-attention (seq2seq).
"""

import functools
import math
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


def count_params(params) -> int:
  """Total number of parameters in a pytree (works on jax.eval_shape results too)."""
  return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))


def param_table(params, depth: int = 2) -> list[tuple[str, int]]:
  """(module path, parameter count) per module, grouped `depth` levels deep, in tree order."""
  rows: dict[str, int] = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    keys = [getattr(k, "key", str(k)) for k in path]
    group = "/".join(keys[:depth])
    rows[group] = rows.get(group, 0) + int(np.prod(leaf.shape))
  return list(rows.items())


def _dense_flops(module, inputs, outputs) -> float:
  """Forward FLOPs of one linear layer call: 2 x output elements x contracted size."""
  if isinstance(module, nn.Dense):
    return 2.0 * inputs[0].size * module.features
  if isinstance(module, nn.DenseGeneral):
    axes = module.axis if isinstance(module.axis, tuple) else (module.axis,)
    contracted = math.prod(inputs[0].shape[a] for a in axes)
    return 2.0 * jax.tree.leaves(outputs)[0].size * contracted
  if isinstance(module, nn.Conv):
    in_features = inputs[0].shape[-1] // module.feature_group_count
    return 2.0 * outputs.size * math.prod(module.kernel_size) * in_features
  return 0.0


def forward_flops_per_example(model: nn.Module, init_inputs) -> float:
  """Forward matmul FLOPs of `model` on one example; `init_inputs` have batch size 1."""
  total = [0.0]

  def count(next_fun, args, kwargs, context):
    outputs = next_fun(*args, **kwargs)
    module, name = context.module, context.method_name
    if name == "__call__":
      total[0] += _dense_flops(module, args, outputs)
      if type(module).__name__ == "MultiHeadAttention" and not getattr(module, "decode", False):
        q_BxTxD = args[0]
        kv_BxSxD = args[1] if len(args) > 1 and args[1] is not None else q_BxTxD
        features = module.qkv_features or q_BxTxD.shape[-1]
        if module.head_dim is not None:  # heads of their own width: H x Q is not the width
          features = module.num_heads * module.head_dim
        # Q K^T and weights x V: 2 matmuls of 2 x T x S x (H x Q) FLOPs each.
        total[0] += 4.0 * q_BxTxD.shape[1] * kv_BxSxD.shape[1] * features
      if type(module).__name__ == "MlmHead":  # BERT's output projection onto the embedding
        total[0] += 2.0 * args[0].size * args[1].shape[0]
      if type(module).__name__ == "Gpt":  # its tied LM head: logits = h @ embedding^T
        total[0] += 2.0 * jax.tree.leaves(outputs)[0].size * module.shape().width
    elif name == "attend" and isinstance(module, nn.Embed):  # a tied output projection
      total[0] += 2.0 * args[0].size * module.num_embeddings
    return outputs

  with nn.intercept_methods(count):
    jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), *init_inputs))
  return total[0]


def train_flops_per_example(model_config, init_inputs) -> float:
  """Training FLOPs per example: 3x the forward pass (PaLM's 6N + 12LHQT per token)."""
  from vit_jax.models import build_model  # pylint: disable=g-import-not-at-top

  config = dict(model_config)
  if config.get("scan_layers"):  # a scanned stack traces one layer: count the unrolled one
    config["scan_layers"] = False
  return 3.0 * forward_flops_per_example(build_model(config), init_inputs)


@functools.cache
def measured_matmul_peak(size: int = 1024, repeats: int = 5) -> float:
  """Best fp32 FLOP/s of a size^3 matmul on the default device, measured once per process."""
  a = jnp.ones((size, size), jnp.float32)
  dot = jax.jit(jnp.dot)
  dot(a, a).block_until_ready()
  best = math.inf
  for _ in range(repeats):
    start = time.perf_counter()
    dot(a, a).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2.0 * size**3 / best


def peak_flops_per_device() -> tuple[float, str]:
  """(peak FLOP/s of one device, where the figure comes from): an accelerator's published peak
  (tpu_planning/chips.py), else a measured fp32 matmul."""
  device = jax.devices()[0]
  if device.platform != "cpu":
    # Imported here: a CPU run has no published peak to read.
    from vit_jax.tpu_planning import chips  # pylint: disable=g-import-not-at-top

    peak = chips.peak_bf16(device.device_kind)
    if peak:
      return peak
  return measured_matmul_peak(), f"measured fp32 matmul on {device.device_kind}"


class MfuMeter:
  """Turns examples/s into MFU: model FLOPs per second over all devices' peak."""

  def __init__(self, model_config, init_inputs):
    self.flops_per_example = train_flops_per_example(model_config, init_inputs)
    peak, self.peak_source = peak_flops_per_device()
    self.peak = peak * jax.device_count()

  def mfu(self, examples_per_sec: float) -> float:
    return self.flops_per_example * examples_per_sec / self.peak
