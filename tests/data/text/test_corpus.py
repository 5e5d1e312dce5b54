"""The embedded corpus: big enough, real, deterministic, split once."""

import hashlib
import json
import subprocess
import sys

import pytest

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


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
  """An empty cache folder, and documents() read anew in it; the worker's own after the test."""
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  corpus.documents.cache_clear()
  yield tmp_path / "vit_jax" / "embedded_corpus"
  corpus.documents.cache_clear()


def test_the_documents_are_cached_and_a_damaged_cache_is_parsed_again(own_cache):
  parsed = corpus.documents()
  (cached,) = own_cache.iterdir()
  # A later process reads the cached text: here, one whose digest holds.
  text = json.dumps(["only this document"])
  cached.write_text(hashlib.sha256(text.encode()).hexdigest() + "\n" + text)
  corpus.documents.cache_clear()
  assert corpus.documents() == ("only this document",)
  # One changed byte: the digest no longer holds, the files are parsed and the cache rewritten.
  cached.write_text(hashlib.sha256(text.encode()).hexdigest() + "\n" + text.replace("only", "onlY"))
  corpus.documents.cache_clear()
  assert corpus.documents() == parsed
  assert [p.name for p in own_cache.iterdir()] == [cached.name]
  corpus.documents.cache_clear()
  assert corpus.documents() == parsed


def test_a_cache_that_cannot_be_written_is_no_error(own_cache):
  own_cache.parent.mkdir(parents=True)
  own_cache.write_text("a file where the cache folder would be")
  assert len(corpus.documents()) > 100
