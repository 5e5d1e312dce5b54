"""Text datasets by name: TFDS, local files, the embedded corpus, toy tasks.

    read_examples("c4", "train", kind="documents", shard=k, shard_count=n)

Names:
  embedded                  the corpus shipped with Python (vit_jax.data.text.corpus)
  files:/path/*.txt         files (local or gs://), one document per file; .jsonl, .jsonl.gz
                            and .jsonl.zst files one per line, .parquet one per row (files.py)
  paragraphs:/path/*.txt    .txt files, documents split at blank lines
  hf:NAME_OR_DIR            a Hugging Face hub dataset or a folder of one (vit_jax/data/hub.py),
                            documents from the column --config.text_key
  (files: and hf: hold pairs when --config.source_key and --config.target_key name their fields)
  c4, lm1b, wikipedia, tiny_shakespeare          documents (TFDS)
  imdb_reviews, glue/sst2, ag_news_subset        labeled texts (TFDS)
  wmt14_translate/de-en                          translation pairs (TFDS)
  toy_reverse, toy_number_words                  offline seq2seq pairs

Examples come in three kinds: 'documents' (str), 'labeled'
((texts tuple, label int)) and 'pairs' ((source str, target str)). A labeled
dataset also serves documents (its texts), so one can language-model imdb.

Splits: 'train' and 'validation' map to each dataset's own split names; any
other string is passed to TFDS as is ('train[:1%]'). Files and the
embedded corpus hold out every 20th document as 'validation'; an hf: dataset has its own
splits, and the slice --config.hf_holdout holds out where it has no validation split.

Training reads a split as tokens by index (`open_split`, a token_store.Split): a dataset held
in memory (`in_memory`, the embedded corpus, files, toy tasks) is tokenized whole when a run
starts (once per run, `data.opened_once`), into the layout a token store has; a streamed
dataset (`is_streamed`: c4, lm1b, wikipedia, wmt14, an hf: dataset on the hub) is read only from
its token store, made once by `python -m vit_jax.prepare`, which reads it here shard by shard
(`read_examples`), as it reads files too big to hold (streamed, never whole).

`read_options` (data.read_options of the config) say how files and hf: datasets are read: the
field or column of the text (jsonl, parquet, hf:), what a bad document of files is (an error, or
skipped with bad_documents="skip", files.py), and an hf: dataset's subset and held-out slice.
"""

import dataclasses
import functools
import itertools
import math
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax import startup
from vit_jax.config import args as config_args
from vit_jax.data.text import corpus
from vit_jax.data.text import token_store

KINDS = ("documents", "labeled", "pairs")
TOY_SIZES = {"train": 50_000, "validation": 1_000, "test": 1_000}


@dataclasses.dataclass(frozen=True)
class TfdsText:
  """Where a TFDS text dataset keeps its text."""

  kind: str
  tfds_name: str
  text_keys: tuple[str, ...]
  label_key: Optional[str] = None
  splits: tuple[tuple[str, str], ...] = (("train", "train"), ("validation", "validation"))
  in_memory: bool = False  # Small enough to hold: exact shuffle and resume.
  paragraphs: bool = False  # One huge text: split it at blank lines.
  num_classes: Optional[int] = None  # labeled: how many classes its labels have
  eval_split: str = "validation"  # the split a config evaluates on by default


TFDS_DATASETS = {
    "c4": TfdsText("documents", "c4/en", ("text",)),
    "lm1b": TfdsText(
        "documents", "lm1b", ("text",), splits=(("train", "train"), ("validation", "test"))
    ),
    "wikipedia": TfdsText(
        "documents",
        "wikipedia/20230601.en",
        ("text",),
        splits=(("train", "train[:99%]"), ("validation", "train[99%:]")),
    ),
    "tiny_shakespeare": TfdsText(
        "documents", "tiny_shakespeare", ("text",), in_memory=True, paragraphs=True
    ),
    "imdb_reviews": TfdsText(
        "labeled",
        "imdb_reviews",
        ("text",),
        "label",
        splits=(("train", "train"), ("validation", "test")),
        in_memory=True,
        num_classes=2,
        eval_split="test",
    ),
    "glue/sst2": TfdsText(
        "labeled", "glue/sst2", ("sentence",), "label", in_memory=True, num_classes=2
    ),
    # 4 topics; 120,000 train and 7,600 test headlines, each with its description.
    "ag_news_subset": TfdsText(
        "labeled",
        "ag_news_subset",
        ("title", "description"),
        "label",
        splits=(("train", "train"), ("validation", "test")),
        in_memory=True,
        num_classes=4,
        eval_split="test",
    ),
    "wmt14_translate/de-en": TfdsText("pairs", "wmt14_translate/de-en", ("de", "en")),
}
# Dataset name -> the task of vit_jax/data/text/seq2seq_toy.py that generates it (loaded only
# when a run names one).
TOY_DATASETS = {"toy_reverse": "reverse", "toy_number_words": "number_words"}
FILE_PREFIXES = ("files:", "paragraphs:")  # vit_jax/data/text/files.py, imported when named
# `dataset=mixture`: a causal LM reads the token stores of `config.mixture` at its weights
# (vit_jax/data/text/mixture.py), not a dataset of this module.
MIXTURE = "mixture"


def known_names() -> list[str]:
  return (
      ["embedded"]
      + sorted(TFDS_DATASETS)
      + sorted(TOY_DATASETS)
      + [p + "/path/*.txt" for p in FILE_PREFIXES]
      + [data.HUB_PREFIX + "NAME_OR_DIR"]
  )


def _hub():
  """data/hub.py, imported only for an hf: dataset (its module loads `datasets` when opening)."""
  from vit_jax.data import hub  # pylint: disable=g-import-not-at-top

  return hub


def reads_pairs(read_options: Optional[data.ReadOptions]) -> bool:
  """Whether files: and hf: datasets are read as pairs: the config names a source or a target
  key (vit_jax/data/text/checks.py requires both)."""
  return read_options is not None and (
      read_options.source_key is not None or read_options.target_key is not None
  )


def holds_pairs(name: str, read_options: Optional[data.ReadOptions] = None) -> bool:
  """Whether dataset `name`, read with `read_options`, holds pairs (False for a name that is no
  dataset of this module: a stream:, a mixture, an unknown one, which the checks name)."""
  if name.startswith(FILE_PREFIXES + (data.HUB_PREFIX,)):
    return reads_pairs(read_options)
  return name in TOY_DATASETS or (name in TFDS_DATASETS and TFDS_DATASETS[name].kind == "pairs")


def dataset_kind(name: str, read_options: Optional[data.ReadOptions] = None) -> str:
  """What dataset `name` holds, read with `read_options` (files: and hf: hold pairs where they
  name a source and a target key)."""
  if name.startswith(FILE_PREFIXES + (data.HUB_PREFIX,)):
    return "pairs" if reads_pairs(read_options) else "documents"
  if name == "embedded":
    return "documents"
  if name in TOY_DATASETS:
    return "pairs"
  if name in TFDS_DATASETS:
    return TFDS_DATASETS[name].kind
  raise errors.ConfigError(f"Unknown text dataset {name!r}. Known: " f"{', '.join(known_names())}.")


def check_kind(name: str, kind: str, read_options: Optional[data.ReadOptions] = None) -> None:
  """A ConfigError unless dataset `name`, read with `read_options`, serves examples of `kind`
  (labeled ones serve documents too)."""
  if kind not in KINDS:
    raise errors.ConfigError(f"Unknown example kind {kind!r}; known: {KINDS}.")
  have = dataset_kind(name, read_options)
  if have != kind and not (kind == "documents" and have == "labeled"):
    with_kind = [n for n in known_names() if dataset_kind(n) == kind]
    if name.startswith(FILE_PREFIXES + (data.HUB_PREFIX,)):
      how = "name their fields with --config.source_key and --config.target_key"
      if have == "pairs":
        how = "leave --config.source_key and --config.target_key unset to read documents"
      with_kind.append(f"files: and hf: datasets ({how})")
    raise errors.ConfigError(
        f"Dataset {name!r} holds {have}, but {kind} are needed "
        f"here; datasets with {kind}: {', '.join(with_kind)}."
    )


def is_streamed(name: str) -> bool:
  """A dataset too big to hold in memory (a TFDS one, or a hub dataset named hf:ORG/NAME):
  training reads it from a token store."""
  if name.startswith(data.HUB_PREFIX):
    return _hub().is_streamed(name)
  return name in TFDS_DATASETS and not TFDS_DATASETS[name].in_memory


def texts_per_example(name: str) -> int:
  """How many texts a labeled example of `name` has (one for other kinds' documents)."""
  return len(TFDS_DATASETS[name].text_keys) if name in TFDS_DATASETS else 1


def memory_examples(
    name: str,
    split: str = "train",
    *,
    kind: str = "documents",
    data_dir: Optional[str] = None,
    read_options: Optional[data.ReadOptions] = None,
) -> list:
  """Every example of `kind` of a dataset held in memory, in stored order."""
  check_kind(name, kind, read_options)
  if is_streamed(name):
    raise errors.DataError(f"{name!r} is streamed into a token store, not held in memory.")
  if name.startswith(data.HUB_PREFIX):
    return list(_hub().documents(name, split, read_options, data_dir))
  if name == "embedded":
    return list(corpus.split_documents(split))
  if name.startswith(FILE_PREFIXES):
    from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

    return list(files.documents(name, split, read_options))
  if name in TOY_DATASETS:
    return list(_toy_examples(TOY_DATASETS[name], split))
  return list(_tfds_examples(TFDS_DATASETS[name], split, kind, data_dir))


def read_examples(
    name: str,
    split: str = "train",
    *,
    kind: str = "documents",
    data_dir: Optional[str] = None,
    shard: int = 0,
    shard_count: int = 1,
    read_options: Optional[data.ReadOptions] = None,
) -> Iterator[Any]:
  """The examples of `kind` of shard `shard` of `shard_count` of the split, in stored order:
  contiguous parts that together hold the split once (a token store's shards; an hf: dataset's
  number of them is `num_shards`'). Files are streamed, never held whole."""
  check_kind(name, kind, read_options)
  if not 0 <= shard < shard_count:
    raise ValueError(f"shard={shard} must be in [0, shard_count={shard_count}).")
  if name.startswith(data.HUB_PREFIX):
    return _hub().documents(
        name, split, read_options, data_dir, shard=shard, shard_count=shard_count
    )
  if is_streamed(name):
    return _tfds_examples(TFDS_DATASETS[name], split, kind, data_dir, shard, shard_count)
  if name.startswith(FILE_PREFIXES):
    from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

    return files.documents(name, split, read_options, shard=shard, shard_count=shard_count)
  examples = memory_examples(name, split, kind=kind, data_dir=data_dir)
  lo, hi = (len(examples) * k // shard_count for k in (shard, shard + 1))
  return iter(examples[lo:hi])


def read_settings(name: str, read_options: Optional[data.ReadOptions]) -> dict:
  """The read options that decide what `name`'s splits hold (a token store records them): the
  text field of files (or a pair's two) and what their bad documents are, an hf: dataset's text
  column (or a pair's two, and what its bad pairs are), subset and held-out slice; none for the
  others."""
  fields = ("source_key", "target_key") if reads_pairs(read_options) else ("text_key",)
  if name.startswith(FILE_PREFIXES):
    keys = (*fields, "bad_documents")
  elif name.startswith(data.HUB_PREFIX) and reads_pairs(read_options):
    keys = (*fields, "bad_documents", "hf_subset", "hf_holdout")
  elif name.startswith(data.HUB_PREFIX):
    keys = ("text_key", "hf_subset", "hf_holdout")
  else:
    return {}
  return {k: getattr(read_options, k) for k in keys}


def num_shards(
    name: str,
    split: str,
    examples_per_shard: int,
    *,
    data_dir: Optional[str] = None,
    read_options: Optional[data.ReadOptions] = None,
) -> int:
  """How many shards a token store of the split has: `examples_per_shard` examples each, or an
  hf: dataset's own parts (a streamed one's data files)."""
  if name.startswith(data.HUB_PREFIX):
    return _hub().text_shards(name, split, read_options, data_dir, examples_per_shard)
  count = num_examples(name, split, data_dir=data_dir, read_options=read_options)
  return max(1, math.ceil(count / examples_per_shard))


def num_examples(
    name: str,
    split: str,
    data_dir: Optional[str] = None,
    read_options: Optional[data.ReadOptions] = None,
) -> int:
  """How many examples the split holds (a TFDS dataset's from its metadata; an hf: dataset's
  counted by reading it)."""
  if name.startswith(data.HUB_PREFIX):
    return sum(1 for _ in _hub().documents(name, split, read_options, data_dir))
  if not is_streamed(name):
    kind = dataset_kind(name, read_options)
    options = dict(kind=kind, data_dir=data_dir, read_options=read_options)
    return len(memory_examples(name, split, **options))
  spec = TFDS_DATASETS[name]
  builder = _builder(spec, data_dir)
  if builder.info.splits:
    return builder.info.splits[dict(spec.splits).get(split, split)].num_examples
  # A builder without split metadata (tfds.testing.mock_data's): count by reading.
  return sum(1 for _ in _tfds_examples(spec, split, dataset_kind(name), data_dir))


# --- a split as tokens, read by index ------------------------------------------
def open_store(path: str, splits: Sequence[str] = ()) -> token_store.Store:
  """The token store at `path` (checked once per run; the files of `splits` too)."""
  return data.opened(
      ("token store", path, tuple(splits)), lambda: token_store.open_store(path, splits)
  )


def open_split(
    dataset: str,
    split: str,
    *,
    kind: str,
    tokenizer,
    token_store_path: Optional[str] = None,
    data_dir: Optional[str] = None,
    read_options: Optional[data.ReadOptions] = None,
) -> token_store.Split:
  """Split `split` of `dataset` as examples of `kind`: the store's where `token_store_path` names
  one (made from `dataset`), else tokenized in memory (each once per run, `data.opened_once`),
  read with `read_options` (files with fields, hf: datasets)."""
  if token_store_path:  # one Split per run: the offsets it loads serve training and evals
    store = open_store(token_store_path)
    return data.opened(("token split", token_store_path, split), lambda: store.split(split))
  if is_streamed(dataset):
    raise not_prepared_error(dataset)
  key = ("text split", dataset, split, kind, tokenizer.fingerprint, data_dir, read_options)
  return data.opened(
      key,
      lambda: tokenize(
          memory_examples(dataset, split, kind=kind, data_dir=data_dir, read_options=read_options),
          kind,
          tokenizer,
      ),
  )


def not_prepared_error(dataset: str) -> errors.DataError:
  why = (
      "is streamed from the hub"
      if dataset.startswith(data.HUB_PREFIX)
      else "is too big to tokenize at every start"
  )
  return errors.DataError(
      f"dataset {dataset!r} {why}: tokenize it once into a token "
      f"store with `{config_args.prepare_command(output=True)}`, then train with "
      "--config.token_store=DIR (docs/text.md)."
  )


def tokenize(examples: Sequence[Any], kind: str, tokenizer) -> token_store.Split:
  """`examples` of `kind` (documents: str; pairs: (source, target); labeled: (texts, label)) as
  an in-memory split."""
  examples = list(examples)
  labels = None
  if kind == "documents":
    columns = [list(examples)]
  elif kind == "pairs":
    columns = [[s for s, _ in examples], [t for _, t in examples]]
  else:
    count = len(examples[0][0]) if examples else 1
    if any(len(texts) != count for texts, _ in examples):
      raise errors.DataError(f"labeled examples must all have {count} texts.")
    columns = [[texts[i] for texts, _ in examples] for i in range(count)]
    labels = [label for _, label in examples]
  encoded = [tokenizer.encode_batch(column) for column in columns]
  rows = [[np.asarray(e[i], np.int32) for e in encoded] for i in range(len(examples))]
  return token_store.in_memory(token_store.fields_of(kind, len(columns)), rows, labels)


def as_split(dataset: Any, kind: str, tokenizer, **open_args) -> token_store.Split:
  """A Split as it is; a dataset name opened (`open_split`); a list of examples tokenized."""
  if isinstance(dataset, token_store.Split):
    return dataset
  if isinstance(dataset, str):
    return open_split(dataset, kind=kind, tokenizer=tokenizer, **open_args)
  return tokenize(dataset, kind, tokenizer)


def dataset_texts(
    name: str,
    split: str = "train",
    max_texts: Optional[int] = None,
    data_dir: Optional[str] = None,
    read_options: Optional[data.ReadOptions] = None,
) -> list[str]:
  """Raw texts of a dataset, in stored order, to train a tokenizer on (a streamed one and files
  are read only as far as `max_texts`).

  Pairs give both sides (a shared source/target vocabulary).
  """
  kind = dataset_kind(name, read_options)
  examples = read_examples(name, split, kind=kind, data_dir=data_dir, read_options=read_options)
  texts = (t for example in examples for t in _example_texts(kind, example))
  return list(itertools.islice(texts, max_texts))


def _example_texts(kind: str, example: Any) -> tuple[str, ...]:
  if kind == "documents":
    return (example,)
  if kind == "labeled":
    return example[0]
  return example


# --- toy seq2seq -------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _toy_examples(task: str, split: str) -> tuple[tuple[str, str], ...]:
  if split not in TOY_SIZES:
    raise errors.DataError(f"Unknown split {split!r} for toy_{task}; use " f"{sorted(TOY_SIZES)}.")
  from vit_jax.data.text import seq2seq_toy  # pylint: disable=g-import-not-at-top

  return tuple(seq2seq_toy.make_examples(task, TOY_SIZES[split], split))


# --- TFDS --------------------------------------------------------------------
def _builder(spec: TfdsText, data_dir: Optional[str]):
  from vit_jax.data import tfds_builders  # pylint: disable=g-import-not-at-top  (TFDS only)

  return tfds_builders.open_builder(spec.tfds_name, data_dir=data_dir)  # prepared, or says how


def _tfds_examples(
    spec: TfdsText,
    split: str,
    kind: str,
    data_dir: Optional[str],
    shard: int = 0,
    shard_count: int = 1,
) -> Iterator[Any]:
  """Part `shard` of `shard_count` of the split (TFDS's even_splits), in stored order; a dataset
  of one huge text (`paragraphs`) is read whole and split at blank lines."""
  # pylint: disable=import-outside-toplevel  (only TFDS datasets load TFDS)
  startup.import_tensorflow()  # without Keras, before TFDS imports it
  import tensorflow_datasets as tfds

  from vit_jax import data

  tfds_split = dict(spec.splits).get(split, split)
  builder = _builder(spec, data_dir)
  part = tfds.even_splits(tfds_split, n=shard_count)[shard] if shard_count > 1 else tfds_split
  read_config = tfds.ReadConfig(options=data.tf_data_options())
  ds = builder.as_dataset(split=part, shuffle_files=False, read_config=read_config)
  for example in tfds.as_numpy(ds):
    converted = _convert(spec, kind, example)
    if spec.paragraphs:
      from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

      yield from files.paragraphs(converted)
    else:
      yield converted


def _convert(spec: TfdsText, kind: str, example: dict) -> Any:
  texts = tuple(example[k].decode("utf-8") for k in spec.text_keys)
  if spec.kind == "documents":
    return texts[0]
  if spec.kind == "labeled":
    if kind == "documents":
      return "\n".join(texts)
    return texts, int(example[spec.label_key])
  return texts
