"""Building, loading and keeping tokenizers: the one entry point to use.

    tok = build_tokenizer("spm_unigram", corpus.split_documents("train"), 8000)
    tok = load_or_build(workdir + "/tokenizer", lambda: build_tokenizer(...))
    tok = load_pretrained("/path/spiece.model")      # or .../tokenizer.json

A training workdir keeps its tokenizer (`load_or_build`), so evaluation and
resumed runs use the very same vocabulary; a checkpoint that records
`tok.fingerprint` can be checked with `check_fingerprint`.
"""

import importlib
from typing import Callable, Iterable, Optional

from vit_jax import errors
from vit_jax import storage
from vit_jax.data.tokenizers import base as tokenizer_base
from vit_jax.data.tokenizers.base import check_fingerprint
from vit_jax.data.tokenizers.base import Tokenizer
from vit_jax.data.tokenizers.base import TokenizerMismatchError

# Each trainable kind -> the class that trains it ("module.Class" under vit_jax/data/tokenizers).
# The classes load on first use: a character-level run imports neither SentencePiece nor Hugging
# Face tokenizers.
TRAINERS = {
    "char": "char.CharTokenizer",
    "spm_unigram": "spm.SentencePieceTokenizer",
    "spm_bpe": "spm.SentencePieceTokenizer",
    "byte_bpe": "hf.HfTokenizer",
}
TRAINABLE_KINDS = tuple(TRAINERS)
_CLASSES = {path.split(".")[1]: path for path in TRAINERS.values()}  # exported by __getattr__

__all__ = [  # noqa: PLE0604 -- the names of _CLASSES, loaded by __getattr__
    *_CLASSES,
    "Tokenizer",
    "TokenizerMismatchError",
    "TRAINABLE_KINDS",
    "build_tokenizer",
    "check_fingerprint",
    "from_settings",
    "load_or_build",
    "load_pretrained",
    "load_tokenizer",
    "saved_kind",
]


def _load_class(path: str) -> type:
  module, name = path.split(".")
  return getattr(importlib.import_module(f"vit_jax.data.tokenizers.{module}"), name)


def __getattr__(name: str):
  if name in _CLASSES:
    return _load_class(_CLASSES[name])
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def saved_kind(kind: str) -> str:
  """The `kind` a tokenizer trained as `kind` saves (a resumed workdir's is checked against it);
  a kind that is not trainable is returned as it is."""
  return _load_class(TRAINERS[kind]).kind if kind in TRAINERS else kind


def _tokenizer_load(directory: str) -> Tokenizer:
  """`Tokenizer.load`, with the class of the saved kind imported first (the cheap ones first)."""
  kind = tokenizer_base.read_meta(directory).get("kind")
  for path in dict.fromkeys(TRAINERS.values()):
    if tokenizer_base.is_registered(kind):
      break
    _load_class(path)
  return Tokenizer.load(directory)


def build_tokenizer(
    kind: str, texts: Iterable[str], vocab_size: Optional[int] = None, **options
) -> Tokenizer:
  """Trains a tokenizer of `kind` on `texts`.

  char: every character of `texts` (vocab_size, if set, keeps the most
    frequent ones). spm_unigram / spm_bpe: SentencePiece (options go to its
    trainer). byte_bpe: Hugging Face byte-level BPE.
  """
  if kind not in TRAINABLE_KINDS:
    raise errors.ConfigError(
        f"Unknown tokenizer kind {kind!r}; known: "
        f"{', '.join(TRAINABLE_KINDS)} (or load_pretrained)."
    )
  trainer = _load_class(TRAINERS[kind])
  if kind == "char":
    return trainer.train(texts, vocab_size)
  if vocab_size is None:
    raise errors.ConfigError(f"Tokenizer kind {kind!r} needs a vocab_size.")
  if kind == "byte_bpe":
    return trainer.train_byte_level_bpe(texts, vocab_size, **options)
  return trainer.train(texts, vocab_size, model_type=kind.removeprefix("spm_"), **options)


def from_settings(settings, texts: Callable[[], Iterable[str]]) -> Tokenizer:
  """The tokenizer a config's `tokenizer` block describes: loaded from its `path`, or a `kind`
  tokenizer of `vocab_size` trained on `texts()`."""
  if settings.path:
    return load_pretrained(settings.path)
  return build_tokenizer(settings.kind, texts(), settings.vocab_size)


def load_pretrained(path: str, special_ids: Optional[dict] = None) -> Tokenizer:
  """Loads an existing SentencePiece `.model` or HF `tokenizer.json`."""
  if path.endswith(".json"):
    return _load_class(TRAINERS["byte_bpe"]).from_file(path, special_ids)
  if path.endswith(".model"):
    return _load_class(TRAINERS["spm_unigram"]).from_file(path, special_ids)
  raise errors.ConfigError(
      f"Don't know how to load {path!r}: expected a "
      "SentencePiece '.model' or a Hugging Face 'tokenizer.json'."
  )


def load_tokenizer(directory: str) -> Tokenizer:
  """Loads a tokenizer saved with `tok.save(directory)`."""
  return _tokenizer_load(directory)


def load_or_build(
    directory: str, build: Callable[[], Tokenizer], expected_fingerprint: Optional[str] = None
) -> Tokenizer:
  """The workdir's saved tokenizer, or `build()` saved there on first use.

  `expected_fingerprint` (e.g. read from a checkpoint) makes a different
  tokenizer an error instead of a silent vocabulary change.
  """
  if storage.exists(storage.join(directory, tokenizer_base.META_FILE)):
    tokenizer = _tokenizer_load(directory)
  else:
    tokenizer = build()
    tokenizer.save(directory)
  if expected_fingerprint is not None:
    check_fingerprint(tokenizer, expected_fingerprint, context=f"the checkpoint using {directory}")
  return tokenizer
