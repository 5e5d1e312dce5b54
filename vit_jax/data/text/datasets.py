"""Text datasets by name: TFDS, local files, the embedded corpus, toy tasks.

    load_source("c4", "train", kind="documents", process_index=..., ...)

Names:
  embedded                  the corpus shipped with Python (vit_jax.data.text.corpus)
  files:/path/*.txt         local files, one document per file
  paragraphs:/path/*.txt    local files, documents split at blank lines
  c4, lm1b, wikipedia, tiny_shakespeare          documents (TFDS)
  imdb_reviews, glue/sst2, ag_news_subset        labeled texts (TFDS)
  wmt14_translate/de-en                          translation pairs (TFDS)
  toy_reverse, toy_number_words                  offline seq2seq pairs

Examples come in three kinds: 'documents' (str), 'labeled'
((texts tuple, label int)) and 'pairs' ((source str, target str)). A labeled
dataset also serves documents (its texts), so one can language-model imdb.

Splits: 'train' and 'validation' map to each dataset's own split names; any
other string is passed to TFDS as is ('train[:1%]'). Local files and the
embedded corpus hold out every 20th document as 'validation'.

Each process reads only its share: TFDS via `tfds.split_for_jax_process`,
in-memory data by a stride over examples.
"""

import dataclasses
import functools
import glob
import itertools
import os
import re
from typing import Any, Iterator, Optional

from vit_jax import errors
from vit_jax.data.text import corpus
from vit_jax.data.text import sources as text_sources

KINDS = ("documents", "labeled", "pairs")
TOY_SIZES = {"train": 50_000, "validation": 1_000, "test": 1_000}
# Streaming TFDS sources shuffle examples in a buffer of this many.
SHUFFLE_BUFFER = 10_000


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
FILE_PREFIXES = ("files:", "paragraphs:")


def known_names() -> list[str]:
  return (
      ["embedded"]
      + sorted(TFDS_DATASETS)
      + sorted(TOY_DATASETS)
      + [p + "/path/*.txt" for p in FILE_PREFIXES]
  )


def dataset_kind(name: str) -> str:
  if name == "embedded" or name.startswith(FILE_PREFIXES):
    return "documents"
  if name in TOY_DATASETS:
    return "pairs"
  if name in TFDS_DATASETS:
    return TFDS_DATASETS[name].kind
  raise errors.ConfigError(f"Unknown text dataset {name!r}. Known: " f"{', '.join(known_names())}.")


def check_kind(name: str, kind: str) -> None:
  """A ConfigError unless dataset `name` serves examples of `kind` (labeled ones serve documents
  too)."""
  if kind not in KINDS:
    raise errors.ConfigError(f"Unknown example kind {kind!r}; known: {KINDS}.")
  have = dataset_kind(name)
  if have != kind and not (kind == "documents" and have == "labeled"):
    with_kind = [n for n in known_names() if dataset_kind(n) == kind]
    raise errors.ConfigError(
        f"Dataset {name!r} holds {have}, but {kind} are needed "
        f"here; datasets with {kind}: {', '.join(with_kind)}."
    )


def load_source(
    name: str,
    split: str = "train",
    *,
    kind: str = "documents",
    data_dir: Optional[str] = None,
    process_index: int = 0,
    process_count: int = 1,
    seed: int = 0,
) -> text_sources.Source:
  """This process's share of dataset `name` as examples of `kind`."""
  check_kind(name, kind)
  text_sources.check_process(process_index, process_count)
  share = functools.partial(
      text_sources.take_share, process_index=process_index, process_count=process_count
  )
  if name == "embedded":
    return text_sources.InMemorySource(share(corpus.split_documents(split)), seed)
  if name.startswith(FILE_PREFIXES):
    return text_sources.InMemorySource(share(_file_documents(name, split)), seed)
  if name in TOY_DATASETS:
    examples = _toy_examples(TOY_DATASETS[name], split)
    return text_sources.InMemorySource(share(examples), seed)
  return _tfds_source(
      TFDS_DATASETS[name], split, kind, data_dir, process_index, process_count, seed
  )


def dataset_texts(
    name: str, split: str = "train", max_texts: Optional[int] = None, data_dir: Optional[str] = None
) -> list[str]:
  """Raw texts of a dataset, in stored order, to train a tokenizer on.

  Pairs give both sides (a shared source/target vocabulary).
  """
  kind = dataset_kind(name)
  source = load_source(name, split, kind=kind, data_dir=data_dir)
  texts = (t for example in source.single_pass() for t in _example_texts(kind, example))
  return list(itertools.islice(texts, max_texts))


def _example_texts(kind: str, example: Any) -> tuple[str, ...]:
  if kind == "documents":
    return (example,)
  if kind == "labeled":
    return example[0]
  return example


# --- local files -------------------------------------------------------------
def _file_documents(name: str, split: str) -> list[str]:
  prefix, pattern = name.split(":", 1)
  by_paragraph = prefix == "paragraphs"
  paths = sorted(glob.glob(os.path.expanduser(pattern)))
  if not paths:
    raise errors.MissingFileError(f"No files match {pattern!r} (dataset {name!r}).")
  documents = []
  for path in paths:
    with open(path, encoding="utf-8", errors="replace") as f:
      text = f.read()
    if by_paragraph:
      documents.extend(_paragraphs(text))
    elif text.strip():
      documents.append(text)
  return _hold_out(documents, split, name)


def _paragraphs(text: str) -> list[str]:
  return [p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip()]


def _hold_out(documents: list, split: str, name: str) -> list:
  """Every 20th document is validation, like the embedded corpus."""
  every = corpus.VALIDATION_EVERY
  if split == "train":
    return [d for i, d in enumerate(documents) if i % every != every - 1]
  if split in ("validation", "test"):
    return [d for i, d in enumerate(documents) if i % every == every - 1]
  if split == "all":
    return documents
  raise errors.DataError(
      f"Unknown split {split!r} for {name!r}; use 'train', " "'validation' or 'all'."
  )


# --- toy seq2seq -------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _toy_examples(task: str, split: str) -> tuple[tuple[str, str], ...]:
  if split not in TOY_SIZES:
    raise errors.DataError(f"Unknown split {split!r} for toy_{task}; use " f"{sorted(TOY_SIZES)}.")
  from vit_jax.data.text import seq2seq_toy  # pylint: disable=g-import-not-at-top

  return tuple(seq2seq_toy.make_examples(task, TOY_SIZES[split], split))


# --- TFDS --------------------------------------------------------------------
def _tfds_source(
    spec: TfdsText,
    split: str,
    kind: str,
    data_dir: Optional[str],
    process_index: int,
    process_count: int,
    seed: int,
) -> text_sources.Source:
  # pylint: disable=import-outside-toplevel  (only TFDS datasets load TFDS)
  import tensorflow_datasets as tfds

  from vit_jax import data
  from vit_jax.data import tfds_builders

  tfds_split = dict(spec.splits).get(split, split)
  builder = tfds_builders.open_builder(spec.tfds_name, data_dir=data_dir)  # prepared, or says how
  convert = functools.partial(_convert, spec, kind)

  def read(process_split, shuffle_seed=None) -> Iterator[Any]:
    read_config = tfds.ReadConfig(shuffle_seed=shuffle_seed, options=data.tf_data_options())
    ds = builder.as_dataset(
        split=process_split, shuffle_files=shuffle_seed is not None, read_config=read_config
    )
    return (convert(example) for example in tfds.as_numpy(ds))

  if spec.paragraphs:
    # A single huge example: every process reads it, then strides paragraphs.
    documents = [p for text in read(tfds_split) for p in _paragraphs(text)]
    return text_sources.InMemorySource(
        text_sources.take_share(documents, process_index, process_count), seed
    )

  process_split = tfds.split_for_jax_process(
      tfds_split, process_index=process_index, process_count=process_count
  )
  if spec.in_memory:
    return text_sources.InMemorySource(read(process_split), seed)

  def epoch(e: int) -> Iterator[Any]:
    shuffle_seed = int(text_sources.seeded_rng(seed, e).integers(2**31))
    return text_sources.shuffle_buffer(
        read(process_split, shuffle_seed), SHUFFLE_BUFFER, text_sources.seeded_rng(seed, e, 1)
    )

  return text_sources.StreamingSource(epoch, lambda: read(process_split))


def _convert(spec: TfdsText, kind: str, example: dict) -> Any:
  texts = tuple(example[k].decode("utf-8") for k in spec.text_keys)
  if spec.kind == "documents":
    return texts[0]
  if spec.kind == "labeled":
    if kind == "documents":
      return "\n".join(texts)
    return texts, int(example[spec.label_key])
  return texts
