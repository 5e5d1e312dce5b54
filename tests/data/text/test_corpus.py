"""The embedded corpus: big enough, real, deterministic, split once."""

import subprocess
import sys

from vit_jax.data.text import corpus


def test_corpus_is_at_least_one_megabyte_of_documents():
  docs = corpus.documents()
  assert sum(len(d.encode("utf-8")) for d in docs) >= 1_000_000
  assert len(docs) > 100
  assert all(d.strip() for d in docs)
  # Real English prose, not code: common words are frequent.
  words = " ".join(docs).lower().split()
  assert words.count("the") > 10_000


def test_corpus_is_deterministic_across_processes():
  code = (
      "from vit_jax.data.text import corpus; "
      "print(corpus.corpus_fingerprint(), len(corpus.documents()))"
  )
  out = subprocess.run(
      [sys.executable, "-c", code], check=True, capture_output=True, text=True
  ).stdout.split()
  assert out == [corpus.corpus_fingerprint(), str(len(corpus.documents()))]


def test_splits_partition_the_documents():
  train = corpus.split_documents("train")
  validation = corpus.split_documents("validation")
  assert len(train) + len(validation) == len(corpus.documents())
  assert 0.03 < len(validation) / len(corpus.documents()) < 0.07
  assert not set(train) & set(validation)


def test_validation_char_entropy():
  bits = corpus.validation_char_entropy()
  assert 3.5 < bits < 5.5  # English text: ~4.1-4.8 bits per character.
  assert corpus.unigram_char_entropy(["abab"]) == 1.0
  assert corpus.unigram_char_entropy(["aaaa"]) == 0.0
