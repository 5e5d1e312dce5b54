"""A local hf: folder's data that does not read (truncated, bytes changed: a parquet file's footer
or pages, a save_to_disk Arrow file, or its JSON records), named: the library's errors, and
pyarrow's under it, as one DataError naming the file (vit_jax/data/hub.py reads through
`damaged_files`). The files are looked at only once something failed, the cheap checks first.
"""

import contextlib
import functools
import json
import os

from vit_jax import errors

SAVED_FILES = ("dataset_dict.json", "state.json")  # what save_to_disk writes at a folder's top


def _library():
  import datasets  # pylint: disable=g-import-not-at-top  (hub.py imported it, quiet)

  return datasets


@contextlib.contextmanager
def damaged_files(location, split: str | None = None):
  """The errors of reading data that does not read whole (the library's, and pyarrow's under it)
  as one DataError: naming the file of a local folder that does not read, else data the library
  cannot parse (a JSON string that is half of a UTF-16 pair) by its dataset and `split`; a hub
  dataset's other errors pass as they are."""
  try:
    yield
  except errors.UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    if isinstance(e, ConnectionError) or errors.transient_cause(e):
      raise
    import pyarrow  # pylint: disable=g-import-not-at-top  (the library above imported it)

    found = None if location.kind == "hub" else _damaged_file(location)
    if found:
      path, why = found
      raise errors.DataError(
          f"{location.name}: {path} does not read ({why}); copy it again, or write it again "
          "(to_parquet, save_to_disk)."
      ) from None
    if isinstance(e, pyarrow.ArrowInvalid):
      where = location.name if split is None else f"{location.name} ({split})"
      raise errors.DataError(
          f"{where}: a data file cannot be read ({errors.first_line(e)}); fix or remove it."
      ) from None
    if location.kind == "hub":
      raise
    generation_error = _library().exceptions.DatasetGenerationError
    if isinstance(e, (pyarrow.ArrowException, OSError, generation_error)):
      raise errors.DataError(
          f"{location.name}: its data does not read ({type(e).__name__}: {errors.first_line(e)}); "
          "copy the folder again, or write it again (to_parquet, save_to_disk)."
      ) from None
    raise  # not the data: a bug keeps its traceback


def _damaged_file(location) -> tuple[str, str] | None:
  """(path, why) of the first file of a local folder that does not read, the cheap checks first
  (this runs once something failed): a JSON record of save_to_disk that is not an object, a
  parquet file whose footer does not read, an Arrow or parquet file that does not read and
  validate whole, then the records of a split folder, or of the whole, that the library does not
  load."""
  import pyarrow as pa  # pylint: disable=g-import-not-at-top

  paths = sorted(
      os.path.join(root, name) for root, _, names in os.walk(location.path) for name in names
  )
  saved = location.kind == "saved"
  parquet = [p for p in paths if p.endswith(".parquet")]
  checks = []  # (what to name, the check that raises)
  checks += [
      (p, functools.partial(_json_object, p)) for p in paths if saved and p.endswith(".json")
  ]
  checks += [(p, functools.partial(_parquet_schema, p)) for p in parquet]
  checks += [(p, functools.partial(_whole_file, p)) for p in paths if p.endswith(".arrow")]
  checks += [(p, functools.partial(_whole_file, p)) for p in parquet]
  if saved:  # its data reads: the records the library reads beside it
    splits = [os.path.dirname(p) for p in paths if os.path.basename(p) == "state.json"]
    checks += [
        (os.path.join(d, "state.json (or dataset_info.json)"), functools.partial(_saved_split, d))
        for d in splits
    ]
    load_all = functools.partial(_library().load_from_disk, location.path)
    checks.append((os.path.join(location.path, SAVED_FILES[0]), load_all))
  for path, check in checks:
    try:
      check()
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError, AttributeError) as e:
      return path, f"{type(e).__name__}: {errors.first_line(e)}"
  return None


def _parquet_schema(path: str) -> None:
  """Reads a parquet file's schema and the library's JSON record of its features in it."""
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

  record = (pq.read_schema(path).metadata or {}).get(b"huggingface")
  if record is not None:
    json.loads(record.decode("utf-8"))


def _json_object(path: str) -> None:
  with open(path, encoding="utf-8") as f:
    if not isinstance(json.load(f), dict):
      raise ValueError("not a JSON object")


def _saved_split(folder: str) -> None:
  _library().Dataset.load_from_disk(folder)


def _whole_file(path: str) -> None:
  """Reads and validates every batch of a parquet or Arrow file (IPC stream or file)."""
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

  if path.endswith(".parquet"):
    f = pq.ParquetFile(path)
    for group in range(f.num_row_groups):
      f.read_row_group(group).validate(full=True)
    return
  with pa.memory_map(path) as source:
    try:
      batches = iter(pa.ipc.open_stream(source))
    except pa.ArrowInvalid:
      source.seek(0)
      reader = pa.ipc.open_file(source)
      batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
    for batch in batches:
      batch.validate(full=True)
