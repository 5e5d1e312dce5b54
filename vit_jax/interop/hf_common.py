"""What the Hugging Face converters share: activation names and picking the architecture."""

from vit_jax.interop import common

# Hugging Face `hidden_act` / `activation_function` -> ours. "gelu" is the exact (erf) GELU;
# "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" all compute the tanh approximation.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
}
TO_HF_ACTIVATION = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


def activation(hf_config: dict, field: str, default: str) -> str:
  name = hf_config.get(field, default)
  if name not in ACTIVATIONS:
    raise common.ConversionError(f"Unsupported {field}={name!r}; supported: {sorted(ACTIVATIONS)}.")
  return ACTIVATIONS[name]


def architecture(hf_config: dict, supported: dict, guessed: str) -> str:
  """The config's architecture (the first of `architectures`), or `guessed` when it names none."""
  names = hf_config.get("architectures") or [guessed]
  if names[0] not in supported:
    raise common.ConversionError(
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
