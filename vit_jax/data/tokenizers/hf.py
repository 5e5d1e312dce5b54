"""Hugging Face `tokenizers`: byte-level BPE trained on our corpus, or any
`tokenizer.json` loaded from disk.

Byte-level BPE has no unknown characters: every string round-trips exactly.
"""

import json
from typing import Iterable, Optional, Sequence

import tokenizers
from tokenizers import decoders
from tokenizers import models
from tokenizers import pre_tokenizers
from tokenizers import trainers

from vit_jax import storage
from vit_jax.data import tokenizers as tokenizer_lib

_MODEL_FILE = "tokenizer.json"
# A chat model's prompt format (a Jinja template, as Hugging Face saves it), carried with the
# tokenizer but not part of its fingerprint: it changes no token's id.
CHAT_TEMPLATE_FILE = "chat_template.jinja"
# Looked up by token when a loaded tokenizer.json does not say which is which.
_TOKEN_CANDIDATES = {
    "pad": ("<pad>", "[PAD]", "<|pad|>"),
    "unk": ("<unk>", "[UNK]"),
    "cls": ("[CLS]", "<cls>", "<s>"),
    "sep": ("[SEP]", "<sep>", "</s>"),
    "mask": ("[MASK]", "<mask>"),
    "bos": ("<s>", "<bos>", "<|begin_of_text|>", "<|endoftext|>"),
    "eos": ("</s>", "<eos>", "<|end_of_text|>", "<|endoftext|>"),
}


class HfTokenizer(tokenizer_lib.Tokenizer):
  """Wraps a `tokenizers.Tokenizer`; encodes without adding special tokens."""

  kind = "hf_tokenizers"

  def __init__(
      self,
      tokenizer: tokenizers.Tokenizer,
      special_ids: Optional[dict[str, Optional[int]]] = None,
      chat_template: Optional[str] = None,
  ):
    self.chat_template = chat_template
    # Text that spells a special token ("[MASK]") stays text: only our code
    # inserts special ids.
    tokenizer.encode_special_tokens = True
    self._tok = tokenizer
    found = {
        name: next(
            (tokenizer.token_to_id(t) for t in candidates if tokenizer.token_to_id(t) is not None),
            None,
        )
        for name, candidates in _TOKEN_CANDIDATES.items()
    }
    found.update(special_ids or {})
    super().__init__(found)
    added = tokenizer.get_added_tokens_decoder()
    self._special = super().special_id_set() | frozenset(
        i for i, token in added.items() if token.special
    )
    # WordPiece (BERT) marks continuations with '##' instead of word starts.
    model_type = json.loads(tokenizer.to_str())["model"]["type"]
    self._wordpiece = model_type == "WordPiece"

  @classmethod
  def train_byte_level_bpe(
      cls, texts: Iterable[str], vocab_size: int, **trainer_options
  ) -> "HfTokenizer":
    """GPT-2 style byte-level BPE; specials take ids 0..6.

    `trainer_options` go to `tokenizers.trainers.BpeTrainer`.
    """
    texts = tokenizer_lib.require_texts("byte_bpe", texts)
    tok = tokenizers.Tokenizer(models.BPE())
    # No prefix space: decode(encode(s)) == s exactly.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=list(tokenizer_lib.DEFAULT_SPECIAL_PIECES.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        **trainer_options,
    )
    tok.train_from_iterator(texts, trainer, length=len(texts))
    return cls(tok)

  @classmethod
  def from_file(
      cls, path: str, special_ids: Optional[dict[str, Optional[int]]] = None
  ) -> "HfTokenizer":
    """Loads an existing `tokenizer.json`."""
    return cls(tokenizers.Tokenizer.from_str(storage.read_text(path)), special_ids)

  @property
  def vocab_size(self) -> int:
    return self._tok.get_vocab_size(with_added_tokens=True)

  def encode(self, text: str) -> list[int]:
    return self._tok.encode(text, add_special_tokens=False).ids

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    encodings = self._tok.encode_batch(list(texts), add_special_tokens=False)
    return [e.ids for e in encodings]

  def decode(self, ids: Sequence[int]) -> str:
    return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)

  def id_to_piece(self, token_id: int) -> str:
    return self._tok.id_to_token(token_id) or ""

  def special_id_set(self) -> frozenset[int]:
    return self._special

  def _piece_starts_word(self, piece: str) -> bool:
    if self._wordpiece:
      return not piece.startswith("##")
    return super()._piece_starts_word(piece)

  def _model_bytes(self) -> bytes:
    return self._tok.to_str().encode()

  def _save_model(self, directory: str) -> None:
    storage.write_text(storage.join(directory, _MODEL_FILE), self._tok.to_str(pretty=True))
    if self.chat_template is not None:
      storage.write_text(storage.join(directory, CHAT_TEMPLATE_FILE), self.chat_template)

  @classmethod
  def _load_model(cls, directory: str, meta: dict) -> "HfTokenizer":
    tokenizer = cls.from_file(storage.join(directory, _MODEL_FILE), meta["special_ids"])
    template = storage.join(directory, CHAT_TEMPLATE_FILE)
    if storage.isfile(template):
      tokenizer.chat_template = storage.read_text(template)
    return tokenizer
