"""Parquet files, read row group by row group with pyarrow (the data extra): rows of the named
columns, in batches.

    with parquet.File("gs://b/train-00000.parquet") as f:
      f.row_counts                  # the rows of each row group (from the footer alone)
      f.columns                     # {column: its Arrow type, e.g. "string"}
      f.text_columns                # those of strings, or of a dictionary of strings
      f.shape                       # {column: its Arrow type, or a struct's {field: ...}}
      for batch in f.batches(["text"], row_groups=[3, 4], batch_rows=1024):
        batch["text"]               # a list of Python values, one per row (None for a null)

A row group is the unit of reading: one is decoded at a time, and the rows before `start` of a
`read` are never converted to Python values. A text column's values are str: a dictionary's
(what pandas writes for a `category` column) decoded, a string that is not UTF-8 (pyarrow does
not check what a file holds) as its bytes, for the caller to refuse. Every read goes through
vit_jax/storage (a local path or gs://). A file whose footer cannot be read, or a row group
that does not decode, raises UnreadableError naming it. A storage that does not answer is not
such a file: its error is raised as it is.
"""

from typing import Iterator, Optional, Sequence

from vit_jax import data
from vit_jax import errors
from vit_jax import storage

BATCH_ROWS = 1024


class UnreadableError(Exception):
  """A file, or row group `row_group` of it, that pyarrow cannot decode."""

  def __init__(self, path: str, reason: str, row_group: Optional[int] = None):
    if row_group is None:
      super().__init__(f"{path}: not a readable parquet file ({reason})")
    else:
      super().__init__(f"{path}: its row group {row_group} does not decode ({reason})")
    self.path, self.reason, self.row_group = path, reason, row_group


def _pyarrow_parquet(path: str):
  return data.import_extra("pyarrow.parquet", f"{path} (parquet)")


def is_text(arrow_type) -> bool:
  """Strings, or a dictionary of strings."""
  import pyarrow  # pylint: disable=g-import-not-at-top  (File found the extra)

  if pyarrow.types.is_dictionary(arrow_type):
    arrow_type = arrow_type.value_type
  return arrow_type in (pyarrow.string(), pyarrow.large_string(), pyarrow.string_view())


def _shape(arrow_type):
  """A struct type as {field: its shape}; any other type as it is."""
  import pyarrow  # pylint: disable=g-import-not-at-top

  if pyarrow.types.is_struct(arrow_type):
    return {field.name: _shape(field.type) for field in arrow_type}
  return arrow_type


def _python_values(column) -> list:
  """An Arrow column's values as Python values; in a text column, a string that is not UTF-8 as
  its bytes."""
  try:
    return column.to_pylist()
  except UnicodeDecodeError:
    import pyarrow  # pylint: disable=g-import-not-at-top

    if pyarrow.types.is_dictionary(column.type):
      column = column.cast(column.type.value_type)
    bytes_of = {pyarrow.large_string(): pyarrow.large_binary()}
    bytes_of[pyarrow.string_view()] = pyarrow.binary_view()
    values = column.cast(bytes_of.get(column.type, pyarrow.binary())).to_pylist()
    return [None if v is None else _text_or_bytes(v) for v in values]


def _text_or_bytes(value: bytes):
  try:
    return value.decode("utf-8")
  except UnicodeDecodeError:
    return value


def _reason(e: Exception) -> str:
  """What went wrong, in one line; an error of the storage itself (or ours) is raised again."""
  if isinstance(e, errors.UserError) or errors.transient_cause(e):
    raise e
  text = str(e).strip().splitlines()
  return f"{type(e).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


class File:
  """One parquet file, its footer read; closed by `close` or at the end of a `with` block."""

  def __init__(self, path: str):
    pq = _pyarrow_parquet(path)
    import pyarrow  # pylint: disable=g-import-not-at-top  (the extra was found above)

    self.path = path
    self._decode_errors = (pyarrow.ArrowException, OSError, ValueError, EOFError)
    self._stream = storage.open(path, "rb")
    try:
      self._file = pq.ParquetFile(self._stream)
      metadata = self._file.metadata
      self.row_counts = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
      self.columns = {field.name: str(field.type) for field in self._file.schema_arrow}
      self.text_columns = {f.name for f in self._file.schema_arrow if is_text(f.type)}
      self.shape = {field.name: _shape(field.type) for field in self._file.schema_arrow}
    except self._decode_errors as e:
      self.close()
      raise UnreadableError(path, _reason(e)) from None

  def __enter__(self) -> "File":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def close(self) -> None:
    self._stream.close()

  @property
  def num_rows(self) -> int:
    return sum(self.row_counts)

  def _row_group(self, columns: Sequence[str], row_group: int):
    """Row group `row_group`'s `columns`, decoded (an Arrow table)."""
    try:
      return self._file.read_row_group(row_group, columns=list(columns))
    except self._decode_errors as e:
      raise UnreadableError(self.path, _reason(e), row_group) from None

  def _values(self, table, columns: Sequence[str], start: int, stop: Optional[int], group: int):
    try:
      rows = table.slice(start, None if stop is None else max(0, stop - start))
      return {name: _python_values(rows.column(name)) for name in columns}
    except self._decode_errors as e:
      raise UnreadableError(self.path, _reason(e), group) from None

  def read(
      self, columns: Sequence[str], row_group: int, start: int = 0, stop: Optional[int] = None
  ) -> dict[str, list]:
    """Rows [start, stop) of row group `row_group` (all its rows by default): {column: values}."""
    return self._values(self._row_group(columns, row_group), columns, start, stop, row_group)

  def batches(
      self,
      columns: Sequence[str],
      row_groups: Optional[Sequence[int]] = None,
      batch_rows: int = BATCH_ROWS,
  ) -> Iterator[dict[str, list]]:
    """The rows of `row_groups` (all by default), in order, `batch_rows` at a time (a batch
    never spans two row groups; each row group is decoded once): {column: values}."""
    for group in range(len(self.row_counts)) if row_groups is None else row_groups:
      table = self._row_group(columns, group)
      for start in range(0, self.row_counts[group], batch_rows):
        yield self._values(table, columns, start, start + batch_rows, group)
