"""Building, loading and keeping tokenizers: the one entry point to use.

    tok = build_tokenizer("spm_unigram", corpus.split_documents("train"), 8000)
    tok = load_or_build(workdir + "/tokenizer", lambda: build_tokenizer(...))
    tok = load_pretrained("/path/spiece.model")      # or .../tokenizer.json, or STORE/tokenizer

A training workdir keeps its tokenizer (`load_or_build`), so evaluation and
resumed runs use the very same vocabulary; a checkpoint that records
`tok.fingerprint` can be checked with `check_fingerprint`.

Below, the interface every tokenizer implements (`Tokenizer`), plus saving and fingerprints.

A tokenizer is saved as a folder: `tokenizer_meta.json` (kind, fingerprint,
special ids) next to the kind's own model file. The fingerprint hashes the
model itself, so a checkpoint can record it and refuse to run with a
different tokenizer (TokenizerMismatchError) instead of silently producing
garbage.
"""

import abc
import functools
import hashlib
import importlib
import json
from typing import Callable, ClassVar, Iterable, Optional, Sequence

import numpy as np

from vit_jax import errors
from vit_jax import storage

META_FILE = "tokenizer_meta.json"
SPECIAL_NAMES = ("pad", "unk", "cls", "sep", "mask", "bos", "eos")
# Piece strings used when we train a tokenizer ourselves, in id order.
DEFAULT_SPECIAL_PIECES = {
    "pad": "<pad>",
    "unk": "<unk>",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "mask": "[MASK]",
    "bos": "<s>",
    "eos": "</s>",
}
# Word-start markers: SentencePiece '▁', byte-level BPE 'Ġ' (space),
# 'Ċ' (newline), 'ĉ' (tab).
_WORD_START_MARKERS = ("▁", "Ġ", "Ċ", "ĉ")

_REGISTRY: dict[str, type["Tokenizer"]] = {}


class TokenizerMismatchError(errors.UserError, ValueError):
  """A tokenizer differs from the one a checkpoint or workdir was made with."""


def is_registered(kind: str) -> bool:
  """Whether the class that saves tokenizers of `kind` has been imported."""
  return kind in _REGISTRY


def require_texts(kind: str, texts: Iterable[str]) -> list[str]:
  """Materializes the non-empty training texts, or says why there are none."""
  texts = [t for t in texts if t and t.strip()]
  if not texts:
    raise errors.DataError(
        f"Cannot train a {kind!r} tokenizer: the training corpus is empty "
        "(it yielded no non-empty text)."
    )
  return texts


class Tokenizer(abc.ABC):
  """Text <-> token ids. Special ids are None where the vocabulary lacks them."""

  kind: ClassVar[str]

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if "kind" in cls.__dict__:
      _REGISTRY[cls.kind] = cls

  def __init__(self, special_ids: dict[str, Optional[int]]):
    unknown = set(special_ids) - set(SPECIAL_NAMES)
    if unknown:
      raise ValueError(
          f"Unknown special token names {sorted(unknown)}; " f"known: {SPECIAL_NAMES}."
      )
    self._special_ids = {n: special_ids.get(n) for n in SPECIAL_NAMES}

  # --- what each kind implements -------------------------------------------
  @property
  @abc.abstractmethod
  def vocab_size(self) -> int:
    ...

  @abc.abstractmethod
  def encode(self, text: str) -> list[int]:
    """Token ids of `text`, without any special tokens added."""

  @abc.abstractmethod
  def decode(self, ids: Sequence[int]) -> str:
    """Text of `ids`; special tokens are dropped."""

  @abc.abstractmethod
  def id_to_piece(self, token_id: int) -> str:
    ...

  @abc.abstractmethod
  def _model_bytes(self) -> bytes:
    """A canonical serialization of the model, hashed for the fingerprint."""

  @abc.abstractmethod
  def _save_model(self, directory: str) -> None:
    ...

  @classmethod
  @abc.abstractmethod
  def _load_model(cls, directory: str, meta: dict) -> "Tokenizer":
    ...

  # --- shared behaviour -----------------------------------------------------
  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return [self.encode(t) for t in texts]

  pad_id = property(lambda self: self._special_ids["pad"])
  unk_id = property(lambda self: self._special_ids["unk"])
  cls_id = property(lambda self: self._special_ids["cls"])
  sep_id = property(lambda self: self._special_ids["sep"])
  mask_id = property(lambda self: self._special_ids["mask"])
  bos_id = property(lambda self: self._special_ids["bos"])
  eos_id = property(lambda self: self._special_ids["eos"])

  @property
  def special_ids(self) -> dict[str, Optional[int]]:
    return dict(self._special_ids)

  def special_id_set(self) -> frozenset[int]:
    """Ids never masked or sampled as random replacements."""
    return frozenset(i for i in self._special_ids.values() if i is not None)

  @functools.cached_property
  def fingerprint(self) -> str:
    digest = hashlib.sha256()
    digest.update(self.kind.encode())
    digest.update(json.dumps(self._special_ids, sort_keys=True).encode())
    digest.update(self._model_bytes())
    return digest.hexdigest()[:16]

  def require(self, *names: str) -> None:
    """Raises if the vocabulary lacks special tokens an objective needs."""
    missing = [n for n in names if self._special_ids[n] is None]
    if missing:
      raise ValueError(
          f"The {self.kind!r} tokenizer has no {', '.join(missing)} token(s), "
          "which this objective needs; pass special_ids=... when loading it."
      )

  def normal_ids(self) -> np.ndarray:
    """Ids that may replace a masked token: everything but special tokens (computed once)."""
    if "_normal_ids" not in self.__dict__:
      special = self.special_id_set()
      ids_V = np.arange(self.vocab_size, dtype=np.int32)
      self.__dict__["_normal_ids"] = ids_V[~np.isin(ids_V, list(special))]
    return self.__dict__["_normal_ids"]

  def word_starts(self, tokens: np.ndarray) -> np.ndarray:
    """bool, same shape as `tokens` (..., L): token begins a new word.

    Used by whole-word and span masking. A token starts a word if its piece
    does (word-start marker, punctuation, special) or the previous piece ended
    one (whitespace, punctuation); the first token of a row always does.
    """
    starts_V, ends_V = self._word_tables
    starts = starts_V[tokens]
    starts[..., 1:] |= ends_V[tokens[..., :-1]]
    starts[..., 0] = True
    return starts

  @functools.cached_property
  def _word_tables(self) -> tuple[np.ndarray, np.ndarray]:
    starts_V = np.ones(self.vocab_size, dtype=bool)
    ends_V = np.ones(self.vocab_size, dtype=bool)
    special = self.special_id_set()
    for i in range(self.vocab_size):
      if i not in special:
        piece = self.id_to_piece(i)
        starts_V[i] = self._piece_starts_word(piece)
        ends_V[i] = _piece_ends_word(piece)
    return starts_V, ends_V

  def _piece_starts_word(self, piece: str) -> bool:
    if piece.startswith("##"):  # WordPiece continuation.
      return False
    if not piece or piece.startswith(_WORD_START_MARKERS):
      return True
    if _is_byte_piece(piece):
      return False
    return not _is_word_char(piece[0])

  def save(self, directory: str) -> None:
    storage.makedirs(directory)
    self._save_model(directory)
    meta = {
        "kind": self.kind,
        "fingerprint": self.fingerprint,
        "vocab_size": self.vocab_size,
        "special_ids": self._special_ids,
    }
    storage.write_text(
        storage.join(directory, META_FILE), json.dumps(meta, indent=2, sort_keys=True)
    )

  @staticmethod
  def load(directory: str) -> "Tokenizer":
    """Loads any saved tokenizer and checks the files were not altered."""
    meta = read_meta(directory)
    if meta["kind"] not in _REGISTRY:
      raise ValueError(
          f"{directory} holds a tokenizer of unknown kind "
          f"{meta['kind']!r}; known: {sorted(_REGISTRY)}."
      )
    tokenizer = _REGISTRY[meta["kind"]]._load_model(directory, meta)
    check_fingerprint(tokenizer, meta["fingerprint"], context=f"the tokenizer files in {directory}")
    return tokenizer

  def __repr__(self):
    return (
        f"{type(self).__name__}(vocab_size={self.vocab_size}, " f"fingerprint={self.fingerprint})"
    )


def _is_word_char(char: str) -> bool:
  return char.isalnum() or char == "_"


def _is_byte_piece(piece: str) -> bool:
  """SentencePiece byte-fallback pieces look like '<0xE2>'."""
  return len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">")


def _piece_ends_word(piece: str) -> bool:
  if not piece or piece.endswith(_WORD_START_MARKERS):
    return True
  if _is_byte_piece(piece):
    return False
  return not _is_word_char(piece[-1])


def read_meta(directory: str) -> dict:
  path = storage.join(directory, META_FILE)
  if not storage.exists(path):
    raise errors.MissingFileError(f"No saved tokenizer in {directory} (missing {META_FILE}).")
  return json.loads(storage.read_text(path))


def check_fingerprint(
    tokenizer: Tokenizer, expected: str, *, context: str = "the checkpoint"
) -> None:
  """Raises TokenizerMismatchError unless `tokenizer` has that fingerprint."""
  if tokenizer.fingerprint != expected:
    raise TokenizerMismatchError(
        f"Tokenizer mismatch: {context} was made with the tokenizer whose "
        f"fingerprint is {expected}, but the tokenizer in use is a "
        f"{tokenizer.kind!r} tokenizer with fingerprint "
        f"{tokenizer.fingerprint} (vocab_size={tokenizer.vocab_size}). Load "
        "the tokenizer saved with the run (Tokenizer.load(workdir/tokenizer)) "
        "or start a fresh workdir."
    )


# ---- Building and loading ------------------------------------------------------------------------

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
  """`Tokenizer.load`, with the class of the saved kind imported first (the cheap ones first).
  Files that do not load (cut short, bytes changed) are a DataError naming the folder."""
  try:
    kind = read_meta(directory).get("kind")
    for path in dict.fromkeys(TRAINERS.values()):
      if is_registered(kind):
        break
      _load_class(path)
    return Tokenizer.load(directory)
  except errors.UserError:  # missing, altered (its fingerprint), a bucket away: said already
    raise
  except Exception as e:  # pylint: disable=broad-except  (each kind's library raises its own)
    raise errors.DataError(
        f"The tokenizer saved in {directory} does not load ({type(e).__name__}: "
        f"{errors.first_line(e)}): its "
        "files are damaged; restore the folder from a copy, or make it again (vit_jax.prepare "
        "for a token store's, a new --workdir for a run's)."
    ) from None


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
    if folder and storage.exists(storage.join(folder, META_FILE)):
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
    raise errors.ConfigError(
        f"{shown} is not a {file} ({errors.first_line(e)}); give {PATH_FORMS}."
    ) from None


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
  if storage.exists(storage.join(directory, META_FILE)):
    tokenizer = _tokenizer_load(directory)
  else:
    tokenizer = build()
    tokenizer.save(directory)
  if expected_fingerprint is not None:
    check_fingerprint(tokenizer, expected_fingerprint, context=f"the checkpoint using {directory}")
  return tokenizer
