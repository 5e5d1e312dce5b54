"""Batches for every objective: keys, shapes, dtypes, resume by index, shards, eval passes."""

import numpy as np
import pytest

from vit_jax.data import tokenizers
from vit_jax.data.text import batches as text_batches
from vit_jax.data.text import datasets
from vit_jax.data.text import masking
from vit_jax.data.text import order
from vit_jax.data.text import seq2seq_batches
from vit_jax.data.text import token_store

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
def test_resume_is_exact(mode, char_tokenizer, small_docs):
  """start_step=k reads exactly batch k, also across epoch boundaries."""
  split = datasets.tokenize(small_docs, "documents", char_tokenizer)
  make = MODES[mode]
  fresh = _take(make(char_tokenizer, split, seed=3), 150)
  for k in (1, 67, 147):  # 30 docs of <= 300 chars: ~70 steps per epoch.
    resumed = _take(make(char_tokenizer, split, seed=3, start_step=k), 3)
    _assert_same(fresh[k : k + 3], resumed)
  other_seed = _take(make(char_tokenizer, split, seed=4), 2)
  assert any((a[key] != b[key]).any() for a, b in zip(fresh, other_seed) for key in a)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_global_batch_is_the_same_for_any_shard_count(mode, char_tokenizer, small_docs):
  """The shards' batches, stacked in shard order, are the one-shard batch: the data does not
  depend on how many processes read it."""
  split = datasets.tokenize(small_docs, "documents", char_tokenizer)
  whole = _take(_shard_batches(mode, char_tokenizer, split, 0, 1), 2)
  for count in (2, 4):
    parts = [_take(_shard_batches(mode, char_tokenizer, split, i, count), 2) for i in range(count)]
    for step in range(2):
      stacked = {k: np.concatenate([p[step][k] for p in parts]) for k in whole[step]}
      _assert_same([whole[step]], [stacked])


def _shard_batches(mode, tokenizer, split, shard, count):
  """MODES[mode] with batch_size B / count: shard `shard` of `count`."""
  make = {
      "clm": text_batches.clm_batches,
      "mlm": text_batches.mlm_batches,
      "mlm_nsp_span": lambda *a, **kw: text_batches.mlm_batches(
          *a, nsp=True, masking_config=masking.MaskingConfig(span=True, whole_word=True), **kw
      ),
  }[mode]
  return make(
      split,
      tokenizer,
      batch_size=B // count,
      seq_len=L,
      seed=5,
      start_step=40,
      shard=shard,
      shard_count=count,
  )


def test_an_epoch_reads_every_window_once(char_tokenizer, small_docs):
  split = datasets.tokenize(small_docs, "documents", char_tokenizer)
  stream = text_batches.DocumentStream(split, char_tokenizer.eos_id)
  windows = -(-(stream.length - 1) // L)
  steps = windows // B
  rows = np.concatenate(
      [
          b["inputs"]
          for b in _take(
              text_batches.clm_batches(split, char_tokenizer, batch_size=B, seq_len=L), steps
          )
      ]
  )
  tokens, _ = stream.read(np.arange(windows) * L, L)
  seen = {r.tobytes() for r in rows}
  assert len(seen) == len(rows) == steps * B  # no window twice within the epoch
  assert seen <= {t.tobytes() for t in tokens}


def test_a_far_step_is_read_directly(char_tokenizer, small_docs):
  """Step 10^12 costs what step 1 does: its windows are computed, not reached by reading."""
  split = datasets.tokenize(small_docs, "documents", char_tokenizer)
  stream = text_batches.DocumentStream(split, char_tokenizer.eos_id)
  windows = -(-(stream.length - 1) // L)
  step = 10**12
  batch = next(
      text_batches.clm_batches(split, char_tokenizer, batch_size=B, seq_len=L, start_step=step)
  )
  units = order.epoch_units(order.shard_positions(step, B, 0, 1), windows, 0)
  tokens, _ = stream.read(units * L, L + 1)
  np.testing.assert_array_equal(batch["inputs"], tokens[:, :L])


def test_epochs_are_reshuffled():
  first, second = (order.permute(np.arange(50), 50, 0, epoch) for epoch in (0, 1))
  assert sorted(first) == sorted(second) == list(range(50))
  assert (first != second).any()


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
      text_batches.clm_batches(docs, char_tokenizer, batch_size=3, seq_len=16, train=False)
  )
  tokens = sum(len(d) + 1 for d in docs)  # +1: EOS.
  assert len(batches) == 3  # ceil((104 - 1) / 16) = 7 windows, in batches of 3
  assert sum((b["segment_ids"] > 0).sum() for b in batches) == tokens  # each an input once
  # every target that continues its document is scored once: all but each document's first
  assert sum(b["weights"].sum() for b in batches) == tokens - len(docs)
  assert (batches[-1]["weights"][1:] == 0).all()
  mlm = list(text_batches.mlm_batches(docs, char_tokenizer, batch_size=3, seq_len=16, train=False))
  assert len(mlm) == 3  # 1 + 2 + 5 rows of 14 tokens: 8 rows.
  assert mlm[2]["input_mask"][2].sum() == 0
  assert mlm[2]["masked_weights"][2].sum() == 0


def test_eval_shards_together_read_every_row_once(char_tokenizer):
  docs = [d[:200] for d in datasets.memory_examples("embedded", "validation")]
  split = datasets.tokenize(docs, "documents", char_tokenizer)
  read = lambda shard, count: list(
      text_batches.mlm_batches(
          split,
          char_tokenizer,
          batch_size=4,
          seq_len=L,
          train=False,
          shard=shard,
          shard_count=count,
      )
  )
  whole = read(0, 1)
  parts = [read(i, 3) for i in range(3)]
  rows = lambda batches: sorted(
      r.tobytes() for b in batches for r, m in zip(b["tokens"], b["input_mask"][:, 0]) if m
  )
  assert rows(whole) == rows([b for part in parts for b in part])
  with pytest.raises(ValueError, match="input shard 3"):
    next(
        text_batches.clm_batches(
            split, char_tokenizer, batch_size=B, seq_len=L, shard=3, shard_count=3
        )
    )


def test_store_and_memory_give_the_same_batches(char_tokenizer, small_docs, tmp_path):
  """A split read from files through the store's layout is the in-memory one."""
  memory = datasets.tokenize(small_docs, "documents", char_tokenizer)
  (tmp_path / "train").mkdir()
  store = _write_store(tmp_path, small_docs, char_tokenizer)
  for make in MODES.values():
    _assert_same(
        _take(make(char_tokenizer, memory, seed=1, start_step=9), 2),
        _take(make(char_tokenizer, store, seed=1, start_step=9), 2),
    )


def _write_store(folder, docs, tokenizer, shards=3):
  """`docs` as the train split of a store of `shards` shard files in `folder` (the layout
  token_store.py reads; vit_jax.prepare's own output is tested in test_token_store.py)."""
  dtype = token_store.token_dtype(tokenizer.vocab_size)
  entries, bounds = [], np.linspace(0, len(docs), shards + 1).astype(int)
  for k in range(shards):
    name = token_store.shard_name(k)
    ids = [np.asarray(tokenizer.encode(d), dtype) for d in docs[bounds[k] : bounds[k + 1]]]
    lengths = [len(i) for i in ids]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(token_store.OFFSET_DTYPE)
    (folder / "train" / token_store.tokens_file(name, "text")).write_bytes(
        np.concatenate(ids).tobytes()
    )
    (folder / "train" / token_store.offsets_file(name, "text")).write_bytes(offsets.tobytes())
    entries.append({"name": name, "examples": len(ids), "tokens": {"text": int(offsets[-1])}})
  manifest = {
      "fields": ["text"],
      "dtype": dtype.str,
      "labels": False,
      "splits": {"train": {"shards": entries}},
  }
  return token_store.Store(str(folder), manifest).split("train")


def test_empty_dataset_is_a_clear_error(char_tokenizer):
  with pytest.raises(ValueError, match="nothing to train on"):
    next(text_batches.clm_batches(["", ""], char_tokenizer, batch_size=B, seq_len=L, add_eos=False))
  with pytest.raises(ValueError, match="nothing to train on"):
    next(text_batches.mlm_batches(["a"], char_tokenizer, batch_size=B, seq_len=L, nsp=True))
