"""Shared fixtures: tokenizers trained once per test session."""

import pytest

from vit_jax.data import tokenizers
from vit_jax.data.text import corpus


@pytest.fixture(scope="session")
def train_docs():
  return corpus.split_documents("train")


@pytest.fixture(scope="session")
def char_tokenizer(train_docs):
  return tokenizers.build_tokenizer("char", train_docs)


@pytest.fixture(scope="session")
def spm_tokenizer(train_docs):
  # A slice of the corpus keeps SentencePiece training well under a second.
  return tokenizers.build_tokenizer("spm_unigram", train_docs[:40], 600)


@pytest.fixture(scope="session")
def tiny_text_dir(tmp_path_factory):
  """A TFDS data_dir holding tests/data/text/tiny_text.py's dataset, built for real."""
  from tests.data.text import tiny_text  # pylint: disable=g-import-not-at-top  (loads TFDS)

  data_dir = str(tmp_path_factory.mktemp("tfds_tiny_text"))
  tiny_text.build(data_dir)
  return data_dir
