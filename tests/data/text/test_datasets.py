"""Datasets by name: TFDS (mocked; the streamed ones through a token store), local files, errors."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import tiny_configs as configs_lib
from tests.data.text import tiny_text
from vit_jax import errors
from vit_jax.data import tokenizers
from vit_jax.data.text import batches
from vit_jax.data.text import datasets
from vit_jax.data.text import seq2seq_batches
from vit_jax.data.text import store_writer

B, L = 2, 16


@pytest.fixture
def mocked():
  with tfds.testing.mock_data(num_examples=12):
    yield


def prepared(tmp_path, name, arg, **tokenizer):
  """A token store of config `name`'s dataset (mocked TFDS), prepared in this process."""
  config = configs_lib.load(name, arg)
  config.tokenizer.update(tokenizer)
  store_writer.prepare(config, str(tmp_path / "store"), workers=1, report=lambda _: None)
  return str(tmp_path / "store")


@pytest.mark.parametrize("name", ["c4", "lm1b"])
def test_language_model_datasets(name, mocked, tmp_path):
  store = prepared(tmp_path, "gpt", f"dataset={name}")
  tok = tokenizers.load_tokenizer(f"{store}/tokenizer")
  clm = next(batches.clm_batches(name, tok, batch_size=B, seq_len=L, token_store=store))
  assert clm["inputs"].shape == (B, L) and clm["weights"].dtype == np.float32
  assert clm["weights"].sum() > 0
  mlm = next(batches.mlm_batches(name, tok, batch_size=B, seq_len=L, token_store=store))
  assert mlm["tokens"].shape == (B, L)
  assert mlm["masked_positions"].shape == (B, round(0.15 * L) + 10)
  evals = list(
      batches.clm_batches(
          name, tok, batch_size=B, seq_len=L, split="validation", train=False, token_store=store
      )
  )
  assert evals and all(b["inputs"].shape == (B, L) for b in evals)
  # resumed at step 6 of the store: batch 6 of a fresh reader
  make = lambda **kw: batches.clm_batches(
      name, tok, batch_size=B, seq_len=L, token_store=store, **kw
  )
  fresh = make()
  fresh_batches = [next(fresh) for _ in range(7)]
  np.testing.assert_array_equal(next(make(start_step=6))["inputs"], fresh_batches[6]["inputs"])


def test_a_streamed_dataset_without_a_store_names_the_command(mocked, char_tokenizer):
  with pytest.raises(errors.DataError, match=r"python -m vit_jax\.prepare .*--output=DIR"):
    next(batches.clm_batches("c4", char_tokenizer, batch_size=B, seq_len=L))


def test_imdb_classification(mocked, char_tokenizer):
  batch = next(batches.cls_batches("imdb_reviews", char_tokenizer, batch_size=B, seq_len=L))
  assert batch["tokens"].shape == (B, L) and batch["label"].shape == (B,)
  assert batch["label"].dtype == np.int32
  assert set(batch["label"].tolist()) <= {0, 1}
  # A labeled dataset also serves documents for language modeling.
  clm = next(batches.clm_batches("imdb_reviews", char_tokenizer, batch_size=B, seq_len=L))
  assert clm["inputs"].shape == (B, L)


def test_ag_news_has_four_topics_and_two_texts(mocked, char_tokenizer):
  config = configs_lib.load("bert_classifier", "dataset=ag_news_subset")
  assert config.num_classes == 4 and config.eval_split == "test"
  examples = datasets.memory_examples("ag_news_subset", kind="labeled")
  assert len(examples) == 12 and all(len(texts) == 2 for texts, _ in examples)  # title, text
  # the config's class count is the dataset's (TFDS reads it from the builder's code)
  assert config.num_classes == tfds.builder("ag_news_subset").info.features["label"].num_classes
  batch = next(batches.cls_batches("ag_news_subset", char_tokenizer, batch_size=B, seq_len=L))
  assert batch["tokens"].shape == (B, L) and batch["label"].shape == (B,)
  labels = [label for _, label in examples]
  evals = list(
      batches.cls_batches("ag_news_subset", char_tokenizer, batch_size=5, seq_len=L, train=False)
  )
  read = np.concatenate([b["label"][b["input_mask"][:, 0] == 1] for b in evals])
  assert read.tolist() == labels  # one pass, stored order


def test_wmt14_translation(mocked, tmp_path):
  store = prepared(tmp_path, "seq2seq", "dataset=wmt14_translate/de-en")
  tok = tokenizers.load_tokenizer(f"{store}/tokenizer")
  batch = next(
      seq2seq_batches.seq2seq_batches(
          "wmt14_translate/de-en",
          tok,
          batch_size=B,
          input_len=L,
          target_len=L + 4,
          token_store=store,
      )
  )
  assert batch["inputs"].shape == (B, L)
  assert batch["decoder_inputs"].shape == (B, L + 4)
  assert batch["weights"].shape == (B, L + 4)
  assert (batch["decoder_inputs"][:, 0] == tok.bos_id).all()


def test_sst2_and_shakespeare_load(mocked):
  examples = datasets.memory_examples("glue/sst2", kind="labeled")
  assert len(examples) == 12 and isinstance(examples[0][0][0], str)
  shards = [
      list(datasets.read_examples("tiny_shakespeare", shard=i, shard_count=2)) for i in (0, 1)
  ]
  assert shards[0] and shards[1]
  assert shards[0] + shards[1] == datasets.memory_examples("tiny_shakespeare")


def test_tfds_shards_hold_the_split_once(tiny_text_dir, monkeypatch):
  name = tiny_text.register(monkeypatch)
  read = lambda **kw: list(datasets.read_examples(name, "train", data_dir=tiny_text_dir, **kw))
  whole = read()
  parts = [read(shard=i, shard_count=7) for i in range(7)]
  assert len(whole) == 230 and sum(parts, []) == whole
  assert datasets.num_examples(name, "train", data_dir=tiny_text_dir) == 230


def test_unprepared_tfds_dataset_says_how_to_prepare(tmp_path):
  # vit_jax.prepare, not `tfds build`: that needs Apache Beam, which the base install lacks.
  with pytest.raises(
      errors.DatasetNotPreparedError,
      match=r"python -m vit_jax.prepare --config=.* --config.data_dir=.*" + tmp_path.name,
  ):
    next(datasets.read_examples("lm1b", data_dir=str(tmp_path)))


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
  per_file = datasets.memory_examples(f"files:{tmp_path}/part*.txt", "all")
  assert len(per_file) == 3
  paragraphs = datasets.memory_examples(f"paragraphs:{tmp_path}/*.txt", "train")
  assert len(paragraphs) == 29  # One of 30 held out.
  assert paragraphs[0] == "Paragraph 0 of file 0."
  shards = [
      list(datasets.read_examples(f"paragraphs:{tmp_path}/*.txt", "train", shard=i, shard_count=2))
      for i in range(2)
  ]
  assert shards[0] + shards[1] == paragraphs
  split = datasets.open_split(
      f"paragraphs:{tmp_path}/*.txt", "train", kind="documents", tokenizer=char_tokenizer
  )
  assert split.num_examples == 29
  batch = next(
      batches.mlm_batches(f"paragraphs:{tmp_path}/*.txt", char_tokenizer, batch_size=B, seq_len=L)
  )
  assert batch["tokens"].shape == (B, L)
  with pytest.raises(errors.DataError, match="no files match"):
    datasets.memory_examples(f"files:{tmp_path}/*.md")
