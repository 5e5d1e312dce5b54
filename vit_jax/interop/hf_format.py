"""Hugging Face model directories: `config.json` + `model.safetensors` as `save_pretrained`
writes them (sharded `model.safetensors.index.json` is read too), and the tokenizer
(`tokenizer.json`, see `assets`) when there is one. Needs neither torch nor transformers, and
never unpickles: a directory with only `pytorch_model.bin` is refused."""

import json
import os

import numpy as np
import safetensors
from safetensors import numpy as safetensors_np

from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.interop import assets
from vit_jax.interop import hf_bert
from vit_jax.interop import hf_gpt2
from vit_jax.interop import hf_llama
from vit_jax.interop import hf_vit
from vit_jax.interop import models

FAMILIES = {  # by HF model_type
    "bert": hf_bert,
    "gpt2": hf_gpt2,
    "vit": hf_vit,
    **dict.fromkeys(hf_llama.MODEL_TYPES, hf_llama),  # read only, for now
}
_BY_OUR_NAME = {**{n: hf_bert for n in hf_bert.OUR_NAMES}, "gpt": hf_gpt2, "vit": hf_vit}
# Hugging Face spells its config as our workdirs do; is_hf_dir tells the two apart.
HF_CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"


def is_hf_dir(path: str) -> bool:
  """A directory with config.json that is not one of our workdirs (they hold a config.json too)."""
  ours = (workdir_lib.CHECKPOINTS_DIR, workdir_lib.STATE_ITEM)
  return storage.isfile(storage.join(path, HF_CONFIG)) and not any(
      storage.isdir(storage.join(path, d)) for d in ours
  )


def read_dir(path: str) -> tuple[dict, dict]:
  """(config.json as a dict, {tensor name: np.ndarray})."""
  config = json.loads(storage.read_text(storage.join(path, HF_CONFIG)))
  if storage.isfile(storage.join(path, WEIGHTS)):
    files = [WEIGHTS]
  elif storage.isfile(storage.join(path, INDEX)):
    files = sorted(
        set(json.loads(storage.read_text(storage.join(path, INDEX)))["weight_map"].values())
    )
  else:
    found = sorted(n for n in storage.listdir(path) if not n.startswith("."))
    raise errors.ConversionError(
        f"{path} has no {WEIGHTS} (or {INDEX}); found {found}. Only safetensors are read, never "
        "pickled .bin files: re-save the model with save_pretrained(dir) (safetensors by default)."
    )
  tensors = {}
  for name in files:
    try:
      with storage.local_copy(storage.join(path, name)) as local:
        tensors.update(safetensors_np.load_file(local))
    except (safetensors.SafetensorError, OSError, ValueError) as e:  # truncated or corrupted
      raise errors.ConversionError(
          f"Cannot read {storage.join(path, name)} as safetensors ({e}); "
          "the file is damaged: re-save or re-download it."
      ) from e
  return config, tensors


def read(path: str) -> models.Checkpoint:
  config, tensors = read_dir(path)
  family = FAMILIES.get(config.get("model_type"))
  if family is None:
    raise errors.ConversionError(
        f"Unsupported Hugging Face model_type={config.get('model_type')!r} in {path}; supported: "
        f"{sorted(FAMILIES)}."
    )
  model, flat, notes = family.import_(config, tensors)
  tokenizer = assets.read_hf_tokenizer(path, config)
  if tokenizer is not None:
    notes.append(f"read the tokenizer ({assets.HF_TOKENIZER}, vocab {tokenizer.vocab_size})")
    if tokenizer.vocab_size > model.get("vocab_size", tokenizer.vocab_size):
      raise errors.ConversionError(
          f"{path}: the tokenizer has {tokenizer.vocab_size} tokens, more than the model's "
          f"vocab_size={model['vocab_size']}; is {assets.HF_TOKENIZER} from another model?"
      )
  return models.Checkpoint(flat, model, notes, tokenizer)


def export(ckpt: models.Checkpoint) -> tuple[dict, dict]:
  """(HF config, tensors) for our checkpoint; raises if the format cannot hold the model."""
  family = _BY_OUR_NAME.get(ckpt.model["name"])
  if family is None:
    raise errors.ConversionError(
        f"No Hugging Face format for our model {ckpt.model['name']!r}; "
        f"supported: {sorted(_BY_OUR_NAME)}."
    )
  return family.export(ckpt.model, ckpt.params)


def write(ckpt: models.Checkpoint, path: str, overwrite: bool = False) -> list:
  """Writes the directory (with the tokenizer if it is an HfTokenizer); returns notes."""
  config, tensors = export(ckpt)  # every check happens before anything is written
  ids = ckpt.tokenizer.special_ids if ckpt.tokenizer is not None else {}
  for special in ("bos", "eos", "pad"):  # what transformers' generate and padding look up
    if config.get(f"{special}_token_id") is None and ids.get(special) is not None:
      config[f"{special}_token_id"] = ids[special]
  with storage.output_path(path, overwrite) as staged:  # a local folder
    os.makedirs(staged)
    with open(os.path.join(staged, HF_CONFIG), "w", encoding="utf-8") as f:
      json.dump(config, f, indent=2, sort_keys=True)
    safetensors_np.save_file(
        {k: np.ascontiguousarray(v) for k, v in tensors.items()},
        os.path.join(staged, WEIGHTS),
        metadata={"format": "pt"},
    )
    return assets.write_hf_tokenizer(ckpt.tokenizer, staged)
