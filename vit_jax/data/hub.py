"""Hugging Face hub datasets, `hf:NAME_OR_DIR`, read through the `datasets` library (the `data`
extra): documents for the text tasks, encoded images with their classes for image
classification.

NAME_OR_DIR is one of
- a dataset on the hub, `org/name` (`HuggingFaceFW/fineweb-edu`), its config named by
  --config.hf_subset (`sample-10BT`);
- a local folder in a hub repo's layout, as `hf download --repo-type dataset NAME --local-dir DIR`
  writes it (data/*.parquet, train-*.parquet, a README.md naming its configs): what
  `datasets.load_dataset(DIR)` reads;
- a folder written by `save_to_disk` (`datasets.load_from_disk`).

Splits are the dataset's own (train, validation, test). One without a validation split gets one
when --config.hf_holdout=N says so: about one in N training examples is held out as
"validation", and "train" is the rest. A document is held out when the hash of its text is 0 mod
N (BLAKE2b, 8 bytes), so the same documents are held out however the dataset is read (whole, in
a token store's shards, streamed or not), and a duplicate never sits on both sides; an image
when its row is N-1 mod N (every Nth row, as `files:` holds out documents).

How it is read:
- Text (--config.text_key's column): a local folder is streamed file by file, the parquet read
  where it lies; a `save_to_disk` folder is memory mapped. A hub dataset is read only into a token
  store: `python -m vit_jax.prepare` streams it from the hub (`streaming=True`), so nothing of
  it is kept on disk but the tokens, a shard per data file.
- Images (--config.image_key's `Image` column, encoded bytes; --config.label_key's `ClassLabel`,
  which names the classes): a memory-mapped Arrow table read by row, so any order costs the
  same. A hub dataset is downloaded into the datasets cache at first use (--config.data_dir when
  set, else Hugging Face's, ~/.cache/huggingface/datasets) and read from it, also offline
  (HF_HUB_OFFLINE=1); a local folder in the hub's layout is converted into that cache once; a
  `save_to_disk` folder is read where it lies. Images are decoded by the input pipeline
  (data/image/pipeline.py), not here.

A local folder's data file that does not read whole (truncated, bytes changed: a parquet file's
footer or pages, a save_to_disk Arrow file, or its JSON records) is one DataError naming the file
(vit_jax/data/hub_damage.py); each batch of Arrow rows is validated before its texts are read (a
damaged Arrow file's offsets would otherwise be read past its end). A null text is left out, and
their count said in a warning once the split is read (a damaged file's validity bits read as
nulls); a text holding a control character is a bad document, as in a jsonl or parquet file
(--config.bad_documents: an error naming its row, or left out and counted).

Pairs (--config.source_key and --config.target_key): two text columns (summarization's article
and summary), or two languages of a `translation` column, the layout WMT and OPUS corpora are
published in (vit_jax/data/text/records.py). A row without a text on either side is a bad
document (--config.bad_documents: an error naming it, or left out and counted). The held-out
slice hashes the source, so a source never sits on both sides.

Nothing here imports `datasets` until a dataset is opened: a run imports it only when its config
names an hf: dataset.
"""

import contextlib
import dataclasses
import hashlib
import math
import os
import re
import sys
from typing import Iterator

import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax import storage
from vit_jax.data import hub_damage
from vit_jax.data.text import records

PREFIX = data.HUB_PREFIX
HELD_OUT = "validation"  # the split --config.hf_holdout holds out of "train"
_ROWS_PER_READ = 1_000  # documents read from the library at a time
_REPO_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def is_hub(name: str) -> bool:
  return name.startswith(PREFIX)


def _library():
  """The `datasets` module, quiet (no progress bars or info logs), or a MissingExtraError (only
  a config naming an hf: dataset loads it)."""
  datasets = data.import_extra("datasets", "an hf: dataset (read by Hugging Face's datasets)")
  datasets.disable_progress_bars()
  # Its error logs (e.g. a parquet schema that does not read) come before the exception, which
  # is reported in one line.
  datasets.logging.set_verbosity(datasets.logging.CRITICAL)
  return datasets


# ---- Where a dataset is, and opening it --------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Location:
  name: str  # the dataset string, hf:...
  path: str  # the hub's repo id, or the local folder
  kind: str  # "hub", "folder" (the hub's layout) or "saved" (save_to_disk)


def locate(name: str) -> Location:
  """Where `name` (hf:NAME_OR_DIR) is: an existing local folder, else a hub repo id. Reads no
  data and imports nothing."""
  path = name[len(PREFIX) :]
  local = os.path.expanduser(path)
  if os.path.isdir(local):
    saved = any(os.path.isfile(os.path.join(local, f)) for f in hub_damage.SAVED_FILES)
    return Location(name, os.path.abspath(local), "saved" if saved else "folder")
  if storage.is_remote(path):
    raise errors.ConfigError(
        f"--config.dataset={name!r}: hf: reads a hub dataset or a local folder; for parquet or "
        "jsonl files in a bucket use files:gs://BUCKET/PATTERN."
    )
  if path.startswith(("/", ".", "~")):
    raise errors.MissingFileError(
        f"--config.dataset={name!r}: there is no folder {local}; name an existing folder in the "
        "hub's layout or written by save_to_disk, or a hub dataset as hf:ORG/NAME."
    )
  if not _REPO_ID.match(path):
    raise errors.ConfigError(
        f"--config.dataset={name!r} is neither a local folder nor a hub dataset name "
        "(hf:ORG/NAME, e.g. hf:HuggingFaceFW/fineweb-edu)."
    )
  return Location(name, path, "hub")


def is_streamed(name: str) -> bool:
  """Text of a hub dataset is read only into a token store (streamed by `vit_jax.prepare`)."""
  return is_hub(name) and locate(name).kind == "hub"


def open_splits(location: Location, options, cache_dir: str | None, *, streaming: bool) -> dict:
  """{split: the library's Dataset, or IterableDataset where `streaming`}: every split the
  dataset has. A save_to_disk folder is memory mapped whatever `streaming` says."""
  lib = _library()
  subset = options.hf_subset
  with hub_damage.damaged_files(location), _library_errors(location, options, cache_dir, streaming):
    if location.kind == "saved":
      if subset is not None:
        raise errors.ConfigError(
            f"--config.hf_subset={subset!r}: {location.name} is a save_to_disk folder, which "
            "has no subsets; leave hf_subset unset."
        )
      loaded = lib.load_from_disk(location.path)
      if isinstance(loaded, lib.Dataset):
        return {str(loaded.split or "train"): loaded}
      return dict(loaded)
    return dict(lib.load_dataset(location.path, subset, cache_dir=cache_dir, streaming=streaming))


@contextlib.contextmanager
def _library_errors(location: Location, options, cache_dir: str | None, streaming: bool):
  """The library's errors about what the user named, as one-line UserErrors."""
  lib = _library()
  name, path = location.name, location.path
  try:
    yield
  except ConnectionError as e:  # offline (HF_HUB_OFFLINE=1), or the hub cannot be reached
    download = (
        f"download it where there is network, `hf download --repo-type dataset {path} "
        "--local-dir DIR`, and use --config.dataset=hf:DIR"
    )
    if streaming:  # text, streamed from the hub: the cache is not read
      raise errors.DatasetNotPreparedError(
          f"{name} is streamed from the hub, which cannot be reached ({errors.first_line(e)}): run "
          f"this where there is network, without HF_HUB_OFFLINE / HF_DATASETS_OFFLINE; or "
          f"{download}."
      ) from None
    subset = f", {options.hf_subset!r}" if options.hf_subset else ""
    cache = f", cache_dir={cache_dir!r}" if cache_dir else ""
    raise errors.DatasetNotPreparedError(
        f"{name} is not in the datasets cache and the hub cannot be reached "
        f"({errors.first_line(e)}): {download}; or cache it there with "
        f'`python -c "import datasets; '
        f'datasets.load_dataset({path!r}{subset}{cache})"` (without HF_HUB_OFFLINE / '
        "HF_DATASETS_OFFLINE)."
    ) from None
  except lib.exceptions.DatasetNotFoundError as e:
    raise errors.DataError(
        f"{name}: {errors.first_line(e)}; check the name (a local folder is named by its path, "
        "e.g. hf:./data/mine)."
    ) from None
  except (FileNotFoundError, lib.exceptions.DataFilesNotFoundError) as e:
    raise errors.DataError(
        f"{name}: {errors.first_line(e)}; a folder needs data files in the hub's layout "
        "(data/train-*.parquet, train.jsonl, ...) or to be written by save_to_disk."
    ) from None
  except ValueError as e:
    if "config" not in str(e).lower():
      raise
    available = re.search(r"\[([^\]]*)\]", str(e))
    listing = available.group(1).replace("'", "") if available else errors.first_line(e)
    given = options.hf_subset
    raise errors.ConfigError(
        (
            f"--config.hf_subset={given!r} is not a subset of {name}"
            if given
            else f"{name} has several subsets; name one with --config.hf_subset"
        )
        + f" (its subsets: {listing})."
    ) from None


# ---- Splits and the held-out slice ---------------------------------------------------------------


def split_names(name: str, own, holdout: int | None) -> tuple[str, ...]:
  """The splits a run may name: the dataset's own, plus "validation" held out of "train"."""
  own = tuple(own)
  if holdout is None:
    return own
  if HELD_OUT in own:
    raise errors.ConfigError(
        f"--config.hf_holdout={holdout}: {name} has a validation split of its own; leave "
        "hf_holdout unset."
    )
  if "train" not in own:
    raise errors.ConfigError(
        f"--config.hf_holdout={holdout}: {name} has no train split to hold examples out of "
        f"(its splits: {', '.join(own)}); leave hf_holdout unset."
    )
  return own + (HELD_OUT,)


def check_split(name: str, split: str, names, *, key: str) -> None:
  if split not in names:
    raise errors.DataError(
        f"--config.{key}={split!r} is not a split of {name}; its splits: {', '.join(names)}"
        + ("" if HELD_OUT in names else "; --config.hf_holdout=N holds one out of train")
        + "."
    )


def source_split(split: str, holdout: int | None) -> str:
  """The dataset's own split that `split` is read from."""
  return "train" if holdout is not None and split == HELD_OUT else split


def held_out_text(text: str, holdout: int) -> bool:
  digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
  return int.from_bytes(digest, "little") % holdout == 0


# ---- Text --------------------------------------------------------------------------------------


def _text_splits(name: str, options, cache_dir: str | None) -> dict:
  """{split: Dataset or IterableDataset} of a text dataset: streamed unless saved."""
  location = locate(name)
  return data.opened(
      ("hf text", name, options.hf_subset, cache_dir),
      lambda: open_splits(location, options, cache_dir, streaming=True),
  )


def check_text(name: str, split: str, options, cache_dir: str | None, *, key: str) -> list:
  """`split` exists and its dataset has a text column --config.text_key, of strings (or a pair's
  two, --config.source_key and --config.target_key); the path to each (records.resolve)."""
  opened = _text_splits(name, options, cache_dir)
  check_split(name, split, split_names(name, opened, options.hf_holdout), key=key)
  rows = opened[source_split(split, options.hf_holdout)]
  features = rows.features
  if features is None:  # not known before reading (the library could not parse a first file?)
    with hub_damage.damaged_files(locate(name), split):
      next(iter(rows.take(1)), None)
  keys = records.keys_of(options)
  if keys.pairs:
    return [_pair_column(name, features, k) for k in keys.names]
  text_key = options.text_key
  if features is None or text_key not in features:
    raise errors.DataError(
        f"{name} has no column {text_key!r} (its columns: {_columns(features)}); name the text "
        "column with --config.text_key=COLUMN."
    )
  if getattr(features[text_key], "dtype", None) not in ("string", "large_string"):
    raise errors.DataError(
        f"column {text_key!r} of {name} holds {features[text_key]}, not text; name a column of "
        f"strings with --config.text_key (its columns: {_columns(features)})."
    )
  return [(text_key,)]


def _pair_column(name: str, features, key: str) -> tuple[str, ...]:
  """The path to a pair's text column `key`: a column, a struct's field, or a language of the
  translation column."""
  fix = "name the source and target columns with --config.source_key and --config.target_key"
  shape = _shape(features or {})
  path = records.resolve(shape, key, True, noun="column")
  if isinstance(path, records.Missing):
    raise errors.DataError(f"{name} {path.problem}; {fix}.")
  feature = records.value_at(shape, path)
  if getattr(feature, "dtype", None) not in ("string", "large_string"):
    raise errors.DataError(
        f"column {'.'.join(path)!r} of {name} holds {feature}, not text; {fix} (its columns: "
        f"{_columns(features)})."
    )
  return path


def _shape(features) -> dict:
  """The library's features as records.resolve reads a schema: a struct (a dict of features)
  and a Translation feature ({language: a string}) as dicts, any other feature as it is."""
  lib = _library()
  if isinstance(features, dict):
    return {k: _shape(v) for k, v in features.items()}
  if isinstance(features, lib.Translation):
    return {language: lib.Value("string") for language in features.languages}
  return features


def documents(
    name: str,
    split: str,
    options,
    cache_dir: str | None = None,
    *,
    shard: int = 0,
    shard_count: int = 1,
) -> Iterator:
  """The non-empty texts (or pairs) of `split`, in stored order; with `shard_count` > 1 part
  `shard` of contiguous parts (`text_shards` of them) that together hold the split once."""
  paths = check_text(name, split, options, cache_dir, key="split")
  holdout, text_key = options.hf_holdout, options.text_key
  rows = _text_splits(name, options, cache_dir)[source_split(split, holdout)]
  if shard_count > 1:
    rows = rows.shard(num_shards=shard_count, index=shard, contiguous=True)
  keep = lambda text: True
  if holdout is not None:
    keep = lambda text: held_out_text(text, holdout) == (split == HELD_OUT)
  part = f", part {shard + 1} of {shard_count}" if shard_count > 1 else ""
  if records.keys_of(options).pairs:
    yield from _pairs(name, f"{split}{part}", rows, paths, options, keep)
    return
  nulls, number = 0, 0
  bad = records.BadDocuments(name, f"split {split}{part}", options.bad_documents)
  with hub_damage.damaged_files(locate(name), split):
    batches = rows.select_columns([text_key]).with_format("arrow").iter(batch_size=_ROWS_PER_READ)
    for table in batches:
      table.validate(full=True)  # before reading a damaged file's strings past their end
      for text in table.column(text_key).to_pylist():
        number += 1
        nulls += text is None
        if not (text and keep(text)):
          continue
        problem = records.text_problem(text)  # a control character (Arrow's strings are UTF-8)
        if problem:
          where = f"{name} ({split}{part}) row {number}"
          bad.add(records.Bad(where, f"its {text_key!r} holds {problem}"))
        else:
          yield text
  bad.done()
  if nulls:
    print(
        f"warning: {name}: {nulls:,} row{'s' * (nulls != 1)} with a null {text_key!r} left out "
        f"(split {split}).",
        file=sys.stderr,
        flush=True,
    )


def _pairs(name: str, where: str, rows, paths, options, keep) -> Iterator[tuple[str, str]]:
  """The pairs of `rows` whose source `keep` keeps; a row without both texts is a bad document
  (bad_documents), in the held-out slice by its source where it has one."""
  keys = records.keys_of(options)
  bad = records.BadDocuments(name, f"split {where}", options.bad_documents)
  columns = list(dict.fromkeys(path[0] for path in paths))
  number = 0
  with hub_damage.damaged_files(locate(name), where):
    for table in rows.select_columns(columns).with_format("arrow").iter(batch_size=_ROWS_PER_READ):
      table.validate(full=True)  # before reading a damaged file's strings past their end
      for row in table.to_pylist():
        number += 1
        pair = records.from_row(f"{name} ({where}) row {number}", row, paths, keys)
        source = records.value_at(row, paths[0])
        if not keep(source if isinstance(source, str) else ""):
          continue
        if isinstance(pair, records.Bad):
          bad.add(pair)
        else:
          yield pair
  bad.done()


def text_shards(
    name: str, split: str, options, cache_dir: str | None, examples_per_shard: int
) -> int:
  """How many shards a token store of `split` has: a streamed dataset's data files (a shard
  each), or a save_to_disk one's rows by `examples_per_shard`."""
  rows = _text_splits(name, options, cache_dir)[source_split(split, options.hf_holdout)]
  if hasattr(rows, "n_shards"):  # streamed: the library shards it by files
    return rows.n_shards
  return max(1, math.ceil(len(rows) / examples_per_shard))


def _columns(features) -> str:
  """Each column with its kind: "text (string), label (ClassLabel)"."""
  if not features:
    return "none known"
  kind = lambda v: v.dtype if type(v).__name__ == "Value" else type(v).__name__
  return ", ".join(f"{k} ({kind(v)})" for k, v in features.items())


# ---- Images --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Images:
  """An image classification dataset: its splits, classes and rows, read by row index."""

  name: str
  class_names: tuple[str, ...]
  splits: tuple[str, ...]  # the splits a run may name (own and held out)
  image_key: str
  label_key: str
  holdout: int | None
  tables: dict  # own split -> the library's Dataset, formatted as Arrow tables

  def rows(self, split: str, *, key: str = "split") -> np.ndarray:
    """The rows of its own split that `split` is (all of them, or those held out or left)."""
    check_split(self.name, split, self.splits, key=key)
    count = len(self.tables[source_split(split, self.holdout)])
    rows = np.arange(count, dtype=np.int64)
    if self.holdout is None or split not in ("train", HELD_OUT):
      return rows
    held_out = rows % self.holdout == self.holdout - 1
    return rows[held_out if split == HELD_OUT else ~held_out]

  @property
  def eval_split(self) -> str | None:
    return next((s for s in (HELD_OUT, "test") if s in self.splits), None)

  def fetch(self, split: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(encoded image bytes, labels int64) of `rows` of `split`'s own split."""
    table = self.tables[source_split(split, self.holdout)][rows.tolist()]
    images = table.column(self.image_key).combine_chunks()
    encoded = images.field("bytes").to_numpy(zero_copy_only=False)
    for i in np.flatnonzero([b is None for b in encoded]):  # an image kept as a file's path
      encoded[i] = storage.read_bytes(images.field("path")[int(i)].as_py())
    labels = table.column(self.label_key).to_numpy().astype(np.int64)
    return encoded, labels


def open_images(name: str, options, cache_dir: str | None) -> Images:
  """The image dataset `name`: its columns checked (a local folder's before it is converted
  into the cache), then opened for reading by row."""
  location = locate(name)
  if location.kind == "folder":  # the features, from the parquet files alone: no conversion
    _image_columns(name, open_splits(location, options, cache_dir, streaming=True), options)
  tables = open_splits(location, options, cache_dir, streaming=False)
  class_names = _image_columns(name, tables, options)
  return Images(
      name=name,
      class_names=class_names,
      splits=split_names(name, tables, options.hf_holdout),
      image_key=options.image_key,
      label_key=options.label_key,
      holdout=options.hf_holdout,
      tables={split: rows.with_format("arrow") for split, rows in tables.items()},
  )


def _image_columns(name: str, splits: dict, options) -> tuple[str, ...]:
  """The class names, once every split has an Image column `image_key` and the same ClassLabel
  column `label_key`."""
  lib = _library()
  image_key, label_key = options.image_key, options.label_key
  names = None
  for split, rows in splits.items():
    features = rows.features or {}
    for key, kind, setting in ((image_key, lib.Image, "image_key"), (label_key, None, "label_key")):
      if key not in features:
        raise errors.DataError(
            f"{name} ({split}) has no column {key!r} (its columns: {_columns(features)}); name "
            f"it with --config.{setting}=COLUMN."
        )
      if kind is not None and not isinstance(features[key], kind):
        raise errors.DataError(
            f"column {key!r} of {name} holds {features[key]}, not images (an Image feature); "
            f"name the image column with --config.image_key (its columns: {_columns(features)})."
        )
    label = features[label_key]
    if not isinstance(label, lib.ClassLabel):
      raise errors.DataError(
          f"column {label_key!r} of {name} holds {label}, not a ClassLabel, so its classes have "
          f"no names: make it one, e.g. `ds.class_encode_column({label_key!r})` (or "
          f"`ds.cast_column({label_key!r}, datasets.ClassLabel(names=[...]))`), save_to_disk(DIR) "
          "and train on hf:DIR."
      )
    if names is not None and tuple(label.names) != names:
      raise errors.DataError(
          f"the splits of {name} name different classes in {label_key!r}; give them one "
          "ClassLabel."
      )
    names = tuple(label.names)
  if names is None:
    raise errors.DataError(f"{name} has no splits.")
  return names


def prepare_images(name: str, options, cache_dir: str | None) -> None:
  """Downloads (a hub dataset) or converts (a local folder) `name` into the datasets cache, so
  that runs read it from there, offline too."""
  open_images(name, options, cache_dir)
