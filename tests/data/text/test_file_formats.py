"""files:GLOB by format (vit_jax/data/text/files.py): jsonl (plain, gzip, zstd) and parquet read
as the same documents as .txt files, in the same splits, directly, from a bucket and through a
token store; docs/text.md's commands prepare, train and evaluate on each; every bad input is one
error naming it before anything is written."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import helpers
from tests import test_documented_commands as documented
from tests import tiny_configs as configs_lib
from tests.data.text import corpora
from tests.survival import conftest as survival
from vit_jax import data
from vit_jax import errors
from vit_jax.config import checks
from vit_jax.data import tokenizers
from vit_jax.data.text import datasets
from vit_jax.data.text import files
from vit_jax.data.text import store_writer
from vit_jax.data.text import token_store
from vit_jax.training import train

DOCS = corpora.documents(130)  # 124 train, 6 validation
FORMATS = {  # extension -> the field its documents' text is in
    ".jsonl.zst": "content",
    ".jsonl.gz": "text",
    ".jsonl": "text",
    ".parquet": "text",
}


def _quiet(_):
  pass


def _read(text_key: str = "text", bad_documents: str = "error") -> data.ReadOptions:
  """How a config with these keys reads files (data.read_options)."""
  return data.ReadOptions(text_key=text_key, bad_documents=bad_documents)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """{extension: files: dataset} of DOCS in each format."""
  root = tmp_path_factory.mktemp("corpus")
  names = {}
  for ext in (".txt", *FORMATS):
    pattern = f"{root}/{ext.strip('.').replace('.', '_')}/*{ext}"
    corpora.write(pattern, DOCS, text_key=FORMATS.get(ext, "text"))
    names[ext] = f"files:{pattern}"
  return names


@pytest.mark.parametrize("ext", list(FORMATS))
def test_each_format_reads_as_the_text_files_do(corpus, ext):
  """The same documents in the same splits, whole and in parts (as a store's shards)."""
  options = _read(FORMATS[ext])
  for split in ("train", "validation"):
    expected = datasets.memory_examples(corpus[".txt"], split)
    read = datasets.memory_examples(corpus[ext], split, read_options=options)
    assert read == expected and len(expected) == {"train": 124, "validation": 6}[split]
    parts = [
        datasets.read_examples(corpus[ext], split, read_options=options, shard=k, shard_count=4)
        for k in range(4)
    ]
    assert sum(map(list, parts), []) == expected


def test_files_in_a_bucket_read_as_local_ones(corpus, gcs):
  remote = gcs.new_dir("corpus")
  for ext in (".jsonl.zst", ".parquet"):
    local = corpus[ext].split(":", 1)[1]
    gcs.upload(os.path.dirname(local), f"{remote}/{ext.strip('.')}")
    name = f"files:{remote}/{ext.strip('.')}/*{ext}"
    options = _read(FORMATS[ext])
    assert datasets.memory_examples(name, "validation", read_options=options) == (
        datasets.memory_examples(corpus[ext], "validation", read_options=options)
    )


@pytest.mark.parametrize("ext, workers", [(".jsonl.zst", 1), (".parquet", 2)])
def test_a_store_of_each_format_holds_what_is_read_directly(corpus, ext, workers, tmp_path):
  """Shards of 10 documents begin and end inside files and parquet row groups (of 7 rows)."""
  config = configs_lib.load("gpt", f"dataset={corpus[ext]}")
  config.text_key = FORMATS[ext]
  out = str(tmp_path / "store")
  said = []
  assert store_writer.prepare(
      config, out, examples_per_shard=10, workers=workers, report=said.append
  )
  assert "prepare: 130 documents in 3 files" in said
  store = token_store.open_store(out, ["train", "validation"])
  assert store.manifest["read_settings"] == {"text_key": FORMATS[ext], "bad_documents": "error"}
  assert json.load(open(f"{out}/{token_store.FILES_FILE}"))["files"][0][1] == 43
  tok = tokenizers.load_tokenizer(store.tokenizer_dir())
  for split in ("train", "validation"):
    stored = store.split(split)
    assert [tok.decode(d) for d in stored.examples("text", np.arange(stored.num_examples))] == (
        datasets.memory_examples(corpus[".txt"], split)
    )
  config.text_key = "text" if ext == ".jsonl.zst" else "body"  # not the store's
  with pytest.raises(errors.DataError, match="other settings.*text_key: the store's"):
    store_writer.prepare(config, out, examples_per_shard=10, workers=1, report=_quiet)
  config.token_store = out
  with data.opened_once(), pytest.raises(errors.DataError, match="read with --config.text_key="):
    checks.validate_training(config, str(tmp_path / "w"))


def test_a_store_made_again_at_the_same_output_reads_its_own_files(corpus, tmp_path):
  """What a process keeps of a store it wrote (tokenizer, files.json) is not the next one's."""
  other = f"{tmp_path}/other/*.parquet"
  corpora.write(other, corpora.documents(60, seed=1))
  out = str(tmp_path / "store")
  for name, train_examples in ((corpus[".txt"], 124), (f"files:{other}", 57)):
    config = configs_lib.load("gpt", f"dataset={name}")
    assert store_writer.prepare(config, out, examples_per_shard=50, workers=1, report=_quiet)
    assert token_store.open_store(out).manifest["splits"]["train"]["examples"] == train_examples
    shutil.rmtree(out)


# ---- docs/text.md's commands: prepare, train, evaluate --------------------------------------

TINY = (  # the documented commands, at the size of a test
    "--config.model.variant=pico",
    "--config.model.dtype=float32",
    "--config.seq_len=32",
    "--config.batch_size=4",
    "--config.total_steps=3",
    "--config.eval_every=3",
    "--config.checkpoint_every=3",
    "--config.eval_max_batches=2",
    "--config.optimizer.warmup_steps=1",
    "--config.progress=lines",
)


def _documented(ext: str):
  """docs/text.md's (prepare, training) commands of the files of extension `ext`."""
  dataset = lambda c: f"{ext}," in c.flag("config") or c.flag("config").endswith(ext)
  found = [
      c
      for c in documented.COMMANDS
      if c.source == "docs/text.md" and "files:" in (c.flag("config") or "") and dataset(c)
  ]
  (prepare,) = [c for c in found if c.module == "vit_jax.prepare"]
  (training,) = [c for c in found if c.flag("config.token_store") == prepare.flag("output")]
  return prepare, training


@pytest.mark.parametrize("ext", [".jsonl.zst", ".jsonl.gz", ".parquet"])
def test_documented_commands_prepare_train_and_evaluate(ext, tmp_path, monkeypatch, capsys):
  prepare, training = _documented(ext)
  monkeypatch.chdir(helpers.ROOT)
  argv = documented.with_local_paths(training, tmp_path) + list(TINY)
  config = documented.resolve_config(argv, monkeypatch, capsys)
  documented.shrink_vocabulary(config)  # as prepare_store shrinks the store's
  corpora.write(config.dataset.split(":", 1)[1], DOCS, text_key=config.text_key)
  documented.prepare_store(prepare, tmp_path, monkeypatch, capsys)
  assert config.token_store == documented.local_path(prepare.flag("output"), tmp_path)
  assert config.eval_split == "validation"
  result = train.train_and_evaluate(
      config, documented.local_path(training.flag("workdir"), tmp_path)
  )
  assert np.isfinite(result["eval/loss"]) and result["eval/loss"] > 0


# ---- bad input -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
  """Folders of files each with one problem (a good file first, so that only reading them whole
  finds the problem where it is in a later file)."""
  root = tmp_path_factory.mktemp("bad")
  corpora.write(f"{root}/line/*.jsonl.gz", DOCS[:40], files=2)
  lines = [json.dumps({"text": d}) for d in DOCS[40:60]]
  lines[2] = '{"text": "cut off'  # DOCS[42], at position 42
  corpora.write_jsonl(f"{root}/line/part-00002.jsonl.gz", "\n".join(lines).encode())
  corpora.write(f"{root}/surrogate/*.jsonl.zst", DOCS[:40], files=2)
  lines[2] = '{"text": "half \\ud83d emoji"}'  # JSON of half a UTF-16 pair: not text
  corpora.write_jsonl(f"{root}/surrogate/part-00002.jsonl.zst", "\n".join(lines).encode())
  corpora.write(f"{root}/null/*.parquet", DOCS[:40], files=2)
  rows = DOCS[40:60]
  rows[1] = None  # DOCS[41]
  pq.write_table(pa.table({"text": rows}), f"{root}/null/part-00002.parquet")
  corpora.write(f"{root}/broken/*.parquet", DOCS[:40], files=2)
  (root / "broken" / "part-00002.parquet").write_bytes(b"PAR1 not really parquet PAR1")
  corpora.write(f"{root}/column/*.parquet", DOCS[:40], text_key="body")
  corpora.write(f"{root}/key/*.jsonl.zst", DOCS[:40], text_key="content")
  (root / "csv").mkdir()
  (root / "csv" / "a.csv").write_text("id,text\n1,hello\n")
  return root


CASES = {  # name -> (pattern under the fixture's folder, the error's words)
    "no match": ("nothing/*.jsonl", "no files match"),
    "extension": ("csv/*", "a.csv is not of a format text is read from: .txt, .jsonl,"),
    "key": (
        "key/*.jsonl.zst",
        "has no field 'text' to read the text from (its fields: id, content)",
    ),
    "column": ("column/*.parquet", "has no column 'text' (its columns: id, body)"),
    "line": ("line/*.jsonl.gz", "part-00002.jsonl.gz line 3: not JSON"),
    "null": ("null/*.parquet", "part-00002.parquet row 2: its 'text' is null"),
    "surrogate": (
        "surrogate/*.jsonl.zst",
        "part-00002.jsonl.zst line 3: its field 'text' holds lone surrogate '\\ud83d'",
    ),
    "parquet": ("broken/*.parquet", "part-00002.parquet: not a readable parquet file"),
}
SKIPPABLE = ("line", "null", "surrogate")  # bad documents; a file not read whole is no document


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_before_anything_is_written(bad, case, tmp_path):
  """By prepare before its output folder exists, and by a run that reads the files directly
  before its workdir exists; a bad document's error says how to skip such documents."""
  pattern, words = CASES[case]
  config = configs_lib.load("gpt", f"dataset=files:{bad}/{pattern}")
  out = str(tmp_path / "store")
  with pytest.raises(errors.DataError) as refused:
    checks.validate_preparation(config, out)
    store_writer.prepare(config, out, workers=1, report=_quiet)
  assert words in str(refused.value) and not os.path.exists(out)
  assert ("--config.bad_documents=skip" in str(refused.value)) == (case in SKIPPABLE)
  with data.opened_once(), pytest.raises(errors.DataError, match=re.escape(words.split(":")[0])):
    checks.validate_training(config, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("case", SKIPPABLE)
def test_skipped_bad_documents_are_warned_counted_and_keep_the_others_splits(
    bad, case, tmp_path, capsys
):
  """The documents after a skipped one keep their positions: DOCS[59] is still the 60th, and
  validation's; the tokenizer learns from the others."""
  config = configs_lib.load("gpt", f"dataset=files:{bad}/{CASES[case][0]}")
  config.bad_documents = "skip"
  out = str(tmp_path / "store")
  assert store_writer.prepare(config, out, examples_per_shard=7, workers=1, report=print)
  warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
  where = CASES[case][1].split(": ")[0]
  assert any(line.startswith("warning: skipping") and where in line for line in warnings)
  assert any("1 bad document skipped" in line for line in warnings), warnings
  store = token_store.open_store(out, ["train", "validation"])
  assert store.manifest["files"]["skipped"] == 1
  validation = [DOCS[19], DOCS[39], DOCS[59]]
  skip = _read(bad_documents="skip")
  assert datasets.memory_examples(config.dataset, "validation", read_options=skip) == validation
  tok = tokenizers.load_tokenizer(store.tokenizer_dir())
  for split in ("train", "validation"):
    direct = datasets.memory_examples(config.dataset, split, read_options=skip)
    stored = store.split(split)
    assert [tok.decode(d) for d in stored.examples("text", np.arange(stored.num_examples))] == (
        direct
    )


def test_a_corrupt_line_stops_prepare_in_one_line_with_exit_2(bad, tmp_path):
  out = tmp_path / "store"
  result = helpers.run(
      [
          sys.executable,
          "-m",
          "vit_jax.prepare",
          f"--config={helpers.ROOT}/configs/gpt.py:dataset=files:{bad}/line/*.jsonl.gz",
          f"--output={out}",
      ]
  )
  assert result.returncode == 2, result.stderr[-3000:]
  survival.assert_one_line_error(
      result.stderr, "part-00002.jsonl.gz line 3: not JSON", "--config.bad_documents=skip"
  )
  assert not out.exists()


# A module run as `python -m` runs it, with pyarrow and zstandard unimportable (as without the
# data extra), by a finder placed first on sys.meta_path.
_WITHOUT_DATA_EXTRA = """
import importlib.abc, runpy, sys

class WithoutDataExtra(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in ("pyarrow", "zstandard"):
      raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return None

sys.meta_path.insert(0, WithoutDataExtra())
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def test_without_the_data_extra_one_line_names_the_install(corpus, tmp_path, monkeypatch):
  out = tmp_path / "store"
  result = subprocess.run(
      [
          sys.executable,
          "-c",
          _WITHOUT_DATA_EXTRA,
          "vit_jax.prepare",
          f"--config={helpers.ROOT}/configs/gpt.py:dataset={corpus['.jsonl.zst']}",
          "--config.text_key=content",
          f"--output={out}",
      ],
      env=helpers.env(),
      cwd=helpers.ROOT,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert result.returncode == 2, result.stderr[-3000:]
  survival.assert_one_line_error(result.stderr, "data extra", 'pip install -e ".[data]"')
  assert not out.exists()
  monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # in-process: parquet too
  with pytest.raises(errors.MissingExtraError, match=r'pip install -e "\.\[data\]"'):
    files.check(corpus[".parquet"], _read())
  assert glob.glob(corpus[".parquet"].split(":", 1)[1])  # the files are there: only pyarrow is not


_IMPORTED = """
import json, sys
from vit_jax import data
from vit_jax.data.text import datasets
readers = ("pyarrow", "zstandard", "vit_jax.data.parquet", "vit_jax.data.jsonl")
for name, text_key in json.loads(sys.argv[1]):
  options = data.ReadOptions(text_key=text_key)
  datasets.memory_examples(name, "validation", read_options=options)
  print(json.dumps(sorted(m for m in sys.modules if m in readers)))
"""


def test_a_run_imports_only_the_reader_its_files_need(corpus):
  names = [[corpus[".jsonl.gz"], "text"], [corpus[".parquet"], "text"]]
  result = subprocess.run(
      [sys.executable, "-c", _IMPORTED, json.dumps(names)],
      env=helpers.env(),
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  after_jsonl_gz, after_parquet = map(json.loads, result.stdout.splitlines())
  assert after_jsonl_gz == ["vit_jax.data.jsonl"]  # gzip is Python's own
  assert after_parquet == ["pyarrow", "vit_jax.data.jsonl", "vit_jax.data.parquet"]
