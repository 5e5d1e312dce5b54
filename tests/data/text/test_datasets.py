"""Datasets by name: TFDS (mocked), local files, errors."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import tiny_configs as configs_lib
from vit_jax import errors
from vit_jax.data import tokenizers
from vit_jax.data.text import batches
from vit_jax.data.text import datasets
from vit_jax.data.text import seq2seq_batches

B, L = 2, 16


@pytest.fixture
def mocked():
  with tfds.testing.mock_data(num_examples=12):
    yield


@pytest.fixture(scope="module")
def mock_tokenizer():
  # Mock TFDS text is random letters a-j and spaces.
  return tokenizers.build_tokenizer("char", [" abcdefghij"])


@pytest.mark.parametrize("name", ["c4", "lm1b"])
def test_language_model_datasets(name, mocked, mock_tokenizer):
  clm = next(batches.clm_batches(name, mock_tokenizer, batch_size=B, seq_len=L))
  assert clm["inputs"].shape == (B, L) and clm["weights"].dtype == np.float32
  assert clm["weights"].sum() > 0
  mlm = next(batches.mlm_batches(name, mock_tokenizer, batch_size=B, seq_len=L))
  assert mlm["tokens"].shape == (B, L)
  assert mlm["masked_positions"].shape == (B, round(0.15 * L) + 10)
  evals = list(
      batches.clm_batches(
          name, mock_tokenizer, batch_size=B, seq_len=L, split="validation", train=False
      )
  )
  assert evals and all(b["inputs"].shape == (B, L) for b in evals)


def test_tfds_training_order_is_seeded(mocked, mock_tokenizer):
  make = lambda seed, **kw: batches.clm_batches(
      "c4", mock_tokenizer, batch_size=B, seq_len=L, seed=seed, **kw
  )
  first = [next(make(0))["inputs"] for _ in range(2)]
  np.testing.assert_array_equal(first[0], first[1])
  fresh = make(0)
  fresh_batches = [next(fresh) for _ in range(7)]
  resumed = next(make(0, start_step=6))
  np.testing.assert_array_equal(resumed["inputs"], fresh_batches[6]["inputs"])


def test_imdb_classification(mocked, mock_tokenizer):
  batch = next(batches.cls_batches("imdb_reviews", mock_tokenizer, batch_size=B, seq_len=L))
  assert batch["tokens"].shape == (B, L) and batch["label"].shape == (B,)
  assert batch["label"].dtype == np.int32
  assert set(batch["label"].tolist()) <= {0, 1}
  # A labeled dataset also serves documents for language modeling.
  clm = next(batches.clm_batches("imdb_reviews", mock_tokenizer, batch_size=B, seq_len=L))
  assert clm["inputs"].shape == (B, L)


def test_ag_news_has_four_topics_and_two_texts(mocked, mock_tokenizer):
  config = configs_lib.load("bert_classifier", "dataset=ag_news_subset")
  assert config.num_classes == 4 and config.eval_split == "test"
  examples = list(datasets.load_source("ag_news_subset", kind="labeled").single_pass())
  assert len(examples) == 12 and all(len(texts) == 2 for texts, _ in examples)  # title, text
  # the config's class count is the dataset's (TFDS reads it from the builder's code)
  assert config.num_classes == tfds.builder("ag_news_subset").info.features["label"].num_classes
  batch = next(batches.cls_batches("ag_news_subset", mock_tokenizer, batch_size=B, seq_len=L))
  assert batch["tokens"].shape == (B, L) and batch["label"].shape == (B,)


def test_wmt14_translation(mocked, mock_tokenizer):
  batch = next(
      seq2seq_batches.seq2seq_batches(
          "wmt14_translate/de-en", mock_tokenizer, batch_size=B, input_len=L, target_len=L + 4
      )
  )
  assert batch["inputs"].shape == (B, L)
  assert batch["decoder_inputs"].shape == (B, L + 4)
  assert batch["weights"].shape == (B, L + 4)
  assert (batch["decoder_inputs"][:, 0] == mock_tokenizer.bos_id).all()


def test_sst2_and_shakespeare_load(mocked):
  examples = list(datasets.load_source("glue/sst2", kind="labeled").single_pass())
  assert len(examples) == 12 and isinstance(examples[0][0][0], str)
  shares = [
      datasets.load_source("tiny_shakespeare", process_index=i, process_count=2).examples
      for i in range(2)
  ]
  assert shares[0] and shares[1]


def test_unprepared_tfds_dataset_says_how_to_prepare(tmp_path):
  with pytest.raises(
      errors.DatasetNotPreparedError, match=r"tfds build lm1b --data_dir=.*" + tmp_path.name
  ):
    datasets.load_source("lm1b", data_dir=str(tmp_path))


def test_unknown_dataset_lists_known_names(char_tokenizer):
  with pytest.raises(ValueError, match="Unknown text dataset 'c5'.*c4.*lm1b"):
    next(batches.clm_batches("c5", char_tokenizer, batch_size=B, seq_len=L))


def test_wrong_kind_of_dataset(char_tokenizer):
  with pytest.raises(ValueError, match="labeled.*imdb_reviews"):
    next(batches.cls_batches("embedded", char_tokenizer, batch_size=B, seq_len=L))


def test_local_files(tmp_path, char_tokenizer):
  for i in range(3):
    (tmp_path / f"part{i}.txt").write_text(
        "\n\n".join(f"Paragraph {j} of file {i}." for j in range(10))
    )
  per_file = datasets.load_source(f"files:{tmp_path}/part*.txt", "all")
  assert len(per_file.examples) == 3
  paragraphs = datasets.load_source(f"paragraphs:{tmp_path}/*.txt", "train")
  assert len(paragraphs.examples) == 29  # One of 30 held out.
  assert paragraphs.examples[0] == "Paragraph 0 of file 0."
  shares = [
      datasets.load_source(
          f"paragraphs:{tmp_path}/*.txt", "train", process_index=i, process_count=2
      ).examples
      for i in range(2)
  ]
  assert sorted(shares[0] + shares[1]) == sorted(paragraphs.examples)
  batch = next(
      batches.mlm_batches(f"paragraphs:{tmp_path}/*.txt", char_tokenizer, batch_size=B, seq_len=L)
  )
  assert batch["tokens"].shape == (B, L)
  with pytest.raises(FileNotFoundError, match="No files match"):
    datasets.load_source(f"files:{tmp_path}/*.md")
