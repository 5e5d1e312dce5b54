"""The interface every tokenizer implements, plus saving and fingerprints.

A tokenizer is saved as a folder: `tokenizer_meta.json` (kind, fingerprint,
special ids) next to the kind's own model file. The fingerprint hashes the
model itself, so a checkpoint can record it and refuse to run with a
different tokenizer (TokenizerMismatchError) instead of silently producing
garbage.
"""

import abc
import functools
import hashlib
import json
from typing import ClassVar, Iterable, Optional, Sequence

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
