"""An embedded English text corpus built from what every Python install ships.

No download is ever needed: the documents are the Python reference manual
(`pydoc_data.topics`), the docstrings of the pure-Python standard library and
the Python license. The order is fixed (sorted topic names, sorted file walk),
so the same Python build always yields the same corpus; a different Python
version yields a slightly different one, which is why `corpus_fingerprint()`
exists.

Parsing the standard library takes about 2 CPU-seconds, which every process reading the corpus
would pay: the documents are kept in ~/.cache/vit_jax/embedded_corpus/ ($XDG_CACHE_HOME where
set), keyed by the Python build, this file and the size and time of every file read, and each
read is checked against the SHA-256 of the text written: anything else (none yet, another
Python, a damaged or half-written file, a home that cannot be written) parses the files again.

Each topic, module or license is one document, so packing can restart
positions per document and NSP can draw "next" segments from within one.
"""

import ast
import collections
import functools
import hashlib
import json
import math
import os
import sys
import sysconfig
import tempfile

from vit_jax import errors
from vit_jax import storage

# Every VALIDATION_EVERY-th document is held out (~5%).
VALIDATION_EVERY = 20

# Stdlib folders skipped: tests, vendored or generated code, and codec
# boilerplate whose docstrings are near-identical.
_SKIP_DIRS = frozenset(
    {
        "__pycache__",
        "test",
        "tests",
        "idle_test",
        "site-packages",
        "dist-packages",
        "lib-dynload",
        "lib2to3",
        "idlelib",
        "turtledemo",
        "ensurepip",
        "encodings",
        "pydoc_data",
        "__phello__",
    }
)
# Modules with fewer docstring characters than this add noise, not prose.
_MIN_MODULE_CHARS = 200


def _clean(text: str) -> str:
  """Drops tabs, carriage returns and trailing spaces; keeps line structure."""
  lines = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
  return "\n".join(line.rstrip() for line in lines.split("\n")).strip()


def _topic_documents() -> list[str]:
  from pydoc_data import topics  # pylint: disable=import-outside-toplevel

  return [_clean(topics.topics[name]) for name in sorted(topics.topics)]


def _module_docstrings(path: str) -> str:
  """Module, class and function docstrings of one file, in source order."""
  with open(path, encoding="utf-8", errors="replace") as f:
    source = f.read()
  try:
    tree = ast.parse(source)
  except SyntaxError:
    return ""
  nodes = [tree] + [
      node
      for node in ast.walk(tree)
      if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
  ]
  # ast.walk is breadth-first; sort by line so the text reads like the file.
  nodes.sort(key=lambda n: getattr(n, "lineno", 0))
  docs = (ast.get_docstring(node) for node in nodes)
  return "\n\n".join(_clean(d) for d in docs if d and d.strip())


def _stdlib_files() -> list[str]:
  """The standard library's .py files, in a fixed order."""
  stdlib = sysconfig.get_paths()["stdlib"]
  paths = []
  for root, dirs, files in os.walk(stdlib):
    # Sorting in place fixes the walk order, which the OS does not.
    dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("config-"))
    paths += [
        os.path.join(root, name)
        for name in sorted(files)
        if name.endswith(".py") and not name.startswith("_sysconfigdata")
    ]
  return paths


def _stdlib_documents(paths: list[str]) -> list[str]:
  documents = []
  for path in paths:
    text = _module_docstrings(path)
    if len(text) >= _MIN_MODULE_CHARS:
      documents.append(text)
  return documents


def _license_path() -> str:
  return os.path.join(sysconfig.get_paths()["stdlib"], "LICENSE.txt")


def _license_documents() -> list[str]:
  path = _license_path()
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8", errors="replace") as f:
    return [_clean(f.read())]


@functools.lru_cache(maxsize=1)
def documents() -> tuple[str, ...]:
  """All documents, in a fixed order: from the cache, else parsed (~2 s) and cached."""
  stdlib_files = _stdlib_files()
  cache = _cache_path(stdlib_files)
  cached = _read_cache(cache)
  if cached is not None:
    return cached
  docs = _topic_documents() + _stdlib_documents(stdlib_files) + _license_documents()
  # dict.fromkeys drops repeats (modules sharing docstrings), keeping order,
  # so no validation document also sits in train.
  docs = tuple(dict.fromkeys(d for d in docs if d))
  _write_cache(cache, docs)
  return docs


def _cache_path(stdlib_files: list[str]) -> str:
  """The cache file of the corpus that this Python, this file and those files make."""
  from pydoc_data import topics  # pylint: disable=import-outside-toplevel

  key = hashlib.sha256(sys.version.encode())
  with open(__file__, "rb") as f:  # how the documents are made
    key.update(f.read())
  for path in [topics.__file__, _license_path(), *stdlib_files]:
    try:
      size, mtime = storage.size_and_mtime(path)
    except OSError:
      size = mtime = -1
    key.update(f"\0{path}\0{size}\0{mtime}".encode())
  return os.path.join(storage.user_cache("embedded_corpus"), key.hexdigest()[:16] + ".json")


def _read_cache(path: str) -> tuple[str, ...] | None:
  """The documents in `path` where its text is the one written (`storage.with_digest`), else
  None."""
  try:
    with open(path, encoding="utf-8") as f:
      docs = json.loads(storage.without_digest(f.read()))
  except (OSError, ValueError):
    return None
  if not (isinstance(docs, list) and docs and all(isinstance(d, str) for d in docs)):
    return None
  return tuple(docs)


def _write_cache(path: str, docs: tuple[str, ...]) -> None:
  """Writes the documents whole or not at all, in place of any other Python's or version's; a
  cache that cannot be written is no error (the next process parses again)."""
  text = json.dumps(docs)
  folder = os.path.dirname(path)
  try:
    os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
  except OSError:
    return
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      f.write(storage.with_digest(text))
    os.replace(temporary, path)
    for name in os.listdir(folder):
      if name.endswith(".json") and name != os.path.basename(path):
        os.remove(os.path.join(folder, name))
  except OSError:
    if os.path.exists(temporary):
      os.remove(temporary)


def split_documents(split: str) -> tuple[str, ...]:
  """The 'train' (~95%) or 'validation' (~5%) documents."""
  docs = documents()
  held_out = lambda i: i % VALIDATION_EVERY == VALIDATION_EVERY - 1
  if split == "train":
    return tuple(d for i, d in enumerate(docs) if not held_out(i))
  if split in ("validation", "test"):
    return tuple(d for i, d in enumerate(docs) if held_out(i))
  raise errors.DataError(
      f"Unknown split {split!r} of the embedded corpus; use 'train' or " "'validation'."
  )


def corpus_fingerprint() -> str:
  """Hash of the corpus text; differs across Python versions."""
  digest = hashlib.sha256()
  for doc in documents():
    digest.update(doc.encode("utf-8"))
    digest.update(b"\0")
  return digest.hexdigest()[:16]


def unigram_char_entropy(texts) -> float:
  """Entropy in bits per character of the texts' character histogram.

  A model that ignores context entirely can reach this many bits per character
  at best; a language model that learned anything must go below it.
  """
  counts = collections.Counter()
  for text in texts:
    counts.update(text)
  total = sum(counts.values())
  if total == 0:
    raise ValueError("unigram_char_entropy needs non-empty texts.")
  return -sum(c / total * math.log2(c / total) for c in counts.values())


def validation_char_entropy() -> float:
  """Unigram character entropy (bits/char) of the validation split."""
  return unigram_char_entropy(split_documents("validation"))
