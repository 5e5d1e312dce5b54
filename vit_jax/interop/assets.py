"""What travels with the weights: the tokenizer, and the record of what the model is for.

Our workdirs keep the tokenizer in `W/tokenizer` (as training saves it) and the run's settings in
`W/config.json`, whose `task` tells `vit_jax.generate` how to run the model. A Hugging Face
directory keeps `tokenizer.json`, with its special tokens named in `tokenizer_config.json` or
`special_tokens_map.json` and their ids in `generation_config.json` and `config.json`, and a
chat model's template in `chat_template.jinja` or `tokenizer_config.json`; all of it travels with
our HfTokenizer (the template as its `chat_template`) into `W/tokenizer` and back.
"""

import json

import tokenizers as tokenizers_lib

from vit_jax import storage
from vit_jax import tasks
from vit_jax import workdir as workdir_lib
from vit_jax.data import tokenizers
from vit_jax.data.tokenizers import hf as hf_tokenizer

HF_TOKENIZER = "tokenizer.json"
_HF_TOKENIZER_CONFIG = "tokenizer_config.json"
_HF_GENERATION_CONFIG = "generation_config.json"


def read_workdir_tokenizer(workdir: str):
  """The workdir's saved tokenizer, or None when it has none (an image model)."""
  directory = workdir_lib.tokenizer_dir(workdir)
  if not storage.isfile(storage.join(directory, tokenizers.META_FILE)):
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


def _read_json(path: str, name: str) -> dict:
  full = storage.join(path, name)
  return json.loads(storage.read_text(full)) if storage.isfile(full) else {}


def read_hf_tokenizer(path: str, hf_config: dict) -> tuple:
  """(the directory's `tokenizer.json` as our HfTokenizer, or None without one; notes). Its
  special ids are the tokens the tokenizer files name, else the ids generation_config.json and
  config.json give; its chat template that of chat_template.jinja or tokenizer_config.json."""
  if not storage.isfile(storage.join(path, HF_TOKENIZER)):
    return None, []
  if storage.isfile(storage.join(path, tokenizers.META_FILE)):  # written by our export: exact ids
    return tokenizers.load_tokenizer(path), []
  raw = tokenizers_lib.Tokenizer.from_str(storage.read_text(storage.join(path, HF_TOKENIZER)))
  tokenizer_config = _read_json(path, _HF_TOKENIZER_CONFIG)
  named = {**_read_json(path, "special_tokens_map.json"), **tokenizer_config}  # the latter wins
  generation = _read_json(path, _HF_GENERATION_CONFIG)
  special_ids, notes = {}, []
  for special in tokenizers.SPECIAL_NAMES:
    text = _token_text(named.get(f"{special}_token"))
    token_id = raw.token_to_id(text) if isinstance(text, str) else None
    for source in (generation, hf_config):
      if token_id is None:
        token_id = source.get(f"{special}_token_id")
    if isinstance(token_id, list):  # Llama 3's chat models stop at any of several
      if len(token_id) > 1:
        notes.append(
            f"{special}_token_id is {token_id}: the tokenizer keeps the first "
            "(vit_jax.generate stops at one)"
        )
      token_id = token_id[0] if token_id else None
    if isinstance(token_id, int):
      special_ids[special] = token_id
  template = tokenizer_config.get("chat_template")
  if storage.isfile(storage.join(path, hf_tokenizer.CHAT_TEMPLATE_FILE)):
    template = storage.read_text(storage.join(path, hf_tokenizer.CHAT_TEMPLATE_FILE))
  if template is not None and not isinstance(template, str):
    notes.append("the chat templates by name in tokenizer_config.json were not carried")
    template = None
  return tokenizers.HfTokenizer(raw, special_ids, chat_template=template), notes


def write_hf_tokenizer(tokenizer, path: str) -> list:
  """Writes an HfTokenizer as `tokenizer.json` (+ `chat_template.jinja`, and
  `tokenizer_config.json` naming its special tokens and template, for
  `transformers.AutoTokenizer`); returns notes (other kinds are not written)."""
  if tokenizer is None:
    return []
  if tokenizer.kind != tokenizers.HfTokenizer.kind:
    return [
        f"the {tokenizer.kind!r} tokenizer was not written: Hugging Face directories hold "
        "a tokenizer.json (kind 'hf_tokenizers')"
    ]
  tokenizer.save(path)  # tokenizer.json, the template, and our meta file with the exact ids
  config = {"tokenizer_class": "PreTrainedTokenizerFast"}
  for special, token_id in tokenizer.special_ids.items():
    if token_id is not None:
      config[f"{special}_token"] = tokenizer.id_to_piece(token_id)
  if tokenizer.chat_template is not None:  # where transformers before chat_template.jinja reads
    config["chat_template"] = tokenizer.chat_template
  storage.write_text(
      storage.join(path, _HF_TOKENIZER_CONFIG), json.dumps(config, indent=2, sort_keys=True)
  )
  template = ", chat template" if tokenizer.chat_template is not None else ""
  return [f"wrote the tokenizer ({HF_TOKENIZER}, vocab {tokenizer.vocab_size}{template})"]
