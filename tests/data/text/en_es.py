"""A small parallel corpus of real sentences: 200 short English-Spanish pairs (en_es.tsv), written
in the layouts pairs are read from: jsonl (plain, gzip, zstd) and parquet files with two fields, and
a Hugging Face hub folder with a `translation` column (as WMT and OPUS corpora are published) or
two text columns, written by the `datasets` library itself.

Every 20th pair is held out as validation (what files: does with any file), so every layout holds
the same 190 training and 10 validation pairs."""

import json
import os

from tests.data import hub_data
from tests.data.text import corpora
from vit_jax.data.text import files

TSV = os.path.join(os.path.dirname(__file__), "en_es.tsv")


def pairs() -> list[tuple[str, str]]:
  """The 200 (English, Spanish) pairs, in the file's order."""
  with open(TSV, encoding="utf-8") as f:
    return [tuple(line.rstrip("\n").split("\t")) for line in f]


def split(name: str, corpus=None) -> list[tuple[str, str]]:
  """The pairs of split `name` ('train', 'validation') as files: reads them."""
  corpus = pairs() if corpus is None else corpus
  return [p for i, p in enumerate(corpus) if files.in_split(i, name)]


def write_files(pattern: str, *, keys=("en", "es"), translation=False, corpus=None, parts=2):
  """The pairs as `parts` files that `pattern` (FOLDER/*.jsonl[.gz|.zst] or *.parquet) matches:
  each record with the fields `keys`, or with translation=True a `translation` struct of the two
  languages; an `id` beside them. Returns the files written."""
  corpus = pairs() if corpus is None else corpus
  folder, ext = os.path.dirname(pattern), corpora.extension_of(pattern)
  os.makedirs(folder, exist_ok=True)
  written = []
  for k in range(parts):
    first, last = len(corpus) * k // parts, len(corpus) * (k + 1) // parts
    rows = [_record(i, *corpus[i], keys, translation) for i in range(first, last)]
    path = os.path.join(folder, f"part-{k:05d}{ext}")
    if ext == ".parquet":
      import pyarrow as pa  # pylint: disable=g-import-not-at-top
      import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

      pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=16)
    else:
      lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
      corpora.write_jsonl(path, lines.encode("utf-8"))
    written.append(path)
  return written


def _record(i: int, en: str, es: str, keys, translation: bool) -> dict:
  if translation:
    return {"id": i, "translation": dict(zip(keys, (en, es)))}
  return {"id": i, **dict(zip(keys, (en, es)))}


def write_hub(root, *, keys=("en", "es"), translation=True, corpus=None, subset=None) -> str:
  """The pairs as a hub-layout folder (data/SPLIT-00000-of-00001.parquet, or SUBSET/... with a
  README.md naming the subset) with train and validation splits: a `translation` column of the
  two languages `keys` (the library's Translation feature), or with translation=False two string
  columns named `keys`."""
  lib = hub_data.datasets_library()
  corpus = pairs() if corpus is None else corpus
  for name in ("train", "validation"):
    chosen = split(name, corpus)
    if translation:
      features = lib.Features(
          {"id": lib.Value("int64"), "translation": lib.Translation(languages=list(keys))}
      )
      columns = {
          "id": list(range(len(chosen))),
          "translation": [dict(zip(keys, pair)) for pair in chosen],
      }
    else:
      features = None
      columns = {"id": list(range(len(chosen)))}
      columns.update({key: [pair[i] for pair in chosen] for i, key in enumerate(keys)})
    rows = lib.Dataset.from_dict(columns, features=features)
    hub_data.write_split(rows, os.path.join(str(root), subset or "data"), name, 1)
  if subset:
    hub_data.write_readme(root, subset, ("train", "validation"))
  return str(root)
