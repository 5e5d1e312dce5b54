"""Pairs where researchers keep them (docs/pairs.md): jsonl (plain, gzip, zstd) and parquet files
with two fields, a struct's fields or a `translation` struct's languages, and hf: folders with a
translation column or two text columns, all read as the same pairs in the same splits; prepared
into a token store that keeps them as pairs; packed whole into decoder-only rows; and every bad
input one error naming it before anything is written."""

import sys

import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs as configs_lib
from tests.data.text import corpora
from tests.data.text import en_es
from tests.survival import conftest as survival
from vit_jax import data
from vit_jax import errors
from vit_jax import evaluate as evaluators
from vit_jax.config import checks
from vit_jax.data import tokenizers
from vit_jax.data.text import datasets
from vit_jax.data.text import packed_pairs
from vit_jax.data.text import records
from vit_jax.data.text import seq2seq_batches
from vit_jax.data.text import store_writer
from vit_jax.data.text import token_store
from vit_jax.evaluate import decoding

TRAIN, VALIDATION = en_es.split("train"), en_es.split("validation")


def _read(source="en", target="es", bad_documents="error") -> data.ReadOptions:
  return data.ReadOptions(
      text_key="text", source_key=source, target_key=target, bad_documents=bad_documents
  )


def _quiet(_):
  pass


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
  """{layout: (dataset, its source_key, its target_key)} of the same 200 pairs."""
  root = tmp_path_factory.mktemp("layouts")
  found = {}
  for ext in (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet"):
    pattern = f"{root}/{ext[1:]}/*{ext}"
    en_es.write_files(pattern)
    found[ext] = (f"files:{pattern}", "en", "es")
  for ext in (".jsonl.zst", ".parquet"):  # OPUS's rows as files: {"translation": {...}}
    pattern = f"{root}/translation{ext.replace('.', '_')}/*{ext}"
    en_es.write_files(pattern, translation=True)
    found[f"translation{ext}"] = (f"files:{pattern}", "en", "es")
    found[f"dotted{ext}"] = (f"files:{pattern}", "translation.en", "translation.es")
  found["hf translation"] = (f"hf:{en_es.write_hub(root / 'opus')}", "en", "es")
  summaries = en_es.write_hub(root / "summaries", keys=("article", "summary"), translation=False)
  found["hf columns"] = (f"hf:{summaries}", "article", "summary")
  return found


@pytest.mark.parametrize(
    "layout",
    [".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet", "translation.jsonl.zst",
     "translation.parquet", "dotted.parquet", "hf translation", "hf columns"],
)  # fmt: skip
def test_each_layout_reads_the_same_pairs_in_the_same_splits(layouts, layout):
  name, source, target = layouts[layout]
  options = _read(source, target)
  assert datasets.dataset_kind(name, options) == "pairs"
  for split, want in (("train", TRAIN), ("validation", VALIDATION)):
    read = datasets.memory_examples(name, split, kind="pairs", read_options=options)
    assert read == want and len(want) == {"train": 190, "validation": 10}[split]
  if name.startswith("files:"):  # as a store's shards read them: parts of the whole, in order
    parts = [
        datasets.read_examples(name, "train", kind="pairs", read_options=options, shard=k,
                               shard_count=3)  # fmt: skip
        for k in range(3)
    ]
    assert sum(map(list, parts), []) == TRAIN
  texts = datasets.dataset_texts(name, max_texts=4, read_options=options)
  assert texts == [*TRAIN[0], *TRAIN[1]]  # a tokenizer learns both sides


@pytest.mark.parametrize("layout", [".jsonl.zst", "hf translation"])
def test_a_store_keeps_pairs_as_pairs(layouts, layout, tmp_path):
  """Shards of 40 pairs: a store of files begins and ends shards inside them."""
  name, source, target = layouts[layout]
  config = configs_lib.load("seq2seq", f"dataset={name}")
  config.source_key, config.target_key = source, target
  out = str(tmp_path / "store")
  checks.validate_preparation(config, out)
  assert store_writer.prepare(config, out, examples_per_shard=40, workers=1, report=_quiet)
  store = token_store.open_store(out, ["train", "validation"])
  assert (store.kind, store.fields) == ("pairs", ("source", "target"))
  assert store.manifest["read_settings"]["source_key"] == source
  tok = tokenizers.load_tokenizer(store.tokenizer_dir())
  for split, want in (("train", TRAIN), ("validation", VALIDATION)):
    stored = store.split(split)
    ids = np.arange(stored.num_examples)
    got = zip(*(map(tok.decode, stored.examples(f, ids)) for f in ("source", "target")))
    assert list(got) == want
  if layout == ".jsonl.zst":
    assert len(store.manifest["splits"]["train"]["shards"]) == 5
  # The decoder-only design trains on the same store: it reads the same pairs.
  gpt = configs_lib.load("gpt", f"dataset={name},pairs")
  gpt.update(source_key=source, target_key=target, token_store=out)
  checks.validate_config(gpt)
  with data.opened_once():
    checks.validate_training(gpt, str(tmp_path / "gpt"))
  gpt.target_key = "fr" if layout == "hf translation" else "de"  # not the store's
  with data.opened_once(), pytest.raises(errors.DataError, match="read with --config.target_key="):
    checks.validate_training(gpt, str(tmp_path / "gpt"))


# ---- decoder-only rows ------------------------------------------------------------------------


def _char_tokenizer():
  return tokenizers.CharTokenizer.train([t for pair in TRAIN for t in pair])


def _rows(**kwargs):
  args = {"batch_size": 4, "seq_len": 64, "split": "train", **kwargs}
  return packed_pairs.pair_batches(TRAIN, _char_tokenizer(), **args)


def test_rows_pack_whole_pairs_each_a_segment_with_the_loss_on_its_target():
  tok = _char_tokenizer()
  rows = packed_pairs.PairRows(datasets.tokenize(TRAIN, "pairs", tok), 65)
  assert rows.starts[0] == 0 and rows.starts[-1] == len(TRAIN)
  batch = next(iter(_rows(train=False)))  # rows 0..3 in stored order
  pair = 0
  for b in range(4):
    tokens_T = np.append(batch["inputs"][b], batch["targets"][b][-1])
    segments = batch["segment_ids"][b]
    assert list(np.unique(segments[segments > 0])) == list(
        range(1, rows.starts[b + 1] - rows.starts[b] + 1)
    )
    column = 0
    for segment in range(1, segments.max() + 1):
      source, target = (tok.encode(t) for t in TRAIN[pair])
      whole = [*source, tok.sep_id, *target, tok.eos_id]
      end = column + len(whole)
      assert tokens_T[column:end].tolist() == whole
      assert batch["positions"][b][column : end - 1].tolist() == list(range(len(whole) - 1))
      weighted = batch["weights"][b][column : end - 1] > 0  # the targets of inputs in the pair
      assert weighted.tolist() == [False] * len(source) + [True] * (len(target) + 1)
      assert batch["targets"][b][column : end - 1][weighted].tolist() == [*target, tok.eos_id]
      column, pair = end, pair + 1
    assert column + (rows.starts[b + 1] < len(TRAIN)) * 0 <= 65
    assert not batch["weights"][b][column:].any() and not segments[column:].any()
  all_tokens = next(iter(_rows(train=False, loss_on="all")))
  within_pair = (all_tokens["segment_ids"] > 0) & (all_tokens["weights"] > 0)
  assert (batch["weights"] <= all_tokens["weights"]).all() and within_pair.sum() > batch[
      "weights"
  ].sum()


def test_a_pair_longer_than_a_row_is_cut_longest_first_and_counted(capsys):
  long_pairs = [("a" * 50, "b" * 10), ("c" * 40, "d" * 40), ("e", "f")] * 2
  tok = tokenizers.CharTokenizer.train(["abcdef"])
  batch = next(iter(packed_pairs.pair_batches(long_pairs, tok, batch_size=6, seq_len=31)))
  said = capsys.readouterr().out
  assert "note: 4 of the 6 training pairs are longer than --config.seq_len=31" in said
  assert packed_pairs.fit(50, 10, 32) == (20, 10) and packed_pairs.fit(40, 40, 32) == (15, 15)
  assert batch["inputs"].shape == (6, 31)
  weights_per_row = sorted(batch["weights"].sum(axis=1).tolist())
  assert weights_per_row == [2, 2, 11, 11, 16, 16]  # target and EOS of (e, f), (a, b), (c, d)


def test_rows_resume_by_step_and_do_not_depend_on_the_shards():
  straight = [b for _, b in zip(range(4), _rows(seed=3))]
  resumed = next(iter(_rows(seed=3, start_step=3)))
  for key in straight[3]:
    np.testing.assert_array_equal(resumed[key], straight[3][key])
  halves = [next(iter(_rows(seed=3, start_step=1, shard=k, shard_count=2, batch_size=2)))
            for k in range(2)]  # fmt: skip
  for key in straight[1]:
    np.testing.assert_array_equal(np.concatenate([h[key] for h in halves]), straight[1][key])
  count = packed_pairs.PairRows(datasets.tokenize(TRAIN, "pairs", _char_tokenizer()), 65).rows
  epoch = [b for _, b in zip(range(-(-count // 5)), _rows(seed=3, batch_size=5))]
  read = [tuple(row) for b in epoch for row in b["inputs"]][:count]
  assert len(set(read)) == count  # an epoch reads every row once, in a shuffled order
  assert read != [tuple(row) for b in _rows(train=False, batch_size=5) for row in b["inputs"]]


def test_seq2seq_counts_the_pairs_it_cuts(capsys):
  tok = _char_tokenizer()
  batches = seq2seq_batches.seq2seq_batches(TRAIN, tok, batch_size=2, input_len=24, target_len=64)
  batch = next(iter(batches))
  cut = sum(len(tok.encode(s)) + 1 > 24 for s, _ in TRAIN)
  assert f"note: {cut} of the 190 training pairs are longer than --config.input_len=24" in (
      capsys.readouterr().out
  )
  assert batch["inputs"].shape == (2, 24) and cut > 0


# ---- bad input --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
  """Folders of pairs each with one problem, and the good folders beside them."""
  root = tmp_path_factory.mktemp("bad_pairs")
  corpus = en_es.pairs()
  en_es.write_files(f"{root}/good/*.jsonl.zst")
  emptied = list(corpus)
  emptied[41] = (corpus[41][0], "")  # position 41: a training pair
  en_es.write_files(f"{root}/empty/*.jsonl.zst", corpus=emptied)
  en_es.write_files(f"{root}/empty_parquet/*.parquet", corpus=emptied)
  en_es.write_hub(root / "hub_empty", corpus=emptied)
  en_es.write_hub(root / "hub", keys=("en", "es"))
  en_es.write_files(f"{root}/fields/*.jsonl.gz", keys=("english", "spanish"))
  corpora.write(f"{root}/txt/*.txt", ["a document"] * 25)
  return root


BAD = {  # name -> (dataset under the fixture's folder, source_key, target_key, the error's words)
    "source field": (
        "files:{root}/fields/*.jsonl.gz", "en", "es",
        "part-00000.jsonl.gz line 1: has no field 'en' (its fields: id, english, spanish); name "
        "the pair's fields with --config.source_key and --config.target_key",
    ),
    "target field": (
        "files:{root}/good/*.jsonl.zst", "en", "fr",
        "line 1: has no field 'fr' (its fields: id, en, es)",
    ),
    "language": (
        "hf:{root}/hub", "en", "fr",
        "has no language 'fr' in its 'translation' (its languages: en, es); name the source and "
        "target columns",
    ),
    "empty target": (
        "files:{root}/empty/*.jsonl.zst", "en", "es",
        "part-00000.jsonl.zst line 42: its field 'es' is empty; fix or remove it, or skip such "
        "documents with --config.bad_documents=skip",
    ),
    "empty parquet target": (
        "files:{root}/empty_parquet/*.parquet", "en", "es",
        "part-00000.parquet row 42: its 'es' is empty",
    ),
    "empty hub target": (
        "hf:{root}/hub_empty", "en", "es", "(train) row 40: its 'translation.es' is empty",
    ),
    "text files": ("files:{root}/txt/*.txt", "en", "es", "is a .txt file"),
    "one key": ("files:{root}/good/*.jsonl.zst", "en", None, "--config.source_key is set alone"),
    "not files": ("toy_reverse", "en", "es", "reads its own examples: leave them unset"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("command", ["prepare", "train"])
def test_bad_pairs_are_refused_before_anything_is_written(bad, case, command, tmp_path):
  name, source, target, says = BAD[case]
  config = configs_lib.load("seq2seq", "dataset=" + name.format(root=bad))
  config.source_key, config.target_key = source, target
  out = tmp_path / "out"
  with data.opened_once(), pytest.raises(errors.UserError) as raised:
    if command == "prepare":
      checks.validate_preparation(config, str(out))
      store_writer.prepare(config, str(out), workers=1, report=_quiet)
    else:
      checks.validate_training(config, str(out))
  assert says in str(raised.value) and "\n" not in str(raised.value), str(raised.value)
  assert not out.exists()


@pytest.mark.parametrize("layout", ["empty", "empty_parquet", "hub_empty"])
def test_skipped_bad_pairs_are_counted_and_the_others_keep_their_splits(
    bad, layout, capsys, monkeypatch
):
  monkeypatch.setattr(records, "_warned", set())
  name = f"hf:{bad / layout}" if layout.startswith("hub") else f"files:{bad}/{layout}/*"
  options = _read(bad_documents="skip")
  train = datasets.memory_examples(name, "train", kind="pairs", read_options=options)
  assert train == TRAIN[:39] + TRAIN[40:]  # position 41 is the 40th training pair
  assert (
      datasets.memory_examples(name, "validation", kind="pairs", read_options=options) == VALIDATION
  )
  assert "1 bad document skipped (split train" in capsys.readouterr().err


def test_the_command_line_says_it_in_one_line_with_exit_2(bad, tmp_path):
  """prepare's exit, for a language the translation column lacks."""
  out = tmp_path / "store"
  result = helpers.run(
      [
          sys.executable,
          "-m",
          "vit_jax.prepare",
          f"--config=configs/seq2seq.py:dataset=hf:{bad / 'hub'}",
          "--config.source_key=de",
          "--config.target_key=es",
          f"--output={out}",
      ]
  )
  assert result.returncode == 2
  survival.assert_one_line_error(result.stderr, "has no language 'de'", "its languages: en, es")
  assert not out.exists()


@pytest.mark.parametrize(
    "family, setting, says",
    [
        ("bert", None, "holds pairs, but documents are needed"),
        ("gpt", "documents", "scores a model trained on pairs, and --config.dataset="),
    ],
)
def test_a_run_that_cannot_read_or_score_pairs_is_refused_in_one_line(
    bad, family, setting, says, tmp_path
):
  pairs = ",pairs" if family == "gpt" else ""
  config = configs_lib.load(family, f"dataset=files:{bad}/good/*.jsonl.zst{pairs}")
  config.source_key, config.target_key = "en", "es"
  if setting == "documents":
    config.source_key = config.target_key = None
    config.text_key = "en"
  with data.opened_once(), pytest.raises(errors.ConfigError, match=says):
    checks.validate_training(config, str(tmp_path / "w"))
    evaluator = object.__new__(decoding.Seq2SeqDecoding)  # its data checks, without a model
    evaluator.name, evaluator.config = "bleu", config
    evaluator.settings = evaluators.evals_of(config)["bleu"]
    evaluator.check_data()
