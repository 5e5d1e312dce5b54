"""Character-level tokenizer: one id per character seen in training text.

The simplest tokenizer whose loss is directly bits per character, which is
what the GPT acceptance test compares against the corpus's unigram entropy.
"""

import collections
import json
from typing import Iterable, Optional, Sequence

from vit_jax import errors
from vit_jax import storage
from vit_jax.data import tokenizers as tokenizer_lib

_VOCAB_FILE = "char_vocab.json"
_UNK_TEXT = "\ufffd"


class CharTokenizer(tokenizer_lib.Tokenizer):
  """Specials take ids 0..6 (pad, unk, cls, sep, mask, bos, eos), then chars."""

  kind = "char"

  def __init__(self, pieces: Sequence[str]):
    """`pieces`: the whole vocabulary in id order, special pieces first."""
    self._pieces = list(pieces)
    self._piece_to_id = {p: i for i, p in enumerate(self._pieces)}
    if len(self._piece_to_id) != len(self._pieces):
      raise ValueError("Character vocabulary has duplicate entries.")
    specials = tokenizer_lib.DEFAULT_SPECIAL_PIECES
    super().__init__({n: self._piece_to_id[p] for n, p in specials.items()})
    self._special = self.special_id_set()

  @classmethod
  def train(cls, texts: Iterable[str], vocab_size: Optional[int] = None) -> "CharTokenizer":
    """Keeps every character, or the most frequent ones if vocab_size is set.

    Characters are ordered by code point (ties in frequency can't reorder the
    vocabulary), so the same texts always give the same ids.
    """
    texts = tokenizer_lib.require_texts(cls.kind, texts)
    counts = collections.Counter()
    for text in texts:
      counts.update(text)
    specials = list(tokenizer_lib.DEFAULT_SPECIAL_PIECES.values())
    chars = [c for c in counts if c not in specials]
    if vocab_size is not None:
      budget = vocab_size - len(specials)
      if budget < 1:
        raise errors.ConfigError(
            f"vocab_size={vocab_size} leaves no room for "
            f"characters after {len(specials)} special tokens."
        )
      chars = sorted(chars, key=lambda c: (-counts[c], c))[:budget]
    return cls(specials + sorted(chars))

  @property
  def vocab_size(self) -> int:
    return len(self._pieces)

  def encode(self, text: str) -> list[int]:
    lookup, unk = self._piece_to_id, self.unk_id
    return [lookup.get(c, unk) for c in text]

  def decode(self, ids: Sequence[int]) -> str:
    out = []
    for i in ids:
      i = int(i)
      if i == self.unk_id:
        out.append(_UNK_TEXT)
      elif i not in self._special:
        out.append(self._pieces[i])
    return "".join(out)

  def id_to_piece(self, token_id: int) -> str:
    return self._pieces[token_id]

  def _model_bytes(self) -> bytes:
    return json.dumps(self._pieces, ensure_ascii=True).encode()

  def _save_model(self, directory: str) -> None:
    storage.write_text(
        storage.join(directory, _VOCAB_FILE), json.dumps(self._pieces, ensure_ascii=True)
    )

  @classmethod
  def _load_model(cls, directory: str, meta: dict) -> "CharTokenizer":
    return cls(json.loads(storage.read_text(storage.join(directory, _VOCAB_FILE))))
