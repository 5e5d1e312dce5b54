"""Small corpora written in each format a `files:` dataset reads (vit_jax/data/text/files.py):
the same documents as .txt files, jsonl (plain, gzip, zstd) and parquet, for tests that read,
prepare and train on them."""

import gzip
import json
import os

import numpy as np

from tests.data.text import tiny_text

EXTENSIONS = (".txt", ".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet")


def documents(count: int, seed: int = 0) -> list[str]:
  """`count` documents of 5 to 80 random words."""
  rng = np.random.default_rng(seed)
  return [" ".join(rng.choice(tiny_text.WORDS, int(rng.integers(5, 81)))) for _ in range(count)]


def extension_of(pattern: str) -> str:
  return next(e for e in sorted(EXTENSIONS, key=len, reverse=True) if pattern.endswith(e))


def write(pattern: str, docs: list[str], text_key: str = "text", files: int = 3) -> list[str]:
  """`docs`, in order, as files that `pattern` (FOLDER/*EXT) matches: one per document for .txt,
  else split over `files` files; jsonl records carry an `id` beside `text_key`, parquet files a
  column `id` and row groups of 7 rows. Returns the files written."""
  folder, ext = os.path.dirname(pattern), extension_of(pattern)
  os.makedirs(folder, exist_ok=True)
  if ext == ".txt":
    paths = [os.path.join(folder, f"doc{i:05d}.txt") for i in range(len(docs))]
    for path, doc in zip(paths, docs):
      with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
    return paths
  paths = []
  for k in range(files):
    part = docs[len(docs) * k // files : len(docs) * (k + 1) // files]
    first = len(docs) * k // files
    path = os.path.join(folder, f"part-{k:05d}{ext}")
    if ext == ".parquet":
      import pyarrow as pa  # pylint: disable=g-import-not-at-top
      import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

      ids = list(range(first, first + len(part)))
      pq.write_table(pa.table({"id": ids, text_key: part}), path, row_group_size=7)
    else:
      lines = "".join(
          json.dumps({"id": first + i, text_key: doc}) + "\n" for i, doc in enumerate(part)
      )
      write_jsonl(path, lines.encode("utf-8"))
    paths.append(path)
  return paths


def write_jsonl(path: str, data: bytes) -> None:
  """`data` as `path`, compressed as its extension says."""
  if path.endswith(".gz"):
    data = gzip.compress(data)
  elif path.endswith(".zst"):
    import zstandard  # pylint: disable=g-import-not-at-top

    data = zstandard.ZstdCompressor().compress(data)
  with open(path, "wb") as f:
    f.write(data)
