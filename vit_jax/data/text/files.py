"""Text documents, or pairs of texts, from files, each file read by its extension: the `files:`
and `paragraphs:` datasets (vit_jax/data/text/datasets.py FILE_PREFIXES).

    files:/data/books/*.txt              one document per file (none for a blank file)
    paragraphs:/data/books/*.txt         .txt files split at blank lines
    files:/data/web/*.jsonl              one document per non-blank line: the string field
    files:/data/web/*.jsonl.gz           of its JSON object that --config.text_key names
    files:/data/web/*.jsonl.zst          (default: text)
    files:/data/web/*.parquet            one document per row: the column text_key names

With --config.source_key and --config.target_key set, a jsonl line or a parquet row is a pair of
texts, (source, target), read from those two fields (vit_jax/data/text/records.py: what a record
holds, and when it holds none); .txt files hold no pairs.

The pattern is a local path or gs://... (`*`, `?`, `[...]`, `**`: storage.glob). The files are
read in sorted path order, each through vit_jax/storage by its format's reader
(vit_jax/data/jsonl.py, vit_jax/data/parquet.py), imported only when a file needs it. How they
are read comes in the config's `read_options` (data.read_options): the text's field or column
(`text_key`, or a pair's `source_key` and `target_key`) and what a bad document is
(`bad_documents`).

Positions and splits. Each document has a position: its place in that order. The position alone
decides the split: every 20th (position % 20 == 19) is validation (and test), the others train;
'all' is every one. A bad document keeps its position, so that with --config.bad_documents=skip
it is left out (warned about, counted) and every other document stays in its split. A bad
document is a line that is not a JSON object (or not UTF-8), a record without the text field or
whose field is not a string, a null row or one that is not UTF-8, text with a character no text
holds (records.text_problem: a control character, the rule that refuses a .txt file as binary, or
a lone surrogate, half of a UTF-16 pair, as a JSON "\\ud83d" alone gives), and a pair whose
source or target is empty.

A file that cannot be read whole is an error whatever bad_documents says, never a dataset of
fewer documents than it holds: a compressed file whose stream is damaged, truncated or fails its
checks (vit_jax/data/jsonl.py) is named with the line after which it is damaged, and a parquet
file whose footer cannot be read or a row group of it that does not decode is named too.

A file's format and its codec come from its extension, in any case (`FORMATS`: part-0.JSONL.ZST
is zstd-compressed jsonl). A parquet text column holds strings (string, large_string,
string_view) or a dictionary of them (what pandas writes for a `category` column).

Reading. A small dataset is read whole when a run starts (`documents`). `python -m
vit_jax.prepare` reads a big one twice, streaming: first every file is read in parallel to count
its documents and to refuse bad ones (or warn of them) before anything is written (`scan`);
then each shard of the token store, a contiguous part of a split, reads its range of positions,
starting at its own file (`documents` with the inventory): a parquet file at its first row group
in the range, a jsonl file decompressed from its start (the lines before are not parsed).
"""

import contextlib
import dataclasses
import glob as glob_lib
import multiprocessing
import os
import re
from typing import Callable, Iterator, Optional

from vit_jax import data
from vit_jax import errors
from vit_jax import storage
from vit_jax.data.text import corpus
from vit_jax.data.text import records

# a file's (format, codec: how it is compressed), by how its name ends, in any case
FORMATS = {
    ".txt": ("txt", None),
    ".jsonl": ("jsonl", None),
    ".jsonl.gz": ("jsonl", "gzip"),
    ".jsonl.zst": ("jsonl", "zstd"),
    ".parquet": ("parquet", None),
}
SPLITS = ("train", "validation", "test", "all")
EVERY = corpus.VALIDATION_EVERY


def _options(read_options: Optional[data.ReadOptions]) -> data.ReadOptions:
  """`read_options`, or none given: .txt files need none, and a jsonl or parquet file read
  without a key is our bug (`_read_file`); bad documents are then an error."""
  return read_options or data.ReadOptions()


def _extension(path: str) -> Optional[str]:
  """The key of FORMATS that `path` ends with, whatever its case; None for another file."""
  lower = path.lower()
  return next((ext for ext in FORMATS if lower.endswith(ext)), None)


def format_of(path: str) -> Optional[str]:
  ext = _extension(path)
  return FORMATS[ext][0] if ext else None


def codec_of(path: str) -> Optional[str]:
  """How `path` is compressed (jsonl.CODECS): None, "gzip" or "zstd"."""
  ext = _extension(path)
  return FORMATS[ext][1] if ext else None


# ---- Positions and splits --------------------------------------------------------------------


def check_split_name(name: str, split: str) -> None:
  if split not in SPLITS:
    raise errors.DataError(
        f"Unknown split {split!r} for {name!r}; use 'train', 'validation' or 'all'."
    )


def in_split(position: int, split: str) -> bool:
  if split == "all":
    return True
  held_out = position % EVERY == EVERY - 1
  return held_out if split in ("validation", "test") else not held_out


def split_size(positions: int, split: str) -> int:
  """How many of `positions` documents fall in `split`."""
  if split == "all":
    return positions
  held_out = positions // EVERY
  return held_out if split in ("validation", "test") else positions - held_out


def position_of(index: int, split: str) -> int:
  """The position of the `index`-th document of `split`."""
  if split == "all":
    return index
  if split in ("validation", "test"):
    return EVERY * index + EVERY - 1
  return EVERY * (index // (EVERY - 1)) + index % (EVERY - 1)


# ---- The files -------------------------------------------------------------------------------


def paths(name: str) -> list[str]:
  """The files dataset `name` reads, sorted; a DataError for a pattern that matches none, or
  files of a format that cannot be read."""
  prefix, pattern = name.split(":", 1)
  found = storage.glob(pattern)
  if not storage.is_remote(pattern):
    expanded = os.path.expanduser(pattern)
    for path in sorted(glob_lib.glob(expanded, recursive=True)):
      if os.path.isdir(path) and format_of(path):
        ext = path[-len(_extension(path)) :]
        raise errors.DataError(
            f"dataset {name!r}: {path} is not a regular file (a folder?); name files, e.g. "
            f"{prefix}:{os.path.join(path, '*' + ext)}."
        )
    for path in found:
      if not os.access(path, os.R_OK):
        raise errors.DataError(f"dataset {name!r}: {path} is not readable; fix its permissions.")
  if not found:
    raise errors.DataError(f"dataset {name!r}: no files match {pattern!r}; check the path.")
  others = [p for p in found if format_of(p) is None]
  if others:
    more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
    raise errors.DataError(
        f"dataset {name!r}: {others[0]}{more} is not of a format text is read from: "
        f"{', '.join(FORMATS)}; narrow the pattern to such files."
    )
  if prefix == "paragraphs":
    not_txt = [p for p in found if format_of(p) != "txt"]
    if not_txt:
      raise errors.DataError(
          f"dataset {name!r}: paragraphs: splits .txt files at blank lines, and {not_txt[0]} is "
          f"not one; read jsonl and parquet files with files:{pattern}."
      )
  return found


def decode_text(path: str, data: bytes) -> str:
  """A .txt file's text: UTF-8 without control bytes, or a DataError naming the first bad one."""
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise errors.DataError(
        f"{path} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); convert "
        "it, e.g. iconv -f latin1 -t utf-8, or leave it out of the pattern."
    ) from None
  problem = records.text_problem(text)  # strict UTF-8 holds no surrogates: a control character
  if problem:
    raise errors.DataError(f"{path} looks binary ({problem}); leave it out of the pattern.")
  return text


def paragraphs(text: str) -> list[str]:
  return [p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip()]


# ---- Documents of one file -------------------------------------------------------------------


def _unreadable(e: Exception) -> errors.DataError:
  """The error of a file that cannot be read whole (a damaged compressed stream, a parquet file
  or row group that does not decode): never a dataset of fewer documents, whatever
  bad_documents says."""
  return errors.DataError(
      f"{e}; download or compress the file again, or leave it out of the pattern."
  )


def _column_paths(f, keys: records.Keys) -> list[tuple[str, ...]]:
  """The path to each key's text column in parquet file `f`; a DataError unless it has them."""
  from vit_jax.data import parquet  # pylint: disable=g-import-not-at-top

  what = "the source and target columns" if keys.pairs else "the text column"
  paths = []
  for key in keys.names:
    path = records.resolve(f.shape, key, keys.pairs, noun="column")
    if isinstance(path, records.Missing):
      raise errors.DataError(f"{f.path} {path.problem}; name {what} with {keys.flags}.")
    kind = records.value_at(f.shape, path)
    if isinstance(kind, dict) or not parquet.is_text(kind):
      raise errors.DataError(
          f"{f.path}: column {'.'.join(path)!r} holds {kind}, not text; name {what} with "
          f"{keys.flags}."
      )
    paths.append(path)
  return paths


def _read_file(path, prefix, keys, start, begin, end, wanted):
  """(position, document, pair or Bad) of each record of `path` (its first at position `start`)
  at a position in [begin, end) that `wanted` keeps; returns the file's record count (None: not
  known, reading stopped at `end`). A file that cannot be read whole is a DataError."""
  kind = format_of(path)
  if kind != "txt" and keys.names[0] is None:
    raise ValueError(f"{path}: a {kind} file is read by the config's read_options' keys.")
  if kind == "txt":
    text = decode_text(path, storage.read_bytes(path))
    docs = paragraphs(text) if prefix == "paragraphs" else [text] if text.strip() else []
    for position, doc in enumerate(docs, start):
      if position >= begin and (end is None or position < end) and wanted(position):
        yield position, doc
    return len(docs)
  if kind == "jsonl":
    return (yield from _read_jsonl(path, keys, start, begin, end, wanted))
  return (yield from _read_parquet(path, keys, start, begin, end, wanted))


def _read_jsonl(path, keys, start, begin, end, wanted):
  from vit_jax.data import jsonl  # pylint: disable=g-import-not-at-top

  codec = codec_of(path)
  checked = codec is None  # a plain file has no compressed stream to check
  position = start
  try:
    for number, line in jsonl.lines(path, codec):
      if end is not None and position >= end:
        return None
      if position >= begin and wanted(position):
        text = records.from_json(path, number, line, keys)
        if isinstance(text, records.Bad) and not checked:
          # damage decodes to bad lines before the stream's check fails: the damage is the error
          for _ in jsonl.lines(path, codec):
            pass
          checked = True
        yield position, text
      position += 1
  except jsonl.DamagedError as e:
    raise _unreadable(e) from None
  return position - start


def _read_parquet(path, keys, start, begin, end, wanted):
  from vit_jax.data import parquet  # pylint: disable=g-import-not-at-top

  try:
    with parquet.File(path) as f:
      paths = _column_paths(f, keys)
      columns = list(dict.fromkeys(p[0] for p in paths))
      first = start
      for group, rows in enumerate(f.row_counts):
        lo, hi = max(begin, first), first + rows if end is None else min(end, first + rows)
        positions = [p for p in range(lo, hi) if wanted(p)]
        if positions:
          values = f.read(columns, group, lo - first, hi - first)
          for p in positions:
            row = {c: values[c][p - lo] for c in columns}
            yield p, records.from_row(f"{path} row {p - start + 1}", row, paths, keys)
        first += rows
      return f.num_rows
  except parquet.UnreadableError as e:
    raise _unreadable(e) from None


def _read_files(name, files, counts, begin, end, wanted, keys):
  """(position, text or Bad) of the documents of `files` at positions [begin, end) that `wanted`
  keeps. `counts`: each file's documents (an inventory's), to skip the files before `begin`
  unread and to notice a file that changed; None: every file is read, in order."""
  prefix = name.split(":", 1)[0]
  start = 0
  for i, path in enumerate(files):
    known = None if counts is None else counts[i]
    if known is not None and start + known <= begin:
      start += known
      continue
    if end is not None and start >= end:
      return
    count = yield from _read_file(path, prefix, keys, start, begin, end, wanted)
    if known is not None and count is not None and count != known:
      raise errors.DataError(
          f"{path} holds {count} documents now, {known} when the token store's preparation "
          "began: it changed since; prepare the store again into a new --output."
      )
    if count is None:
      return  # stopped at `end`
    start += count


# ---- A dataset's documents -------------------------------------------------------------------


def documents(
    name: str,
    split: str,
    read_options: Optional[data.ReadOptions] = None,
    *,
    shard: int = 0,
    shard_count: int = 1,
    inventory: Optional["Inventory"] = None,
    warn: bool = True,
) -> Iterator:
  """The documents (or pairs) of `split` of dataset `name` in order, read as `read_options` say:
  its part
  `shard` of `shard_count` (a contiguous range). `inventory` (the dataset's, from `scan`) lets a
  part start reading at its own file; a part of a split without one counts every file's
  documents first."""
  check_split_name(name, split)
  options = _options(read_options)
  if inventory is None and shard_count > 1:
    inventory = scan(name, options, report=None)
  begin, end = 0, None
  if inventory is not None:
    size = split_size(inventory.total, split)
    lo, hi = size * shard // shard_count, size * (shard + 1) // shard_count
    if lo == hi:
      return
    begin, end = position_of(lo, split), position_of(hi - 1, split) + 1
  files = paths(name) if inventory is None else inventory.paths
  counts = None if inventory is None else inventory.counts
  bad = records.BadDocuments(name, f"split {split}", options.bad_documents, warn)
  wanted = lambda position: in_split(position, split)
  keys = records.keys_of(options)
  for _, item in _read_files(name, files, counts, begin, end, wanted, keys):
    if isinstance(item, records.Bad):
      bad.add(item)
    else:
      yield item
  bad.done()


def check(name: str, read_options: Optional[data.ReadOptions] = None) -> list:
  """What can be checked before the files are read whole: the pattern matches files of formats
  that can be read, their readers are installed, and the first jsonl record (the first that is
  not bad) and the first parquet file have the text field (a pair's two fields); a UserError
  otherwise. Returns the files."""
  files = paths(name)
  kinds = {path: format_of(path) for path in files}
  options = _options(read_options)
  keys = records.keys_of(options)
  if any(codec_of(path) == "zstd" for path in files):
    data.import_extra("zstandard", f"dataset {name!r} (zstd-compressed JSON Lines)")
  if "parquet" in kinds.values():
    data.import_extra("pyarrow.parquet", f"dataset {name!r} (parquet)")
  if keys.names[0] is None and set(kinds.values()) - {"txt"}:
    raise ValueError(f"{name}: jsonl and parquet files are read by read_options' keys.")
  text = next((p for p in files if kinds[p] == "txt"), None)
  if keys.pairs and text:
    raise errors.DataError(
        f"dataset {name!r}: pairs ({keys.flags}) are read from jsonl and parquet files, and "
        f"{text} is a .txt file; narrow the pattern to those."
    )
  bad = records.BadDocuments(name, "", options.bad_documents, warn=False)
  first_parquet = next((p for p in files if kinds[p] == "parquet"), None)
  if first_parquet:
    from vit_jax.data import parquet  # pylint: disable=g-import-not-at-top

    try:
      with parquet.File(first_parquet) as f:
        _column_paths(f, keys)
    except parquet.UnreadableError as e:
      raise _unreadable(e) from None
  first_jsonl = next((p for p in files if kinds[p] == "jsonl"), None)
  if first_jsonl:
    reading = _read_jsonl(first_jsonl, keys, 0, 0, None, lambda _: True)
    with contextlib.closing(reading):  # the file is closed at the first good record
      for _, item in reading:
        if isinstance(item, records.Bad) and item.fields is not None and keys.pairs:
          raise errors.DataError(
              f"{item.where}: {item.problem}; name the pair's fields with {keys.flags}."
          )
        if isinstance(item, records.Bad) and item.fields is not None:
          raise errors.DataError(
              f"{item.where} has no field {keys.names[0]!r} to read the text from (its fields: "
              f"{', '.join(item.fields)}); name the text's field with --config.text_key."
          )
        if not isinstance(item, records.Bad):
          break
        bad.add(item)
  return files


# ---- The inventory: each file's document count, for a token store ----------------------------


@dataclasses.dataclass(frozen=True)
class Inventory:
  """The files of a dataset and the documents (positions) each holds, in order."""

  paths: tuple[str, ...]
  counts: tuple[int, ...]
  skipped: int = 0  # bad documents left out

  @property
  def total(self) -> int:
    return sum(self.counts)

  def to_json(self) -> dict:
    return {"files": [[p, c] for p, c in zip(self.paths, self.counts)], "skipped": self.skipped}

  @classmethod
  def from_json(cls, value: dict) -> "Inventory":
    files = value["files"]
    return cls(tuple(p for p, _ in files), tuple(c for _, c in files), value["skipped"])


def _scan_file(job) -> tuple[int, list[records.Bad], int]:
  """(document count, the first bad ones, how many are bad) of one file, read whole."""
  name, path, keys, stop_at_bad = job
  bads, count = [], 0
  reading = _read_file(path, name.split(":", 1)[0], keys, 0, 0, None, lambda _: True)
  while True:
    try:
      _, item = next(reading)
    except StopIteration as stop:
      return stop.value, bads, count
    if isinstance(item, records.Bad):
      count += 1
      if len(bads) < records.WARN_AT_MOST:
        bads.append(item)
      if stop_at_bad:
        return 0, bads, count


def scan(
    name: str,
    read_options: Optional[data.ReadOptions] = None,
    *,
    workers: int = 1,
    report: Optional[Callable[[str], None]] = print,
) -> "Inventory":
  """Every file of dataset `name` read once (by `workers` processes at a time): its documents
  counted, the bad ones refused (bad_documents="error": the first in order, a DataError) or
  counted and named in warnings. Reads only: nothing is written."""
  options = _options(read_options)
  files = check(name, options)
  skip = options.bad_documents == "skip"
  jobs = [(name, path, records.keys_of(options), not skip) for path in files]
  if report:
    report(f"prepare: reading the {len(files):,} files of {name} to count their documents")
  bad = records.BadDocuments(name, "all files", options.bad_documents, warn=report is not None)
  counts = []
  with contextlib.ExitStack() as stack:
    if workers <= 1 or len(jobs) <= 1:
      results = map(_scan_file, jobs)
    else:
      context = multiprocessing.get_context("spawn")  # as store_writer's workers
      pool = stack.enter_context(context.Pool(min(workers, len(jobs))))
      results = pool.imap(_scan_file, jobs, chunksize=max(1, len(jobs) // (8 * workers)))
    for count, bads, bad_count in results:
      for item in bads:
        bad.add(item)
      bad.count += bad_count - len(bads)
      counts.append(count)
  bad.done()
  inventory = Inventory(tuple(files), tuple(counts), bad.count)
  if report:
    report(f"prepare: {inventory.total:,} documents in {len(files):,} files")
  return inventory
