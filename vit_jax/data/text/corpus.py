"""An embedded English text corpus built from what every Python install ships.

No download is ever needed: the documents are the Python reference manual
(`pydoc_data.topics`), the docstrings of the pure-Python standard library and
the Python license. The order is fixed (sorted topic names, sorted file walk),
so the same Python build always yields the same corpus; a different Python
version yields a slightly different one, which is why `corpus_fingerprint()`
exists.

Each topic, module or license is one document, so packing can restart
positions per document and NSP can draw "next" segments from within one.
"""

import ast
import collections
import functools
import hashlib
import math
import os
import sysconfig

from vit_jax import errors

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


def _stdlib_documents() -> list[str]:
  stdlib = sysconfig.get_paths()["stdlib"]
  documents = []
  for root, dirs, files in os.walk(stdlib):
    # Sorting in place fixes the walk order, which the OS does not.
    dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("config-"))
    for name in sorted(files):
      if not name.endswith(".py") or name.startswith("_sysconfigdata"):
        continue
      text = _module_docstrings(os.path.join(root, name))
      if len(text) >= _MIN_MODULE_CHARS:
        documents.append(text)
  return documents


def _license_documents() -> list[str]:
  path = os.path.join(sysconfig.get_paths()["stdlib"], "LICENSE.txt")
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8", errors="replace") as f:
    return [_clean(f.read())]


@functools.lru_cache(maxsize=1)
def documents() -> tuple[str, ...]:
  """All documents, in a fixed order (parsing the stdlib takes ~2 s, once)."""
  docs = _topic_documents() + _stdlib_documents() + _license_documents()
  # dict.fromkeys drops repeats (modules sharing docstrings), keeping order,
  # so no validation document also sits in train.
  return tuple(dict.fromkeys(d for d in docs if d))


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
