"""Building, loading and keeping tokenizers: the one entry point to use.

    tok = build_tokenizer("spm_unigram", corpus.split_documents("train"), 8000)
    tok = load_or_build(workdir + "/tokenizer", lambda: build_tokenizer(...))
    tok = load_pretrained("/path/spiece.model")      # or .../tokenizer.json, or STORE/tokenizer

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
# What `load_pretrained` (and so `tokenizer.path`) reads.
PATH_FORMS = (
    "a token store's or workdir's tokenizer folder (DIR/tokenizer) or a file in it, a "
    "SentencePiece .model, or a Hugging Face tokenizer.json"
)
_CLASSES = {path.split(".")[1]: path for path in TRAINERS.values()}  # exported by __getattr__

__all__ = [  # noqa: PLE0604 -- the names of _CLASSES, loaded by __getattr__
    *_CLASSES,
    "Tokenizer",
    "TokenizerMismatchError",
    "TRAINABLE_KINDS",
    "PATH_FORMS",
    "build_tokenizer",
    "check_fingerprint",
    "from_path",
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
  """The tokenizer a config's `tokenizer` block describes: loaded from its `path`
  (`from_path`), or a `kind` tokenizer of `vocab_size` trained on `texts()`."""
  if settings.path:
    return from_path(settings)
  return build_tokenizer(settings.kind, texts(), settings.vocab_size)


def from_path(settings) -> Tokenizer:
  """The tokenizer a config's `tokenizer.path` names (`load_pretrained`), of the `kind` the
  block names (char for a char tokenizer's folder, byte_bpe for a tokenizer.json, spm_unigram or
  spm_bpe for a .model) and, if set, of its `vocab_size`; a ConfigError naming the path and the
  value to give otherwise."""
  path = settings.path
  tokenizer = load_pretrained(path, named="--config.tokenizer.path")
  if tokenizer.kind != saved_kind(settings.kind):
    kinds = " or ".join(k for k in TRAINABLE_KINDS if saved_kind(k) == tokenizer.kind)
    raise errors.ConfigError(
        f"--config.tokenizer.path={path} holds a {tokenizer.kind!r} tokenizer, not a "
        f"{settings.kind!r} one (--config.tokenizer.kind); set --config.tokenizer.kind={kinds}."
    )
  if settings.vocab_size and settings.vocab_size != tokenizer.vocab_size:
    raise errors.ConfigError(
        f"--config.tokenizer.path={path} holds a vocabulary of {tokenizer.vocab_size}, not "
        f"--config.tokenizer.vocab_size={settings.vocab_size}; give {tokenizer.vocab_size}, or "
        "leave vocab_size unset."
    )
  return tokenizer


def saved_folder(path: str) -> Optional[str]:
  """The saved tokenizer's folder (a token store's or workdir's `tokenizer/`) that `path` is or
  holds a file of, or None."""
  for folder in (path, storage.parent(path)):
    if folder and storage.exists(storage.join(folder, tokenizer_base.META_FILE)):
      return folder
  return None


# A model file's ending -> the trainable kind whose class loads it, and the file's name.
_FILES = {
    ".json": ("byte_bpe", "Hugging Face tokenizer.json"),
    ".model": ("spm_unigram", "SentencePiece .model"),
}


def load_pretrained(
    path: str, special_ids: Optional[dict] = None, *, named: Optional[str] = None
) -> Tokenizer:
  """The tokenizer at `path`: a saved tokenizer's folder (DIR/tokenizer of a token store or
  workdir) or any file in it, loaded as it was saved (its kind, special ids and fingerprint),
  unless `special_ids` are given; else an existing SentencePiece `.model` or Hugging Face
  `tokenizer.json`, its special ids `special_ids` (None: found by their usual pieces). Anything
  else is a ConfigError naming the path (as the option `named`, if given) and PATH_FORMS."""
  folder = saved_folder(path) if special_ids is None else None
  if folder is not None:
    return _tokenizer_load(folder)
  shown = f"{named}={path}" if named else path
  kind, file = next((v for end, v in _FILES.items() if path.endswith(end)), (None, None))
  if kind is None or not storage.isfile(path):
    what = "does not exist" if not storage.exists(path) else "is not a tokenizer"
    raise errors.ConfigError(f"{shown} {what}; give {PATH_FORMS}.")
  try:
    return _load_class(TRAINERS[kind]).from_file(path, special_ids)
  except errors.UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except  (Hugging Face's loader raises Exception)
    cause = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    raise errors.ConfigError(f"{shown} is not a {file} ({cause}); give {PATH_FORMS}.") from None


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
