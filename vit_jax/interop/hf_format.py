"""Hugging Face model directories: `config.json` + `model.safetensors` as `save_pretrained`
writes them (or the shards `model.safetensors.index.json` names), and the tokenizer
(`tokenizer.json`, see `assets`) when there is one. Needs neither torch nor transformers, and
never unpickles: a directory with only `pytorch_model.bin` is refused. The weights are read and
written a tensor at a time (`safetensors_files`)."""

import json
import os

from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.interop import assets
from vit_jax.interop import hf_bert
from vit_jax.interop import hf_gpt2
from vit_jax.interop import hf_llama
from vit_jax.interop import hf_rules
from vit_jax.interop import hf_vit
from vit_jax.interop import models
from vit_jax.interop import safetensors_files

FAMILIES = {  # by HF model_type
    "bert": hf_bert,
    "gpt2": hf_gpt2,
    "vit": hf_vit,
    **dict.fromkeys(hf_llama.MODEL_TYPES, hf_llama),
}
# Our GPT is GPT-2's with learned positions, else one of the Llama family (hf_llama.exports).
_BY_OUR_NAME = {**{n: hf_bert for n in hf_bert.OUR_NAMES}, "gpt": hf_gpt2, "vit": hf_vit}
# Hugging Face spells its config as our workdirs do; is_hf_dir tells the two apart.
HF_CONFIG = "config.json"


def is_hf_dir(path: str) -> bool:
  """A directory with config.json that is not one of our workdirs (they hold a config.json too)."""
  ours = (workdir_lib.CHECKPOINTS_DIR, workdir_lib.STATE_ITEM)
  return storage.isfile(storage.join(path, HF_CONFIG)) and not any(
      storage.isdir(storage.join(path, d)) for d in ours
  )


def read_config(path: str) -> dict:
  """config.json as a dict."""
  return json.loads(storage.read_text(storage.join(path, HF_CONFIG)))


def read(path: str) -> models.Checkpoint:
  config = read_config(path)
  hf_rules.refuse_experts(config)
  family = FAMILIES.get(config.get("model_type"))
  if family is None:
    raise errors.ConversionError(
        f"Unsupported Hugging Face model_type={config.get('model_type')!r} in {path}; supported: "
        f"{sorted(FAMILIES)}."
    )
  with safetensors_files.Tensors(path) as tensors:
    model, flat, notes = family.import_(config, tensors)
  tokenizer, tokenizer_notes = assets.read_hf_tokenizer(path, config)
  if tokenizer is not None:
    template = ", chat template" if tokenizer.chat_template is not None else ""
    notes.append(
        f"read the tokenizer ({assets.HF_TOKENIZER}, vocab {tokenizer.vocab_size}{template})"
    )
    notes += tokenizer_notes
    if tokenizer.vocab_size > model.get("vocab_size", tokenizer.vocab_size):
      raise errors.ConversionError(
          f"{path}: the tokenizer has {tokenizer.vocab_size} tokens, more than the model's "
          f"vocab_size={model['vocab_size']}; is {assets.HF_TOKENIZER} from another model?"
      )
  return models.Checkpoint(flat, model, notes, tokenizer)


def export(ckpt: models.Checkpoint) -> tuple[dict, dict]:
  """(HF config, {tensor name: function making it}) for our checkpoint; raises if the format
  cannot hold the model."""
  family = hf_llama if hf_llama.exports(ckpt.model) else _BY_OUR_NAME.get(ckpt.model["name"])
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
    safetensors_files.write(
        tensors, os.path.join(staged, safetensors_files.WEIGHTS), metadata={"format": "pt"}
    )
    return assets.write_hf_tokenizer(ckpt.tokenizer, staged)
