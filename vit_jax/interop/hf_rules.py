"""Hugging Face conventions: name-and-layout rules between its tensors and our flat params, and
the activation, architecture and label fields of its configs.

A `Rule` maps one tensor of theirs to one or more of our params (several for a fused tensor such
as GPT-2's `c_attn`) with a pair of functions, so each mapping is written once and serves both
import and export. Torch `Linear` weights are (out, in); Flax kernels are (in, out) and attention
kernels DenseGeneral-shaped: query/key/value (D, H, K), out (H, K, D).
"""

import dataclasses
import re
from typing import Callable, Optional

import numpy as np

from vit_jax import errors
from vit_jax.interop import flat_params
from vit_jax.interop import safetensors_files


def _one(fn):
  return lambda *xs: (fn(*xs),)


@dataclasses.dataclass(frozen=True)
class Rule:
  theirs: str
  ours: tuple  # our flat keys
  to_ours: Callable  # their tensor -> tuple of our arrays
  to_theirs: Callable  # our arrays (in `ours` order) -> their tensor
  optional: bool = False  # may be absent on either side (e.g. BERT's pooler)
  shape: Optional[tuple] = None  # their tensor's shape, where the config says what it must be


def rule(theirs: str, ours: str, layout=None, optional: bool = False, shape=None) -> Rule:
  to_ours, to_theirs = layout or (lambda x: x, lambda x: x)
  return Rule(theirs, (ours,), _one(to_ours), to_theirs, optional, shape)


# Layout pairs (to_ours, to_theirs).
LINEAR = (lambda w_OxI: w_OxI.T, lambda k_IxO: k_IxO.T)
# torch Conv2d weight (D, C, ph, pw) <-> Flax Conv kernel HWIO (ph, pw, C, D).
CONV = (lambda w: w.transpose(2, 3, 1, 0), lambda k: k.transpose(3, 2, 0, 1))


def heads_in(num_heads: int):
  """Linear (H*K, D) <-> query/key/value kernel (D, H, K)."""
  return (
      lambda w_HKxD: w_HKxD.T.reshape(w_HKxD.shape[1], num_heads, -1),
      lambda k_DxHxK: k_DxHxK.reshape(k_DxHxK.shape[0], -1).T,
  )


def heads_bias(num_heads: int):
  """Bias (H*K,) <-> (H, K)."""
  return (lambda b_HK: b_HK.reshape(num_heads, -1), lambda b_HxK: b_HxK.reshape(-1))


def heads_out(num_heads: int, input_major: bool = False):
  """Linear (D, H*K) [or Conv1D (H*K, D)] <-> out kernel (H, K, D)."""

  def to_ours(w):
    w_HKxD = w if input_major else w.T
    return w_HKxD.reshape(num_heads, -1, w_HKxD.shape[1])

  def to_theirs(k_HxKxD):
    w_HKxD = k_HxKxD.reshape(-1, k_HxKxD.shape[-1])
    return w_HKxD if input_major else w_HKxD.T

  return to_ours, to_theirs


def import_tensors(tensors, rules: list, ignore=(), source: str = "checkpoint", dtype=None):
  """Their {name: array} (a dict, or `safetensors_files.Tensors` read a tensor at a time) -> our
  flat params, floats cast to `dtype` if given. Each tensor is converted as it is read and then
  let go. Raises listing missing, unexpected, misshapen and unconvertible tensors."""
  flat, problems, used = {}, [], set()
  for r in rules:
    if r.theirs not in tensors:
      if not r.optional:
        problems.append(f"missing in {source}: {r.theirs}")
      continue
    used.add(r.theirs)
    shape = safetensors_files.shape_of(tensors, r.theirs)  # from the header: nothing read yet
    if r.shape is not None and shape != tuple(r.shape):
      problems.append(f"misshapen in {source}: {r.theirs} {shape}, the config makes it {r.shape}")
      continue
    value = np.asarray(tensors[r.theirs])
    if dtype is not None and value.dtype in safetensors_files.FLOATS:
      value = value.astype(dtype, copy=False)
    try:
      arrays = r.to_ours(value)
    except ValueError as e:  # a reshape that does not fit the config
      problems.append(f"cannot convert {r.theirs} {value.shape} to {', '.join(r.ours)}: {e}")
      continue
    flat.update(zip(r.ours, arrays))
    del value, arrays
  ignored = [re.compile(p) for p in ignore]
  for name in sorted(set(tensors) - used):
    if not any(p.fullmatch(name) for p in ignored):
      problems.append(f"unexpected in {source}: {name} {safetensors_files.shape_of(tensors, name)}")
  flat_params.raise_problems(
      f"The {source} does not fit the architecture its config names", problems
  )
  return flat


def export_tensors(flat: dict, rules: list, target: str = "target") -> dict:
  """Our flat params -> their {name: function returning the contiguous array}, made when the
  writer asks for it (`safetensors_files.write`), so that the export never sits in memory beside
  the params. Every param must be used by a rule."""
  tensors, problems, used = {}, [], set()
  for r in rules:
    present = [k in flat for k in r.ours]
    if not all(present):
      if not (r.optional and not any(present)):
        problems.append(f"missing in our params: {', '.join(k for k in r.ours if k not in flat)}")
      continue
    used.update(r.ours)
    tensors[r.theirs] = lambda r=r: np.ascontiguousarray(
        r.to_theirs(*(np.asarray(flat[k]) for k in r.ours))
    )
  problems += [
      f"no place in the {target} for our param {k} {flat_params.shape_of(flat[k])}"
      for k in sorted(set(flat) - used)
  ]
  flat_params.raise_problems(f"Cannot write these parameters as a {target}", problems)
  return tensors


# ---- Rules for common torch modules --------------------------------------------------------------


def dense(theirs: str, ours: str, optional: bool = False, input_major: bool = False) -> list:
  """torch Linear (or GPT-2 Conv1D, input-major) `weight`/`bias` <-> Dense `kernel`/`bias`."""
  layout = None if input_major else LINEAR
  return [
      rule(f"{theirs}.weight", f"{ours}/kernel", layout, optional),
      rule(f"{theirs}.bias", f"{ours}/bias", None, optional),
  ]


def layer_norm(theirs: str, ours: str) -> list:
  return [rule(f"{theirs}.weight", f"{ours}/scale"), rule(f"{theirs}.bias", f"{ours}/bias")]


def attention(theirs: dict, ours: str, num_heads: int, bias: bool = True) -> list:
  """Separate torch Linear query/key/value/out (`theirs` maps each to a module name) <-> our
  MultiHeadAttention params under `ours`."""
  out = []
  for proj in ("query", "key", "value"):
    out.append(rule(f"{theirs[proj]}.weight", f"{ours}/{proj}/kernel", heads_in(num_heads)))
    out.append(
        rule(
            f"{theirs[proj]}.bias", f"{ours}/{proj}/bias", heads_bias(num_heads), optional=not bias
        )
    )
  out.append(rule(f"{theirs['out']}.weight", f"{ours}/out/kernel", heads_out(num_heads)))
  out.append(rule(f"{theirs['out']}.bias", f"{ours}/out/bias", None, optional=not bias))
  return out


# ---- Config fields every converter reads -------------------------------------------------------

# Hugging Face `hidden_act` / `activation_function` -> ours. "gelu" is the exact (erf) GELU;
# "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" all compute the tanh approximation.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
}
TO_HF_ACTIVATION = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}


def activation(hf_config: dict, field: str, default: str) -> str:
  name = hf_config.get(field, default)
  if name not in ACTIVATIONS:
    raise errors.ConversionError(f"Unsupported {field}={name!r}; supported: {sorted(ACTIVATIONS)}.")
  return ACTIVATIONS[name]


# Mixtures of experts: their model types, and the config keys that count their experts.
_MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "olmoe", "phimoe")
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def refuse_experts(hf_config: dict) -> None:
  """A mixture-of-experts config, named as one (whatever its model_type)."""
  experts = {k: hf_config[k] for k in _EXPERT_KEYS if (hf_config.get(k) or 0) > 1}
  model_type = hf_config.get("model_type")
  if experts or model_type in _MOE_TYPES:
    counts = ", ".join(f"{k}={v}" for k, v in experts.items())
    raise errors.ConversionError(
        f"model_type={model_type!r} is a mixture of experts{f' ({counts})' if counts else ''}: "
        "each of its layers routes tokens among several MLPs, and our models have one dense "
        "MLP per block. Convert a dense model instead (Llama, Mistral, Qwen2 or Qwen3 "
        "*ForCausalLM; GPT-2, BERT, ViT)."
    )


def architecture(hf_config: dict, supported: dict, guessed: str) -> str:
  """The config's architecture (the first of `architectures`), or `guessed` when it names none."""
  names = hf_config.get("architectures") or [guessed]
  if names[0] not in supported:
    raise errors.ConversionError(
        f"Unsupported {hf_config.get('model_type')} architecture {names[0]!r}; supported: "
        f"{sorted(supported)}."
    )
  return names[0]


def labels(num_classes: int) -> dict:
  """`id2label`/`label2id` as `save_pretrained` writes them for `num_labels` classes."""
  id2label = {str(i): f"LABEL_{i}" for i in range(num_classes)}
  return {"id2label": id2label, "label2id": {v: int(k) for k, v in id2label.items()}}


def num_labels(hf_config: dict) -> int:
  if "id2label" in hf_config:
    return len(hf_config["id2label"])
  return int(hf_config.get("num_labels", 2))


def dtype_name(flat: dict) -> str:
  dtypes = {str(v.dtype) for v in flat.values()}
  return dtypes.pop() if len(dtypes) == 1 else "float32"
