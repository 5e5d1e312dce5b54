"""A text dataset's split as tokens read by index (a token_store.Split): from the run's token
store, or tokenized in memory when the run starts.

    split = open_split("embedded", "train", kind="documents", tokenizer=tok)
    split = open_split("c4", "train", kind="documents", tokenizer=tok, token_store="gs://b/c4")

Datasets held in memory (the embedded corpus, files, toy tasks, the small TFDS ones) are
tokenized whole, once per run (`data.opened_once`), into the same layout a store has. A
streamed TFDS dataset is read only from a store: without one, the error gives the command that
makes it.
"""

from typing import Any, Optional, Sequence

import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax.config import args as config_args
from vit_jax.data.text import datasets
from vit_jax.data.text import token_store


def open_store(path: str, splits: Sequence[str] = ()) -> token_store.Store:
  """The token store at `path` (checked once per run; the files of `splits` too)."""
  return data.opened(
      ("token store", path, tuple(splits)), lambda: token_store.open_store(path, splits)
  )


def open_split(
    dataset: str,
    split: str,
    *,
    kind: str,
    tokenizer,
    token_store_path: Optional[str] = None,
    data_dir: Optional[str] = None,
) -> token_store.Split:
  """Split `split` of `dataset` as examples of `kind`: the store's where `token_store_path` names
  one (made from `dataset`), else tokenized in memory."""
  if token_store_path:
    return open_store(token_store_path).split(split)
  if datasets.is_streamed(dataset):
    raise not_prepared_error(dataset)
  key = ("text split", dataset, split, kind, tokenizer.fingerprint, data_dir)
  return data.opened(
      key,
      lambda: tokenize(
          datasets.memory_examples(dataset, split, kind=kind, data_dir=data_dir), kind, tokenizer
      ),
  )


def not_prepared_error(dataset: str) -> errors.DataError:
  return errors.DataError(
      f"dataset {dataset!r} is too big to tokenize at every start: tokenize it once into a token "
      f"store with `{config_args.prepare_command()}`, then train with "
      "--config.token_store=DIR (docs/text.md)."
  )


def tokenize(examples: Sequence[Any], kind: str, tokenizer) -> token_store.Split:
  """`examples` of `kind` (documents: str; pairs: (source, target); labeled: (texts, label)) as
  an in-memory split."""
  examples = list(examples)
  labels = None
  if kind == "documents":
    columns = [list(examples)]
  elif kind == "pairs":
    columns = [[s for s, _ in examples], [t for _, t in examples]]
  else:
    count = len(examples[0][0]) if examples else 1
    if any(len(texts) != count for texts, _ in examples):
      raise errors.DataError(f"labeled examples must all have {count} texts.")
    columns = [[texts[i] for texts, _ in examples] for i in range(count)]
    labels = [label for _, label in examples]
  encoded = [tokenizer.encode_batch(column) for column in columns]
  rows = [[np.asarray(e[i], np.int32) for e in encoded] for i in range(len(examples))]
  return token_store.in_memory(token_store.fields_of(kind, len(columns)), rows, labels)


def as_split(dataset: Any, kind: str, tokenizer, **open_args) -> token_store.Split:
  """A Split as it is; a dataset name opened (`open_split`); a list of examples tokenized."""
  if isinstance(dataset, token_store.Split):
    return dataset
  if isinstance(dataset, str):
    return open_split(dataset, kind=kind, tokenizer=tokenizer, **open_args)
  return tokenize(dataset, kind, tokenizer)
