"""What travels with the weights: the tokenizer, and the record of what the model is for.

Our workdirs keep the tokenizer in `W/tokenizer` (as training saves it) and the run's settings in
`W/config.json`, whose `task` tells `vit_jax.generate` how to run the model. A Hugging Face
directory keeps `tokenizer.json`, with its special tokens named in `tokenizer_config.json` or
`special_tokens_map.json` and their ids in `config.json`.
"""

import json

import tokenizers as tokenizers_lib

from vit_jax import storage
from vit_jax import tasks
from vit_jax import workdir as workdir_lib
from vit_jax.data import tokenizers
from vit_jax.data.tokenizers import base

HF_TOKENIZER = "tokenizer.json"
_HF_TOKENIZER_CONFIG = "tokenizer_config.json"


def read_workdir_tokenizer(workdir: str):
  """The workdir's saved tokenizer, or None when it has none (an image model)."""
  directory = workdir_lib.tokenizer_dir(workdir)
  if not storage.isfile(storage.join(directory, base.META_FILE)):
    return None
  return tokenizers.load_tokenizer(directory)


def write_workdir_assets(workdir: str, model: dict, tokenizer) -> None:
  """`W/tokenizer` and a `W/config.json` naming the task, for a workdir that convert writes."""
  if tokenizer is not None:
    tokenizer.save(workdir_lib.tokenizer_dir(workdir))
  record = {
      "task": tasks.task_of_model(model["name"]),
      "model": model,
      "written_by": "vit_jax.convert (weights only: no training settings)",
  }
  storage.write_text(workdir_lib.config_path(workdir), json.dumps(record, indent=2, sort_keys=True))


def _token_text(value):
  """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
  return value.get("content") if isinstance(value, dict) else value


def read_hf_tokenizer(path: str, hf_config: dict):
  """The directory's `tokenizer.json` as our HfTokenizer (None without one), its special ids
  taken from the directory's own files where they say which token is which."""
  if not storage.isfile(storage.join(path, HF_TOKENIZER)):
    return None
  meta = storage.join(path, base.META_FILE)  # written by our export: the exact special ids
  if storage.isfile(meta):
    return tokenizers.load_tokenizer(path)
  raw = tokenizers_lib.Tokenizer.from_str(storage.read_text(storage.join(path, HF_TOKENIZER)))
  named = {}
  for name in ("special_tokens_map.json", _HF_TOKENIZER_CONFIG):  # the latter wins
    if storage.isfile(storage.join(path, name)):
      saved = json.loads(storage.read_text(storage.join(path, name)))
      named.update({k: _token_text(v) for k, v in saved.items()})
  special_ids = {}
  for special in base.SPECIAL_NAMES:  # the token named, else the id config.json gives
    text = named.get(f"{special}_token")
    token_id = raw.token_to_id(text) if isinstance(text, str) else None
    if token_id is None:
      token_id = hf_config.get(f"{special}_token_id")
    if isinstance(token_id, int):
      special_ids[special] = token_id
  return tokenizers.HfTokenizer(raw, special_ids)


def write_hf_tokenizer(tokenizer, path: str) -> list:
  """Writes an HfTokenizer as `tokenizer.json` (+ `tokenizer_config.json` naming its special
  tokens, for `transformers.AutoTokenizer`); returns notes (other kinds are not written)."""
  if tokenizer is None:
    return []
  if tokenizer.kind != tokenizers.HfTokenizer.kind:
    return [
        f"the {tokenizer.kind!r} tokenizer was not written: Hugging Face directories hold "
        "a tokenizer.json (kind 'hf_tokenizers')"
    ]
  tokenizer.save(path)  # tokenizer.json, and our meta file with the exact special ids
  config = {"tokenizer_class": "PreTrainedTokenizerFast"}
  for special, token_id in tokenizer.special_ids.items():
    if token_id is not None:
      config[f"{special}_token"] = tokenizer.id_to_piece(token_id)
  storage.write_text(
      storage.join(path, _HF_TOKENIZER_CONFIG), json.dumps(config, indent=2, sort_keys=True)
  )
  return [f"wrote the tokenizer ({HF_TOKENIZER}, vocab {tokenizer.vocab_size})"]
