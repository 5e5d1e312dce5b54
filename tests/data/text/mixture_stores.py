"""Two small token stores of one tokenizer, for mixture tests: "web" (English paragraphs of the
embedded corpus) and "code" (Python source), prepared in this process by the store writer as
docs/text.md says: the first with the default character tokenizer trained on it, the second
with `tokenizer.path` naming the first's tokenizer folder."""

import argparse
import inspect
import json
import json.decoder
import os
import textwrap

from tests import tiny_configs
from vit_jax.data.text import corpus
from vit_jax.data.text import store_writer

TOKENIZER = {"kind": "char"}  # the web store's (the default), which a run repeats


def _paragraphs(path: str, paragraphs) -> str:
  """`paragraphs:PATH`, a file of `paragraphs` (every 20th is the validation split's)."""
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(p.strip() for p in paragraphs if p.strip()))
  return f"paragraphs:{path}"


def prepare(out: str, dataset: str, **tokenizer) -> str:
  config = tiny_configs.load("gpt", f"dataset={dataset},variant=pico")
  config.tokenizer.update(tokenizer)
  store_writer.prepare(config, out, workers=1, report=lambda _: None)
  return out


def make(directory: str) -> dict[str, str]:
  """{"web": store, "code": store} under `directory`."""
  os.makedirs(directory, exist_ok=True)
  web_text = corpus.split_documents("train")[:12]
  code_text = [inspect.getsource(m) for m in (argparse, json.decoder, textwrap)]
  code_text = [p for text in code_text for p in text.split("\n\n")]
  web = prepare(
      os.path.join(directory, "web"),
      _paragraphs(os.path.join(directory, "web.txt"), web_text),
      **TOKENIZER,
  )
  code = prepare(
      os.path.join(directory, "code"),
      _paragraphs(os.path.join(directory, "code.txt"), code_text),
      path=os.path.join(web, "tokenizer"),
  )
  return {"web": web, "code": code}


def stores_flag(stores: dict) -> str:
  return ",".join(f"{name}={path}" for name, path in stores.items())
