"""SentencePiece tokenizers: trained in memory on our corpus, or loaded.

Training keeps the text exactly recoverable (identity normalization, no
whitespace collapsing, byte fallback, '\\n' as its own piece), so code-like
documentation with indentation round-trips through encode/decode.
"""

import io
from typing import Iterable, Optional, Sequence

import sentencepiece as spm

from vit_jax import storage
from vit_jax.data import tokenizers as tokenizer_lib

_MODEL_FILE = "spm.model"
# Looked up by piece when a loaded model does not say which id they are.
_PIECE_CANDIDATES = {
    "cls": ("[CLS]", "<cls>"),
    "sep": ("[SEP]", "<sep>"),
    "mask": ("[MASK]", "<mask>"),
}


class SentencePieceTokenizer(tokenizer_lib.Tokenizer):
  """Wraps a SentencePiece model proto."""

  kind = "sentencepiece"

  def __init__(self, model_proto: bytes, special_ids: Optional[dict[str, Optional[int]]] = None):
    self._proto = model_proto
    self._sp = spm.SentencePieceProcessor(model_proto=model_proto)
    found = _find_special_ids(self._sp)
    found.update(special_ids or {})
    super().__init__(found)
    # Control, unknown and unused pieces of a loaded model are special too.
    sp = self._sp
    self._special = super().special_id_set() | frozenset(
        i
        for i in range(sp.get_piece_size())
        if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)
    )

  @classmethod
  def train(
      cls, texts: Iterable[str], vocab_size: int, model_type: str = "unigram", **trainer_options
  ) -> "SentencePieceTokenizer":
    """Trains on the lines of `texts`; specials get ids 0..6.

    pad/unk/bos/eos are SentencePiece's own meta pieces; CLS/SEP/MASK are
    control symbols, so no text ever encodes to them. `vocab_size` is a soft
    limit: a small corpus may support fewer pieces, see `.vocab_size`.
    """
    texts = tokenizer_lib.require_texts(f"sentencepiece_{model_type}", texts)
    # SentencePiece learns from lines; newlines come back as their own piece.
    lines = [line for t in texts for line in t.split("\n") if line.strip()]
    pieces = tokenizer_lib.DEFAULT_SPECIAL_PIECES
    options = dict(
        model_type=model_type,
        vocab_size=vocab_size,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        byte_fallback=True,
        character_coverage=1.0,
        allow_whitespace_only_pieces=True,
        hard_vocab_limit=False,
        user_defined_symbols=["\n"],
        control_symbols=[pieces["cls"], pieces["sep"], pieces["mask"]],
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        pad_piece=pieces["pad"],
        unk_piece=pieces["unk"],
        bos_piece=pieces["bos"],
        eos_piece=pieces["eos"],
        # One thread: multi-threaded EM may reorder float sums.
        num_threads=1,
        minloglevel=2,
    )
    options.update(trainer_options)
    model = io.BytesIO()
    try:
      spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, **options)
    except RuntimeError as e:
      raise ValueError(
          f"SentencePiece training failed ({model_type}, " f"vocab_size={vocab_size}): {e}"
      ) from e
    return cls(model.getvalue())

  @classmethod
  def from_file(
      cls, path: str, special_ids: Optional[dict[str, Optional[int]]] = None
  ) -> "SentencePieceTokenizer":
    """Loads an existing `.model` file (e.g. from a pretrained model)."""
    return cls(storage.read_bytes(path), special_ids)

  @property
  def vocab_size(self) -> int:
    return self._sp.get_piece_size()

  def encode(self, text: str) -> list[int]:
    return self._sp.encode(text)

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return self._sp.encode(list(texts))

  def decode(self, ids: Sequence[int]) -> str:
    return self._sp.decode([int(i) for i in ids])

  def id_to_piece(self, token_id: int) -> str:
    return self._sp.id_to_piece(token_id)

  def special_id_set(self) -> frozenset[int]:
    return self._special

  def _model_bytes(self) -> bytes:
    return self._proto

  def _save_model(self, directory: str) -> None:
    storage.write_bytes(storage.join(directory, _MODEL_FILE), self._proto)

  @classmethod
  def _load_model(cls, directory: str, meta: dict) -> "SentencePieceTokenizer":
    return cls.from_file(storage.join(directory, _MODEL_FILE), meta["special_ids"])


def _find_special_ids(sp: spm.SentencePieceProcessor) -> dict:
  ids = {"pad": sp.pad_id(), "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id()}
  ids = {n: (i if i >= 0 else None) for n, i in ids.items()}
  for name, candidates in _PIECE_CANDIDATES.items():
    ids[name] = next(
        (sp.piece_to_id(p) for p in candidates if sp.id_to_piece(sp.piece_to_id(p)) == p), None
    )
  return ids
