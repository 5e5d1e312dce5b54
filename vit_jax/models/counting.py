"""Parameter and FLOP counts: totals, a per-module table, and the analytic transformer estimate."""

import jax
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


def forward_flops(apply_fn, *args) -> float:
  """FLOPs of one call of `apply_fn(*args)` as counted by XLA's cost analysis."""
  cost = jax.jit(apply_fn).lower(*args).compile().cost_analysis()
  if isinstance(cost, (list, tuple)):  # older jax returned one dict per device
    cost = cost[0]
  return float(cost.get("flops", float("nan")))


def transformer_forward_flops(
    num_params_non_embedding: int, num_layers: int, seq_len: int, width: int
) -> float:
  """Per-token forward FLOPs of a transformer (Kaplan et al. 2020): 2N + 2 * layers * T * D.

  Training costs about three times this (forward plus twice for the backward pass).
  """
  return 2.0 * num_params_non_embedding + 2.0 * num_layers * seq_len * width


def format_table(rows: list[tuple[str, int]]) -> str:
  width = max(len(name) for name, _ in rows)
  total = sum(n for _, n in rows)
  lines = [f"{name:<{width}}  {n:>14,}" for name, n in rows]
  lines.append(f"{'total':<{width}}  {total:>14,}")
  return "\n".join(lines)
