"""Shared pieces of the interop tests: random perturbation of weights, comparisons, tiny configs."""

import jax
import numpy as np

from vit_jax import interop

TOL = 1e-4  # max abs difference of fp32 logits


def perturb_torch(model, seed: int = 0, scale: float = 0.05):
  """Adds noise to every weight (LayerNorm scales, biases), so no mapping hides behind 1s and 0s."""
  import torch  # pylint: disable=g-import-not-at-top

  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for _, p in model.named_parameters():
      p.add_(torch.randn(p.shape, generator=gen) * scale)
  return model.eval()


def perturb_jax(params, seed: int = 0, scale: float = 0.05):
  leaves, treedef = jax.tree.flatten(params)
  rng = np.random.default_rng(seed)
  return jax.tree.unflatten(
      treedef, [np.asarray(x) + rng.normal(0, scale, x.shape).astype(x.dtype) for x in leaves]
  )


def init_ours(config: dict, *inputs, seed: int = 0):
  """(checkpoint, module) of a freshly initialized (and perturbed) model of ours."""
  module = interop.Checkpoint({}, config).module()
  params = module.init(jax.random.PRNGKey(seed), *inputs)["params"]
  ckpt = interop.from_tree(perturb_jax(params, seed), config)
  return ckpt, module


def max_diff(a, b) -> float:
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
