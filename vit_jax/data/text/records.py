"""What one record of a text dataset holds, read by the config's keys: a document's text
(`text_key`), or a pair's source and target (`source_key`, `target_key`), out of a JSON object (a
jsonl line), a parquet row or an hf: dataset's row; a Bad saying why a record holds neither.

A key names a field (a column), or with dots a field inside a struct (`meta.title`). A pair's key
that a record lacks names a language of its `translation` struct where it has one: the layout WMT
and OPUS corpora are published in on the Hugging Face hub, `{"translation": {"de": ..., "en":
...}}`, read with source_key=de and target_key=en.

A record is a bad document (which --config.bad_documents refuses or skips) where a key is missing,
its value is not a string (a null included), or its text holds a character no text holds
(`text_problem`); a pair is one also where its source or target is empty, as nothing can be
learnt from it.
"""

import dataclasses
import re
import sys
from typing import Mapping, Optional, Union

from vit_jax import errors

TRANSLATION = "translation"  # the hub's translation struct: {language code: text}
WARN_AT_MOST = 10  # bad documents named one by one per process; the rest are counted
_warned = set()  # the bad documents named so far (their `where`), and the counts said

# What no document's text holds: control characters, as binary data holds (not tab, newline, \v,
# \f or \r), and lone surrogates (half of a UTF-16 pair, as a JSON "\ud83d" alone gives: not
# Unicode text, and no tokenizer encodes it).
_NOT_TEXT = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\ud800-\udfff]")


def text_problem(text: str) -> Optional[str]:
  """The first character of `text` that no document's text holds, described ("control
  character '\\x00' at character 5"), or None."""
  bad = _NOT_TEXT.search(text)
  if bad is None:
    return None
  kind = "lone surrogate" if "\ud800" <= bad.group() <= "\udfff" else "control character"
  return f"{kind} {bad.group()!r} at character {bad.start()}"


@dataclasses.dataclass(frozen=True)
class Bad:
  """A record that holds no document or pair: where it is and why."""

  where: str  # "FILE line 7", "FILE row 12"
  problem: str
  fields: Optional[tuple[str, ...]] = None  # a record without a key: the fields it has there


@dataclasses.dataclass(frozen=True)
class Keys:
  """The keys a record is read by: (text_key,) for a document, (source_key, target_key) for a
  pair."""

  names: tuple[str, ...]

  @property
  def pairs(self) -> bool:
    return len(self.names) == 2

  @property
  def flags(self) -> str:
    """The config keys that name them, for a message's fix."""
    if self.pairs:
      return "--config.source_key and --config.target_key"
    return "--config.text_key"


def keys_of(options) -> Keys:
  """The keys data.ReadOptions `options` read records by."""
  if options.source_key is not None or options.target_key is not None:
    return Keys((options.source_key, options.target_key))
  return Keys((options.text_key,))


Record = Union[str, tuple[str, str], Bad]


# ---- Where a key's value is -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Missing:
  """Why a record (or a schema) has no value for a key, and the fields it has where it looked."""

  problem: str
  fields: tuple[str, ...]


def resolve(shape: Mapping, key: str, pairs: bool, noun: str = "field"):
  """The path of names to `key`'s value in a record of `shape` (a record itself, or a schema
  whose structs are mappings), or a Missing saying why it has none. `noun` names a top-level
  name in the message: a jsonl record's field, a parquet file's column."""
  if key in shape:
    return (key,)
  head, *rest = key.split(".")
  if rest and head in shape:
    node, path = shape[head], [head]
    for name in rest:
      if not isinstance(node, Mapping):
        return Missing(f"has no {key!r}: its {'.'.join(path)!r} is not a struct", ())
      if name not in node:
        where = ".".join(path)
        return Missing(f"has no {name!r} in its {where!r} (it has: {_names(node)})", tuple(node))
      node, path = node[name], path + [name]
    return tuple(path)
  languages = shape.get(TRANSLATION) if pairs else None
  if isinstance(languages, Mapping):
    if key in languages:
      return (TRANSLATION, key)
    return Missing(
        f"has no language {key!r} in its {TRANSLATION!r} (its languages: {_names(languages)})",
        tuple(languages),
    )
  return Missing(f"has no {noun} {key!r} (its {noun}s: {_names(shape)})", tuple(shape))


def _names(mapping: Mapping) -> str:
  return ", ".join(map(str, mapping)) or "none"


def value_at(record: Mapping, path: tuple[str, ...]):
  """The value at `path` in `record` (None where a struct on the way is null or lacks it)."""
  for name in path:
    if not isinstance(record, Mapping):
      return None
    record = record.get(name)
  return record


# ---- A jsonl line -----------------------------------------------------------------------------


def _json_type(value) -> str:
  names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
  if value is None:
    return "null"
  return names.get(type(value), "a number")


def from_json(path: str, number: int, line: bytes, keys: Keys) -> Record:
  """The document or pair of one jsonl line, or a Bad saying why it has none."""
  from vit_jax.data import jsonl  # pylint: disable=g-import-not-at-top

  where = f"{path} line {number}"
  try:
    record = jsonl.parse(line)
  except ValueError as e:
    return Bad(where, str(e))
  if not isinstance(record, dict):
    return Bad(where, f"is {_json_type(record)}, not a JSON object")
  texts = []
  for key in keys.names:
    found = resolve(record, key, keys.pairs)
    if isinstance(found, Missing):
      return Bad(where, found.problem, found.fields)
    name, value = ".".join(found), value_at(record, found)
    if not isinstance(value, str):
      return Bad(where, f"its field {name!r} is {_json_type(value)}, not a string")
    bad = _bad_text(where, f"its field {name!r}", value, keys)
    if bad:
      return bad
    texts.append(value)
  return tuple(texts) if keys.pairs else texts[0]


def _bad_text(where: str, field: str, value: str, keys: Keys) -> Optional[Bad]:
  """Why the text `value` of `field` ("its field 'x'", "its 'x'") is a bad document, or None: a
  pair's empty side, or what `text_problem` finds."""
  if keys.pairs and not value:
    return Bad(where, f"{field} is empty")
  problem = text_problem(value)
  return Bad(where, f"{field} holds {problem}") if problem else None


# ---- A row of columns (parquet, an hf: dataset) -----------------------------------------------


def from_row(where: str, row: Mapping, paths, keys: Keys) -> Record:
  """The document or pair of one row ({column: its Python value}), its keys' values at `paths`
  (`resolve`d on the schema, whose types were checked), or a Bad saying why it has none."""
  texts = []
  for path in paths:
    name, value = ".".join(path), value_at(row, path)
    if value is None:
      return Bad(where, f"its {name!r} is null")
    if isinstance(value, bytes):  # a string that is not UTF-8 (data/parquet.py)
      try:
        value.decode("utf-8")
      except UnicodeDecodeError as e:
        byte = f"0x{value[e.start]:02x} at offset {e.start}"
        return Bad(where, f"its {name!r} is not UTF-8 (byte {byte})")
    bad = _bad_text(where, f"its {name!r}", value, keys)
    if bad:
      return bad
    texts.append(value)
  return tuple(texts) if keys.pairs else texts[0]


# ---- Bad documents ----------------------------------------------------------------------------


class BadDocuments:
  """Bad documents (or pairs) met while reading `name`: the first is an error
  (bad_documents="error"), or each is counted, the first WARN_AT_MOST of a process named in a
  warning each, and their count said once per `what` (a split) read."""

  def __init__(self, name: str, what: str, bad_documents: Optional[str], warn: bool = True):
    self.name, self.what, self.skip, self.warn = name, what, bad_documents == "skip", warn
    self.count = 0

  def add(self, bad: Bad) -> None:
    if not self.skip:
      raise errors.DataError(
          f"{bad.where}: {bad.problem}; fix or remove it, or skip such documents with "
          "--config.bad_documents=skip."
      )
    self.count += 1
    if self.warn and len(_warned) < WARN_AT_MOST and bad.where not in _warned:
      _warned.add(bad.where)
      print(f"warning: skipping {bad.where}: {bad.problem}", file=sys.stderr, flush=True)

  def done(self) -> None:
    said = (self.name, self.what, self.count)
    if self.warn and self.count and said not in _warned:
      _warned.add(said)
      print(
          f"warning: {self.name}: {self.count:,} bad document{'s' * (self.count != 1)} "
          f"skipped ({self.what}; "
          "--config.bad_documents=skip).",
          file=sys.stderr,
          flush=True,
      )
