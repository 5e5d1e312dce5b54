"""Building, loading and keeping tokenizers: the one entry point to use.

    tok = build_tokenizer("spm_unigram", corpus.split_documents("train"), 8000)
    tok = load_or_build(workdir + "/tokenizer", lambda: build_tokenizer(...))
    tok = load_pretrained("/path/spiece.model")      # or .../tokenizer.json

A training workdir keeps its tokenizer (`load_or_build`), so evaluation and
resumed runs use the very same vocabulary; a checkpoint that records
`tok.fingerprint` can be checked with `check_fingerprint`.
"""

from typing import Callable, Iterable, Optional

from vit_jax import errors
from vit_jax import storage
from vit_jax.data.tokenizers import base as tokenizer_base
from vit_jax.data.tokenizers.base import check_fingerprint
from vit_jax.data.tokenizers.base import Tokenizer
from vit_jax.data.tokenizers.base import TokenizerMismatchError
from vit_jax.data.tokenizers.char import CharTokenizer
from vit_jax.data.tokenizers.hf import HfTokenizer
from vit_jax.data.tokenizers.spm import SentencePieceTokenizer

__all__ = [
    "CharTokenizer",
    "HfTokenizer",
    "SentencePieceTokenizer",
    "Tokenizer",
    "TokenizerMismatchError",
    "TRAINABLE_KINDS",
    "build_tokenizer",
    "check_fingerprint",
    "load_or_build",
    "load_pretrained",
    "load_tokenizer",
]

TRAINABLE_KINDS = ("char", "spm_unigram", "spm_bpe", "byte_bpe")
# The class (saved `kind`) each trainable kind produces: a resumed workdir's tokenizer is checked
# against it.
SAVED_KIND = {
    "char": CharTokenizer.kind,
    "spm_unigram": SentencePieceTokenizer.kind,
    "spm_bpe": SentencePieceTokenizer.kind,
    "byte_bpe": HfTokenizer.kind,
}


def build_tokenizer(
    kind: str, texts: Iterable[str], vocab_size: Optional[int] = None, **options
) -> Tokenizer:
  """Trains a tokenizer of `kind` on `texts`.

  char: every character of `texts` (vocab_size, if set, keeps the most
    frequent ones). spm_unigram / spm_bpe: SentencePiece (options go to its
    trainer). byte_bpe: Hugging Face byte-level BPE.
  """
  if kind == "char":
    return CharTokenizer.train(texts, vocab_size)
  if kind not in TRAINABLE_KINDS:
    raise errors.ConfigError(
        f"Unknown tokenizer kind {kind!r}; known: "
        f"{', '.join(TRAINABLE_KINDS)} (or load_pretrained)."
    )
  if vocab_size is None:
    raise errors.ConfigError(f"Tokenizer kind {kind!r} needs a vocab_size.")
  if kind == "byte_bpe":
    return HfTokenizer.train_byte_level_bpe(texts, vocab_size, **options)
  return SentencePieceTokenizer.train(
      texts, vocab_size, model_type=kind.removeprefix("spm_"), **options
  )


def load_pretrained(path: str, special_ids: Optional[dict] = None) -> Tokenizer:
  """Loads an existing SentencePiece `.model` or HF `tokenizer.json`."""
  if path.endswith(".json"):
    return HfTokenizer.from_file(path, special_ids)
  if path.endswith(".model"):
    return SentencePieceTokenizer.from_file(path, special_ids)
  raise errors.ConfigError(
      f"Don't know how to load {path!r}: expected a "
      "SentencePiece '.model' or a Hugging Face 'tokenizer.json'."
  )


def load_tokenizer(directory: str) -> Tokenizer:
  """Loads a tokenizer saved with `tok.save(directory)`."""
  return Tokenizer.load(directory)


def load_or_build(
    directory: str, build: Callable[[], Tokenizer], expected_fingerprint: Optional[str] = None
) -> Tokenizer:
  """The workdir's saved tokenizer, or `build()` saved there on first use.

  `expected_fingerprint` (e.g. read from a checkpoint) makes a different
  tokenizer an error instead of a silent vocabulary change.
  """
  if storage.exists(storage.join(directory, tokenizer_base.META_FILE)):
    tokenizer = Tokenizer.load(directory)
  else:
    tokenizer = build()
    tokenizer.save(directory)
  if expected_fingerprint is not None:
    check_fingerprint(tokenizer, expected_fingerprint, context=f"the checkpoint using {directory}")
  return tokenizer
