"""Batches for every objective: keys, shapes, dtypes, resume, eval passes."""

import numpy as np
import pytest

from vit_jax.data import tokenizers
from vit_jax.data.text import batches as text_batches
from vit_jax.data.text import datasets
from vit_jax.data.text import masking
from vit_jax.data.text import seq2seq_batches
from vit_jax.data.text import sources

B, L = 4, 32


def _take(iterator, n):
  return [next(iterator) for _ in range(n)]


def _assert_same(batches_a, batches_b):
  assert len(batches_a) == len(batches_b)
  for a, b in zip(batches_a, batches_b):
    assert a.keys() == b.keys()
    for key in a:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def _spec(batch):
  return {k: (v.shape, v.dtype.name) for k, v in batch.items()}


@pytest.fixture(scope="module")
def small_docs(train_docs):
  """Short documents, so an epoch is a few dozen steps."""
  return [d[:300] for d in train_docs[:30]]


@pytest.fixture(scope="module")
def labeled():
  rng = np.random.default_rng(0)
  words = "good bad fine awful great poor".split()
  return [
      ((" ".join(rng.choice(words, 5)), " ".join(rng.choice(words, 9))), int(rng.integers(2)))
      for _ in range(40)
  ]


def test_clm_batch_keys(char_tokenizer):
  batch = next(text_batches.clm_batches("embedded", char_tokenizer, batch_size=B, seq_len=L))
  assert _spec(batch) == {
      "inputs": ((B, L), "int32"),
      "targets": ((B, L), "int32"),
      "segment_ids": ((B, L), "int32"),
      "positions": ((B, L), "int32"),
      "weights": ((B, L), "float32"),
  }


def test_clm_documents_end_with_eos(char_tokenizer):
  docs = ["abc", "de"]
  batch = next(text_batches.clm_batches(docs, char_tokenizer, batch_size=1, seq_len=8, train=False))
  eos = char_tokenizer.eos_id
  assert char_tokenizer.decode(batch["inputs"][0]) == "abcde"
  assert batch["inputs"][0].tolist()[:7] == (
      char_tokenizer.encode("abc") + [eos] + char_tokenizer.encode("de") + [eos]
  )
  assert batch["targets"][0, 2] == eos and batch["weights"][0, 2] == 1
  assert batch["weights"][0].tolist() == [1, 1, 1, 0, 1, 1, 0, 0]


MODES = {
    "clm": lambda tok, data, **kw: text_batches.clm_batches(
        data, tok, batch_size=B, seq_len=L, **kw
    ),
    "mlm": lambda tok, data, **kw: text_batches.mlm_batches(
        data, tok, batch_size=B, seq_len=L, **kw
    ),
    "mlm_nsp_span": lambda tok, data, **kw: text_batches.mlm_batches(
        data,
        tok,
        batch_size=B,
        seq_len=L,
        nsp=True,
        masking_config=masking.MaskingConfig(span=True, whole_word=True),
        **kw,
    ),
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("streaming", [False, True], ids=["memory", "stream"])
def test_resume_is_exact(mode, streaming, char_tokenizer, small_docs):
  """start_step=k continues exactly, also across epoch boundaries."""

  def data():
    if streaming:  # Read forward, no epoch arithmetic.
      memory = sources.InMemorySource(small_docs, seed=3)
      return sources.StreamingSource(memory.epoch, memory.single_pass)
    return small_docs

  make = MODES[mode]
  fresh = _take(make(char_tokenizer, data(), seed=3), 150)
  for k in (1, 67, 147):  # 30 docs of <= 300 chars: ~70 steps per epoch.
    resumed = _take(make(char_tokenizer, data(), seed=3, start_step=k), 3)
    _assert_same(fresh[k : k + 3], resumed)
  if streaming:
    return
  other_seed = _take(make(char_tokenizer, data(), seed=4), 2)
  assert any((a[key] != b[key]).any() for a, b in zip(fresh, other_seed) for key in a)


def test_epochs_are_reshuffled(char_tokenizer, small_docs):
  source = sources.InMemorySource(small_docs, seed=0)
  assert list(source.epoch(0)) != list(source.epoch(1))
  assert sorted(source.epoch(0)) == sorted(small_docs)


def test_mlm_batch_keys_and_rows(char_tokenizer):
  batch = next(
      text_batches.mlm_batches("embedded", char_tokenizer, batch_size=B, seq_len=L, nsp=True)
  )
  P = round(0.15 * L) + 10
  assert _spec(batch) == {
      "tokens": ((B, L), "int32"),
      "token_type_ids": ((B, L), "int32"),
      "input_mask": ((B, L), "int32"),
      "positions": ((B, L), "int32"),
      "masked_positions": ((B, P), "int32"),
      "masked_targets": ((B, P), "int32"),
      "masked_weights": ((B, P), "float32"),
      "nsp_label": ((B,), "int32"),
  }
  tok = char_tokenizer
  for row in range(B):
    n = batch["input_mask"][row].sum()
    tokens = batch["tokens"][row]
    assert tokens[0] == tok.cls_id and tokens[n - 1] == tok.sep_id
    seps = np.flatnonzero(tokens[:n] == tok.sep_id)
    assert len(seps) == 2
    types = batch["token_type_ids"][row]
    assert (types[: seps[0] + 1] == 0).all() and (types[seps[0] + 1 : n] == 1).all()
    assert (types[n:] == 0).all() and (tokens[n:] == tok.pad_id).all()


def test_nsp_labels_are_balanced_and_true_pairs_continue(char_tokenizer, train_docs):
  docs = list(train_docs[:40])
  batches = _take(
      text_batches.mlm_batches(
          docs,
          char_tokenizer,
          batch_size=64,
          seq_len=64,
          nsp=True,
          masking_config=masking.MaskingConfig(rate=0.0, max_predictions=1),
      ),
      8,
  )
  labels = np.concatenate([b["nsp_label"] for b in batches])
  assert abs(labels.mean() - 0.5) < 0.07
  corpus_text = "".join(docs)
  tok = char_tokenizer
  for batch in batches[:2]:
    for row in range(64):
      n = batch["input_mask"][row].sum()
      a_and_b = [t for t in batch["tokens"][row][:n] if t not in (tok.cls_id, tok.sep_id)]
      if batch["nsp_label"][row] == 0:  # A then its true continuation.
        assert tok.decode(a_and_b) in corpus_text


def test_cls_batches(char_tokenizer, labeled):
  batches = list(
      text_batches.cls_batches(labeled, char_tokenizer, batch_size=16, seq_len=L, train=False)
  )
  assert len(batches) == 3  # 40 examples: 16 + 16 + 8 padded.
  assert _spec(batches[0]) == {
      "tokens": ((16, L), "int32"),
      "token_type_ids": ((16, L), "int32"),
      "input_mask": ((16, L), "int32"),
      "label": ((16,), "int32"),
  }
  assert batches[0]["label"].tolist() == [lab for _, lab in labeled[:16]]
  assert (batches[0]["input_mask"].sum(1) == L).all()  # Both truncated.
  assert (batches[2]["input_mask"][8:] == 0).all()
  assert (batches[2]["input_mask"][:8, 0] == 1).all()
  fresh = _take(text_batches.cls_batches(labeled, char_tokenizer, batch_size=B, seq_len=L), 25)
  resumed = _take(
      text_batches.cls_batches(labeled, char_tokenizer, batch_size=B, seq_len=L, start_step=12), 3
  )
  _assert_same(fresh[12:15], resumed)


def test_seq2seq_toy_batches():
  texts = datasets.dataset_texts("toy_number_words", max_texts=2000)
  tok = tokenizers.build_tokenizer("char", texts)
  make = lambda **kw: seq2seq_batches.seq2seq_batches(
      "toy_number_words", tok, batch_size=B, input_len=8, target_len=80, **kw
  )
  batch = next(make())
  assert _spec(batch) == {
      "inputs": ((B, 8), "int32"),
      "input_mask": ((B, 8), "int32"),
      "decoder_inputs": ((B, 80), "int32"),
      "targets": ((B, 80), "int32"),
      "weights": ((B, 80), "float32"),
  }
  from vit_jax.data.text import seq2seq_toy  # pylint: disable=import-outside-toplevel

  for row in range(B):
    n_in, n_out = batch["input_mask"][row].sum(), int(batch["weights"][row].sum())
    number = tok.decode(batch["inputs"][row][:n_in])
    assert batch["inputs"][row][n_in - 1] == tok.eos_id
    assert tok.decode(batch["targets"][row][:n_out]) == (seq2seq_toy.number_to_words(int(number)))
    assert batch["targets"][row][n_out - 1] == tok.eos_id
    assert batch["decoder_inputs"][row][0] == tok.bos_id
    np.testing.assert_array_equal(
        batch["decoder_inputs"][row][1:n_out], batch["targets"][row][: n_out - 1]
    )
  _assert_same(_take(make(), 6)[4:], _take(make(start_step=4), 2))
  evals = list(make(split="validation", train=False))
  assert len(evals) == 250  # 1000 validation examples.


def test_number_words():
  from vit_jax.data.text import seq2seq_toy  # pylint: disable=import-outside-toplevel

  assert seq2seq_toy.number_to_words(0) == "zero"
  assert seq2seq_toy.number_to_words(40213) == ("forty thousand two hundred thirteen")
  assert seq2seq_toy.number_to_words(999999) == (
      "nine hundred ninety-nine thousand nine hundred ninety-nine"
  )
  src, tgt = seq2seq_toy.make_examples("reverse", 1)[0]
  assert tgt == src[::-1]


def test_every_toy_dataset_names_a_toy_task():
  from vit_jax.data.text import seq2seq_toy  # pylint: disable=import-outside-toplevel

  for name, task in datasets.TOY_DATASETS.items():
    assert name == f"toy_{task}" and len(seq2seq_toy.make_examples(task, 2)) == 2


def test_eval_pass_is_finite_and_padded(char_tokenizer):
  docs = ["short one", "another short document", "x" * 70]
  batches = list(
      text_batches.clm_batches(
          docs, char_tokenizer, batch_size=3, seq_len=16, train=False, num_batches=4
      )
  )
  assert len(batches) == 4
  tokens = sum(len(d) + 1 for d in docs)  # +1: EOS.
  assert sum((b["segment_ids"] > 0).sum() for b in batches) == tokens
  assert sum(b["weights"].sum() for b in batches) < tokens
  assert (batches[-1]["weights"] == 0).all()
  with pytest.raises(ValueError, match="num_batches"):
    list(
        text_batches.clm_batches(
            docs, char_tokenizer, batch_size=1, seq_len=16, train=False, num_batches=2
        )
    )
  mlm = list(text_batches.mlm_batches(docs, char_tokenizer, batch_size=3, seq_len=16, train=False))
  assert len(mlm) == 3  # 1 + 2 + 5 rows of 14 tokens: 8 rows.
  assert mlm[2]["input_mask"][2].sum() == 0
  assert mlm[2]["masked_weights"][2].sum() == 0


def test_processes_read_disjoint_shares(char_tokenizer):
  shares = [datasets.load_source("embedded", process_index=i, process_count=3) for i in range(3)]
  docs = [set(s.examples) for s in shares]
  assert sum(len(d) for d in docs) == len(set.union(*docs))
  assert max(len(d) for d in docs) - min(len(d) for d in docs) <= 1
  batch = next(
      text_batches.clm_batches(
          "embedded", char_tokenizer, batch_size=B, seq_len=L, process_index=2, process_count=3
      )
  )
  assert batch["inputs"].shape == (B, L)
  with pytest.raises(ValueError, match="process_index"):
    datasets.load_source("embedded", process_index=3, process_count=3)


def test_empty_dataset_is_a_clear_error(char_tokenizer):
  with pytest.raises(ValueError, match="nothing to train on"):
    next(text_batches.clm_batches(["", ""], char_tokenizer, batch_size=B, seq_len=L, add_eos=False))
  with pytest.raises(ValueError, match="nothing to train on"):
    next(text_batches.mlm_batches(["a"], char_tokenizer, batch_size=B, seq_len=L, nsp=True))
