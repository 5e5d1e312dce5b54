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


def check_config(config, examples: str, *, streams: bool = False, mixes: bool = False) -> None:
  """The text dataset `config.dataset` exists, reads `examples` (the task's kind) and has
  non-empty `train_split` and `eval_split`; a DataError or ConfigError otherwise. `streams`,
  `mixes`: the task trains on `stream:` datasets and on mixtures (vit_jax/tasks TaskInfo)."""
  if config.dataset == datasets.MIXTURE or config.mixture.stores or config.mixture.weights:
    check_mixture(config, mixes)
    return
  check_pair_keys(config)
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
        read_options=data.read_options(config),
    )


def check_pair_keys(config) -> None:
  """`source_key` and `target_key` are set together, for a files: or hf: dataset (the others hold
  documents or pairs of their own), and leave `text_key` at its default."""
  source, target = config.source_key, config.target_key
  if source is None and target is None:
    return
  if source is None or target is None:
    given = "source_key" if target is None else "target_key"
    raise errors.ConfigError(
        f"--config.{given} is set alone: --config.source_key and --config.target_key name a "
        "pair's two fields; set both (or neither, to read documents)."
    )
  if not config.dataset.startswith(datasets.FILE_PREFIXES + (data.HUB_PREFIX,)):
    raise errors.ConfigError(
        f"--config.source_key={source!r}, --config.target_key={target!r} name the fields of a "
        f"files: or hf: dataset's pairs; --config.dataset={config.dataset!r} reads its own "
        "examples: leave them unset."
    )
  if config.text_key != "text":
    raise errors.ConfigError(
        f"--config.text_key={config.text_key!r} names a document's field, and this run reads "
        f"pairs from --config.source_key={source!r} and --config.target_key={target!r}: leave "
        "text_key unset."
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
  read = datasets.read_settings(config.dataset, data.read_options(config))
  made = store.manifest.get("read_settings", read)  # (a store made before stores recorded them)
  if made != read:
    differ = [k for k in read if read[k] != made.get(k)]
    raise errors.DataError(
        f"the token store {store.path} holds {store.dataset!r} read with "
        + ", ".join(f"--config.{k}={made.get(k)!r} (not {read[k]!r})" for k in differ)
        + "; give the store's settings, or prepare a store with these."
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


def check_mixture(config, mixes: bool) -> None:
  """`config.mixture` names a finished token store of documents for each source, each holding
  the run's splits, all made with one tokenizer, the one the config names, at weights that
  parse (data/text/mixture.py); one UserError line naming the source otherwise."""
  from vit_jax.data.text import mixture  # pylint: disable=g-import-not-at-top  (mixtures only)

  if config.dataset != datasets.MIXTURE:
    raise errors.ConfigError(
        f"{mixture.STORES_KEY} and {mixture.WEIGHTS_KEY} are read by --config.dataset=mixture, "
        f"not --config.dataset={config.dataset!r}: set dataset=mixture (configs/gpt.py:"
        "dataset=mixture) to train on them, or leave them unset."
    )
  if not mixes:
    raise errors.ConfigError(
        f"--config.dataset=mixture trains causal LMs (configs/gpt.py:dataset=mixture), not "
        f"--config.task={config.task!r}."
    )
  if config.token_store:
    raise errors.ConfigError(
        f"--config.token_store: a mixture reads the stores {mixture.STORES_KEY} names; leave "
        "token_store unset."
    )
  mix = mixture.from_config(config)
  splits = [config[key] for key in data.SPLIT_KEYS]
  opened = {name: _mixture_store(name, path, splits) for name, path in mix.stores.items()}
  first, *others = mix.names
  for name in others:
    if opened[name].tokenizer_fingerprint != opened[first].tokenizer_fingerprint:
      raise errors.DataError(
          f"{mixture.STORES_KEY}: the stores of {first!r} ({mix.stores[first]}) and {name!r} "
          f"({mix.stores[name]}) hold ids of different tokenizers (fingerprints "
          f"{opened[first].tokenizer_fingerprint}, {opened[name].tokenizer_fingerprint}); "
          "prepare every source with one tokenizer: the others with --config.tokenizer.path="
          f"{opened[first].tokenizer_dir()}."
      )
  want = stores.tokenizer_settings(config)
  if all(want != store.tokenizer_settings for store in opened.values()):
    made = opened[first].tokenizer_settings
    raise errors.DataError(
        f"the stores of {mixture.STORES_KEY} were made with another tokenizer than the config "
        "names: "
        + ", ".join(
            f"--config.tokenizer.{k}={made.get(k)!r} (not {want[k]!r})"
            for k in want
            if want[k] != made.get(k)
        )
        + f" for {first!r}; give the settings a store of the mixture was made with."
    )
  for split in evaluated_splits(config):  # every source is evaluated, at any weight
    for name in mix.names:
      check_mixture_split(name, mix.stores[name], split)
  trained = {n for stage in mix.stages for n, weight in stage.weights.items() if weight > 0}
  for name in mix.names:
    entries = opened[name].manifest["splits"][config.train_split]["shards"]
    if name in trained and not sum(entry["examples"] for entry in entries):
      raise errors.DataError(
          f"{mixture.STORES_KEY}: the {config.train_split!r} split of {name!r} "
          f"({mix.stores[name]}) is empty; give it documents, or weight 0."
      )


def _mixture_store(name: str, path: str, splits) -> stores.Store:
  """Source `name`'s store at `path`: finished, of documents, holding `splits` whole."""
  from vit_jax import storage  # pylint: disable=g-import-not-at-top

  where = _source(name, path)
  storage.check(path)
  made = [storage.join(path, f) for f in (stores.MANIFEST_FILE, stores.PLAN_FILE)]
  if not any(storage.exists(f) for f in made):
    what = "is not a token store (no store.json)" if storage.exists(path) else "does not exist"
    raise errors.DataError(
        f"{where} {what}; make the store with python -m vit_jax.prepare "
        f"--config=configs/gpt.py:dataset=DATASET --output={path}, or fix the path."
    )
  store = datasets.open_store(path, splits)  # finished, holding the splits, its files whole
  if store.kind != "documents":
    raise errors.DataError(
        f"{where} holds {store.dataset!r} as {store.kind}; a causal LM reads documents: prepare "
        "it with configs/gpt.py."
    )
  return store


def check_mixture_split(name: str, path: str, split: str) -> None:
  """Source `name`'s store at `path` holds `split`, whole, with tokens to evaluate on."""
  store = datasets.open_store(path, [split])  # a DataError naming the splits it has
  check_has_tokens(store, split, _source(name, path), other="or leave the source out")


def _source(name: str, path: str) -> str:
  return f"--config.mixture.stores: {name}={path}"


def check_has_tokens(
    store, split: str, where: str, *, other: str = "or read another split"
) -> None:
  """Split `split` of `store` has tokens to read; else one DataError naming where the run names
  it (`where`), the store and the fix. An eval split without any would end the run at its first
  eval, after all the training before it."""
  from vit_jax.data import hub  # pylint: disable=g-import-not-at-top  (its split names only)

  entry = store.manifest["splits"][split]
  if any(entry["tokens"].values()):
    return
  holdout = store.manifest.get("read_settings", {}).get("hf_holdout")
  if holdout and split == hub.HELD_OUT:
    more = (
        f"with a smaller --config.hf_holdout than {holdout} (1 document in about {holdout} is "
        "held out)"
    )
  elif store.dataset.startswith(datasets.FILE_PREFIXES):
    more = (
        f"from more documents, or ones with text (every {corpus.VALIDATION_EVERY}th is the "
        "validation split's)"
    )
  else:
    more = "from data whose split holds text"
  raise errors.DataError(
      f"{where}: the {split!r} split of the token store {store.path} ({store.dataset}) holds "
      f"{entry['examples']:,} examples and no tokens, so a run finds nothing to read there; "
      f"prepare the store again {more} into a new --output, {other}."
  )


def evaluated_splits(config) -> list[str]:
  """The splits of `config.dataset` (or of each source of its mixture) the run's evaluators
  read, each once, in order."""
  from vit_jax import evaluate as evaluators  # pylint: disable=g-import-not-at-top

  names = []
  for settings in evaluators.evals_of(config).values():
    split = settings.get("split")
    if settings.get("dataset") == config.dataset and split is not None and split not in names:
      names.append(split)
  return names


def check_split(
    name: str,
    split: str,
    examples: str,
    *,
    key: str,
    data_dir: str | None = None,
    token_store: str | None = None,
    tokenizing: bool = False,
    read_options: data.ReadOptions | None = None,
) -> None:
  """Dataset `name` exists, reads `examples` and has a non-empty `split`; `key` is the config
  key that names the split (`--config.<key>`), for the error message. `token_store`: the run's
  store of `name`, which must hold the split, intact. A streamed TFDS dataset is read only from
  a store, unless `tokenizing` (vit_jax.prepare reads it to make one). `read_options`: how files
  and hf: datasets are read (the text's field or column, what a bad document of files is, an hf:
  dataset's subset and held-out slice); files `tokenizing` reads are checked here only as far as
  their first records: prepare reads them whole, before it writes anything."""
  if token_store and not stream.is_stream(name):
    datasets.check_kind(name, examples, read_options)
    store = datasets.open_store(token_store, [split])  # the split is there, its files whole
    check_has_tokens(store, split, f"--config.{key}={split!r}")
    return
  if datasets.is_streamed(name) and not tokenizing:
    datasets.check_kind(name, examples, read_options)
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
  datasets.check_kind(name, examples, read_options)
  if name.startswith(data.HUB_PREFIX):
    _check_hub_split(name, split, key, data_dir, read_options, tokenizing)
    return
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

  files.check(name, read_options)
  if tokenizing:
    return  # prepare reads every file once, counting, before it writes (store_writer.py)
  count = lambda split: len(
      datasets.memory_examples(name, split, kind=examples, read_options=read_options)
  )
  if count(split) == 0:
    raise too_few_documents(name, count("all"))


def too_few_documents(name: str, count: int) -> errors.DataError:
  every = corpus.VALIDATION_EVERY
  return errors.DataError(
      f"dataset {name!r} has {count} documents, too few for a non-empty train and "
      f"validation split (every {every}th document is held out, so at least {every} are "
      "needed): add files, or use paragraphs:PATTERN to split files at blank lines."
  )


def _check_hub_split(name, split, key, data_dir, read_options, tokenizing) -> None:
  """The split exists and has the text column (a pair's two); one held in memory also a
  document. Pairs are read whole where a bad one is an error, so that it is refused before
  anything is written (prepare, which reads a big dataset here, then reads it again)."""
  from vit_jax.data import hub  # pylint: disable=g-import-not-at-top  (hf: datasets only)

  hub.check_text(name, split, read_options, data_dir, key=key)
  pairs = datasets.reads_pairs(read_options)
  whole = pairs and read_options.bad_documents == "error"
  if tokenizing and not whole:  # a dataset too big to hold is not read through here
    return
  read = hub.documents(name, split, read_options, data_dir)
  if whole:
    read = iter(list(read))
  if next(read, None) is None:
    held_out = split == hub.HELD_OUT and read_options.hf_holdout
    what = "pairs" if pairs else f"documents (no non-empty {read_options.text_key!r})"
    raise errors.DataError(
        f"--config.{key}={split!r} of {name} holds no {what}"
        + (
            f"; hold out more with a smaller --config.hf_holdout than {held_out}"
            if held_out
            else ""
        )
        + "."
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


def check_tokenizer_path(config, workdir: str) -> None:
  """A run's `tokenizer.path` loads, of the kind and size the config names, where the run loads
  it: not when a token store or a mixture gives the tokenizer, nor on a workdir that saved one."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import storage
  from vit_jax.data import tokenizers

  if not config.tokenizer.path:
    return
  if config.token_store or config.dataset == datasets.MIXTURE:
    return
  if storage.exists(storage.join(stores.tokenizer_dir(workdir), tokenizers.META_FILE)):
    return
  tokenizers.from_path(config.tokenizer)


def check_preparation(config, examples: str, output: str, split_names) -> None:
  """What `python -m vit_jax.prepare` reads is there: the config's dataset (not a stream) and
  each split to tokenize; `output` can be written (a bucket needs the gcs extra)."""
  if stream.is_stream(config.dataset):
    raise errors.ConfigError(
        f"--config.dataset={config.dataset!r} is one text tokenized when a run starts: there is "
        "nothing to prepare."
    )
  if config.dataset == datasets.MIXTURE:
    raise errors.ConfigError(
        "--config.dataset=mixture reads stores prepared one by one: prepare each source with "
        "--config=configs/gpt.py:dataset=DATASET --output=STORE, then train with "
        "--config.mixture.stores=NAME=STORE,... (docs/text.md, Mixtures)."
    )
  check_pair_keys(config)
  datasets.check_kind(config.dataset, examples, data.read_options(config))
  from vit_jax import storage  # pylint: disable=g-import-not-at-top

  storage.check(output)
  if config.tokenizer.path:  # loaded (and checked) before the dataset is read
    from vit_jax.data import tokenizers  # pylint: disable=g-import-not-at-top

    tokenizers.from_path(config.tokenizer)
  evaluated = evaluated_splits(config)
  for split in split_names:
    check_split(
        config.dataset,
        split,
        examples,
        key="splits",
        data_dir=config.data_dir,
        tokenizing=True,
        read_options=data.read_options(config),
    )
    if split in evaluated and config.dataset.startswith(data.HUB_PREFIX):
      _check_evaluated_hub_split(config, split)


def _check_evaluated_hub_split(config, split: str) -> None:
  """An hf: split the run evaluates on holds a document (its count is known only once it is
  tokenized; a files: dataset's splits are counted by the scan before anything is written, and
  a TFDS split is checked by _check_tfds_split). Reads up to its first document: about
  hf_holdout documents of the held-out split."""
  from vit_jax.data import hub  # pylint: disable=g-import-not-at-top  (hf: datasets only)

  options = data.read_options(config)
  if next(iter(hub.documents(config.dataset, split, options, config.data_dir)), None) is not None:
    return
  what = (
      "pairs" if datasets.reads_pairs(options) else f"documents (no non-empty {options.text_key!r})"
  )
  if split == hub.HELD_OUT and options.hf_holdout:
    fix = (
        f"hold out more with a smaller --config.hf_holdout than {options.hf_holdout} (1 "
        f"document in about {options.hf_holdout} is held out)"
    )
  else:
    fix = "add documents to it, or evaluate on another split (--config.eval_split)"
  raise errors.DataError(
      f"--config.dataset={config.dataset}: its {split!r} split, which the run evaluates on, "
      f"holds no {what}; {fix}. Nothing was written."
  )
