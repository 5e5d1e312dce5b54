"""Checks of a text data config before training: the dataset's name, kind, splits and files, and
the token store a streamed dataset is read from."""

import glob
import os

from vit_jax import data
from vit_jax import errors
from vit_jax.data.text import corpus
from vit_jax.data.text import datasets
from vit_jax.data.text import stream
from vit_jax.data.text import token_store as stores

TEXT_SPLITS = ("train", "validation", "test", "all")


def check_config(config, examples: str, *, streams: bool = False) -> None:
  """The text dataset `config.dataset` exists, reads `examples` (the task's kind) and has
  non-empty `train_split` and `eval_split`; a DataError or ConfigError otherwise. `streams`:
  the task trains on `stream:` datasets (vit_jax/tasks TaskInfo.streams)."""
  if stream.is_stream(config.dataset) and not (streams and "stream" in config):
    raise errors.ConfigError(
        f"--config.dataset={config.dataset!r}: stream: datasets train causal LMs "
        f"(configs/gpt.py), not --config.task={config.task!r}."
    )
  if stream.is_stream(config.dataset) and config.train_split != "train":
    raise errors.DataError(
        f"--config.train_split={config.train_split!r}: a stream: dataset trains on 'train'."
    )
  if config.token_store:
    check_token_store(config, examples)
  for key in data.SPLIT_KEYS:
    check_split(
        config.dataset,
        config[key],
        examples,
        key=key,
        data_dir=config.data_dir,
        token_store=config.token_store,
        text_key=config.text_key,
        bad_documents=config.bad_documents,
    )


def check_token_store(config, examples: str) -> None:
  """`config.token_store` is a finished store of `config.dataset`'s `examples`, made with the
  tokenizer settings the config names (a store's token ids mean nothing under another)."""
  if stream.is_stream(config.dataset):
    raise errors.ConfigError(
        f"--config.token_store: a stream: dataset ({config.dataset}) is tokenized when the run "
        "starts; leave token_store unset."
    )
  store = datasets.open_store(config.token_store)
  if store.dataset != config.dataset or store.kind != examples:
    raise errors.DataError(
        f"the token store {store.path} holds {store.dataset!r} as {store.kind}, not "
        f"--config.dataset={config.dataset!r} as {examples}; name the store of this dataset, or "
        "make one with python -m vit_jax.prepare."
    )
  if "text_key" in store.manifest:  # a store of files: the field their text was read from
    from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

    if store.manifest["text_key"] != files.field_name(config.text_key):
      raise errors.DataError(
          f"the token store {store.path} holds the field {store.manifest['text_key']!r} of "
          f"{store.dataset}'s files, not {files.field_name(config.text_key)!r}; give "
          f"--config.text_key={store.manifest['text_key']}, or prepare a store of this field."
      )
  want = stores.tokenizer_settings(config)
  differ = [k for k in want if want[k] != store.tokenizer_settings.get(k)]
  if differ:
    raise errors.DataError(
        f"the token store {store.path} was made with another tokenizer: "
        + ", ".join(
            f"--config.tokenizer.{k}={store.tokenizer_settings.get(k)!r} (not {want[k]!r})"
            for k in differ
        )
        + "; give the store's settings, or prepare a store with these."
    )


def check_split(
    name: str,
    split: str,
    examples: str,
    *,
    key: str,
    data_dir: str | None = None,
    token_store: str | None = None,
    tokenizing: bool = False,
    text_key: str | None = None,
    bad_documents: str = "error",
) -> None:
  """Dataset `name` exists, reads `examples` and has a non-empty `split`; `key` is the config
  key that names the split (`--config.<key>`), for the error message. `token_store`: the run's
  store of `name`, which must hold the split, intact. A streamed TFDS dataset is read only from
  a store, unless `tokenizing` (vit_jax.prepare reads it to make one). Files are read by
  `text_key` and `bad_documents` (files.py); those `tokenizing` reads are checked here only as
  far as their first records: prepare reads them whole, before it writes anything."""
  if token_store and not stream.is_stream(name):
    datasets.check_kind(name, examples)
    datasets.open_store(token_store, [split])  # the split is there and its files are whole
    return
  if datasets.is_streamed(name) and not tokenizing:
    datasets.check_kind(name, examples)
    raise datasets.not_prepared_error(name)
  if stream.is_stream(name):
    if split not in stream.SPLITS:
      raise errors.DataError(
          f"--config.{key}={split!r} is not a split of {name!r}; use one of "
          f"{', '.join(stream.SPLITS)}."
      )
    inner = name[len(stream.PREFIX) :]
    if inner.startswith(datasets.FILE_PREFIXES):  # files, which must exist and hold text
      for path in text_files(inner):
        check_text_file(path)
    else:
      stream.whole_text(name)  # the embedded corpus, or a ConfigError naming the forms
    return
  # An unknown name, or one of the wrong kind, is a ConfigError here, before the workdir exists.
  datasets.check_kind(name, examples)
  if name in datasets.TFDS_DATASETS:
    _check_tfds_split(name, split, key, data_dir)
    return
  if name in datasets.TOY_DATASETS:
    allowed = tuple(datasets.TOY_SIZES)
  else:
    allowed = TEXT_SPLITS if name.startswith(datasets.FILE_PREFIXES) else TEXT_SPLITS[:3]
  if split not in allowed:
    raise errors.DataError(
        f"--config.{key}={split!r} is not a split of {name!r}; use one of {', '.join(allowed)}."
    )
  if not name.startswith(datasets.FILE_PREFIXES):
    return  # the embedded corpus and the toy tasks are generated: every split has examples
  from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

  options = dict(text_key=text_key, bad_documents=bad_documents)
  files.check(name, **options)
  if tokenizing:
    return  # prepare reads every file once, counting, before it writes (store_writer.py)
  count = lambda split: len(datasets.memory_examples(name, split, **options))
  if count(split) == 0:
    raise too_few_documents(name, count("all"))


def too_few_documents(name: str, count: int) -> errors.DataError:
  every = corpus.VALIDATION_EVERY
  return errors.DataError(
      f"dataset {name!r} has {count} documents, too few for a non-empty train and "
      f"validation split (every {every}th document is held out, so at least {every} are "
      "needed): add files, or use paragraphs:PATTERN to split files at blank lines."
  )


def _check_tfds_split(name: str, split: str, key: str, data_dir: str | None) -> None:
  """The dataset is prepared and the split exists and holds examples. The reader opens the eval
  split only at the first eval, so without this a typo there costs the training before it."""
  from vit_jax.data import tfds_builders  # pylint: disable=g-import-not-at-top  (TFDS only)

  spec = datasets.TFDS_DATASETS[name]
  builder = tfds_builders.open_builder(spec.tfds_name, data_dir=data_dir)
  # spec.splits: e.g. lm1b's "validation" is its TFDS "test" split
  tfds_builders.check_split(builder, key, split, name, spec.splits)


def text_files(name: str) -> list[str]:
  """The files a `files:`/`paragraphs:` dataset names; each must be a readable regular file."""
  pattern = os.path.expanduser(name.split(":", 1)[1])
  paths = sorted(glob.glob(pattern))
  if not paths:
    raise errors.DataError(f"dataset {name!r}: no files match {pattern!r}; check the path.")
  for path in paths:
    if not os.path.isfile(path):
      raise errors.DataError(
          f"dataset {name!r}: {path} is not a regular file (a folder?); "
          "name files, e.g. files:/data/*.txt."
      )
    if not os.access(path, os.R_OK):
      raise errors.DataError(f"dataset {name!r}: {path} is not readable; fix its permissions.")
  return paths


def check_text_file(path: str) -> None:
  """UTF-8 text without control bytes, or a DataError naming the file and the first bad byte."""
  from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

  with open(path, "rb") as f:
    files.decode_text(path, f.read())


def check_preparation(config, examples: str, output: str, split_names) -> None:
  """What `python -m vit_jax.prepare` reads is there: the config's dataset (not a stream) and
  each split to tokenize; `output` can be written (a bucket needs the gcs extra)."""
  if stream.is_stream(config.dataset):
    raise errors.ConfigError(
        f"--config.dataset={config.dataset!r} is one text tokenized when a run starts: there is "
        "nothing to prepare."
    )
  datasets.check_kind(config.dataset, examples)
  from vit_jax import storage  # pylint: disable=g-import-not-at-top

  storage.check(output)
  for split in split_names:
    check_split(
        config.dataset,
        split,
        examples,
        key="splits",
        data_dir=config.data_dir,
        tokenizing=True,
        text_key=config.text_key,
        bad_documents=config.bad_documents,
    )
