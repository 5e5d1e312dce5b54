"""Token stores: what vit_jax.prepare writes reads back as the dataset; preparation resumes,
refuses to overwrite, and a store that is unfinished, damaged or of another tokenizer is refused
in one line."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import helpers
from tests import tiny_configs as configs_lib
from tests.data.text import tiny_text
from vit_jax import data
from vit_jax import errors
from vit_jax.config import checks
from vit_jax.data import tokenizers
from vit_jax.data.text import batches
from vit_jax.data.text import datasets
from vit_jax.data.text import store_writer
from vit_jax.data.text import token_store

B, L = 4, 32


def _quiet(_):
  pass


def _same(a, b):
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.fixture(scope="module")
def text_files(tmp_path_factory):
  """60 small text files: a `files:` dataset of 57 training and 3 validation documents."""
  folder = tmp_path_factory.mktemp("texts")
  rng = np.random.default_rng(0)
  for i in range(60):
    words = rng.choice(tiny_text.WORDS, int(rng.integers(5, 200)))
    (folder / f"doc{i:02d}.txt").write_text(" ".join(words) + "\n")
  return f"files:{folder}/*.txt"


def gpt_config(dataset, **overrides):
  config = configs_lib.load("gpt", f"dataset={dataset}")
  config.update(overrides)
  return config


def test_a_prepared_store_reads_as_the_dataset(text_files, tmp_path):
  config = gpt_config(text_files)
  out = str(tmp_path / "store")
  assert store_writer.prepare(config, out, examples_per_shard=10, workers=2, report=_quiet)
  store = token_store.open_store(out, ["train", "validation"])
  assert store.dataset == text_files and len(store.manifest["splits"]["train"]["shards"]) == 6
  tok = tokenizers.load_tokenizer(store.tokenizer_dir())
  assert tok.fingerprint == store.tokenizer_fingerprint
  for split in ("train", "validation"):
    stored = store.split(split)
    memory = datasets.open_split(text_files, split, kind="documents", tokenizer=tok)
    assert stored.num_examples == memory.num_examples
    ids = np.arange(memory.num_examples)
    for a, b in zip(stored.examples("text", ids), memory.examples("text", ids)):
      np.testing.assert_array_equal(a, b)
  for make in (batches.clm_batches, batches.mlm_batches):
    from_store = make(text_files, tok, batch_size=B, seq_len=L, token_store=out, start_step=7)
    from_memory = make(text_files, tok, batch_size=B, seq_len=L, start_step=7)
    _same(next(from_store), next(from_memory))


def test_tfds_shards_and_labels(tiny_text_dir, monkeypatch, tmp_path):
  """A TFDS dataset's shards (TFDS's even splits) hold its split once, in order."""
  name = tiny_text.register(monkeypatch)
  config = gpt_config(name, data_dir=tiny_text_dir)
  out = str(tmp_path / "store")
  assert store_writer.prepare(config, out, examples_per_shard=50, workers=1, report=_quiet)
  store = token_store.open_store(out, ["train"])
  assert [s["examples"] for s in store.manifest["splits"]["train"]["shards"]] == [46] * 5
  tok = tokenizers.load_tokenizer(store.tokenizer_dir())
  documents = store.split("train").examples("text", np.arange(230))
  texts = [tok.decode(d) for d in documents]
  assert texts == list(datasets_texts(name, tiny_text_dir))


def datasets_texts(name, data_dir):
  from vit_jax.data.text import datasets  # pylint: disable=g-import-not-at-top

  return datasets.read_examples(name, "train", data_dir=data_dir)


def test_labeled_and_pair_stores(tmp_path):
  with tfds.testing.mock_data(num_examples=12):
    config = configs_lib.load("bert_classifier", "dataset=imdb_reviews")
    out = str(tmp_path / "imdb")
    store_writer.prepare(config, out, workers=1, report=_quiet)
    tok = tokenizers.load_tokenizer(f"{out}/tokenizer")
    make = lambda **kw: batches.cls_batches(
        "imdb_reviews", tok, batch_size=B, seq_len=L, split="test", train=False, **kw
    )
    for stored, memory in zip(make(token_store=out), make()):
      _same(stored, memory)
    assert token_store.open_store(out).fields == ("text0",)


def test_preparation_resumes_after_a_kill(text_files, tmp_path):
  """SIGKILL during preparation: the rerun tokenizes only the shards that were not done, and the
  store is the one an uninterrupted preparation writes."""
  command = lambda out: [
      sys.executable,
      "-m",
      "vit_jax.prepare",
      f"--config={helpers.ROOT}/configs/gpt.py:dataset={text_files}",
      f"--output={out}",
      "--examples_per_shard=1",
      "--workers=1",
  ]
  straight = helpers.run(command(tmp_path / "straight"))
  assert straight.returncode == 0, straight.stderr[-3000:]
  out = tmp_path / "killed"
  proc = subprocess.Popen(
      command(out), env=helpers.env(), cwd=helpers.ROOT, stdout=subprocess.PIPE, text=True
  )
  deadline = time.time() + 300
  while len(list(out.glob("train/*.json"))) < 5:
    assert proc.poll() is None and time.time() < deadline
    time.sleep(0.01)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  done = len(list(out.glob("train/*.json")))
  assert not (out / "store.json").exists()
  with pytest.raises(errors.DataError, match="is not finished"):
    token_store.open_store(str(out))
  again = helpers.run(command(out))
  assert again.returncode == 0, again.stderr[-3000:]
  assert f"{60 - done} of its 60 shards to tokenize" in again.stdout
  for path in (tmp_path / "straight").rglob("*"):
    if path.is_file():
      assert (out / path.relative_to(tmp_path / "straight")).read_bytes() == path.read_bytes()


def test_a_damaged_store_is_refused_in_one_line(text_files, tmp_path):
  config = gpt_config(text_files)
  out = tmp_path / "store"
  store_writer.prepare(config, str(out), examples_per_shard=20, workers=1, report=_quiet)
  shard = out / "train" / token_store.tokens_file("00001", "text")
  size = shard.stat().st_size
  shard.write_bytes(shard.read_bytes()[:100])
  with pytest.raises(errors.DataError, match=f"train/00001.text.tokens is 100 bytes, not {size}"):
    token_store.open_store(str(out), ["train"])
  workdir = tmp_path / "w"
  run = helpers.run(
      [
          sys.executable,
          "-m",
          "vit_jax.main",
          f"--config={helpers.ROOT}/configs/gpt.py:dataset={text_files}",
          f"--config.token_store={out}",
          f"--workdir={workdir}",
      ]
  )
  lines = [line for line in run.stderr.splitlines() if line.strip()]
  assert run.returncode == 2 and len(lines) == 1, run.stderr[-3000:]
  assert lines[0].startswith("error: the token store") and "00001.text.tokens" in lines[0]
  assert not workdir.exists()  # refused before anything was written or compiled
  shard.unlink()
  with pytest.raises(errors.DataError, match="train/00001.text.tokens is missing"):
    token_store.open_store(str(out), ["train"])
  (out / "store.json").write_text("{not json")
  with pytest.raises(errors.DataError, match="store.json is damaged"):
    token_store.open_store(str(out))
  with pytest.raises(errors.DataError, match="is not a token store"):
    token_store.open_store(str(tmp_path))


def test_a_store_of_other_settings_is_refused_before_anything_runs(text_files, tmp_path):
  config = gpt_config(text_files)
  out = str(tmp_path / "store")
  store_writer.prepare(config, out, examples_per_shard=30, workers=1, report=_quiet)
  stamps = {p: os.stat(p).st_mtime_ns for p in _files(out)}
  other = gpt_config(text_files)
  other.tokenizer.vocab_size = 40
  with pytest.raises(errors.DataError, match="other settings.*vocab_size"):
    store_writer.prepare(other, out, examples_per_shard=30, workers=1, report=_quiet)
  another_copy = gpt_config(text_files, data_dir="tfds_copy")  # relative: as the plan's, absolute
  with pytest.raises(
      errors.DataError,
      match=f"other settings \\(data_dir: the store's None, now '{os.path.abspath('tfds_copy')}'",
  ):
    store_writer.prepare(another_copy, out, examples_per_shard=30, workers=1, report=_quiet)
  assert {p: os.stat(p).st_mtime_ns for p in _files(out)} == stamps  # nothing rewritten
  with data.opened_once():
    other.token_store = out
    with pytest.raises(
        errors.DataError,
        match=r"another tokenizer: --config\.tokenizer\.vocab_size=None \(not 40\)",
    ):
      checks.validate_training(other, str(tmp_path / "w"))
    bert = configs_lib.load("bert", "dataset=embedded")
    bert.token_store = out
    with pytest.raises(
        errors.DataError, match="holds 'files:.*' as documents, not --config.dataset='embedded'"
    ):
      checks.validate_training(bert, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()
  with pytest.raises(errors.DataError, match="exists and is not an empty folder"):
    store_writer.prepare(config, str(tmp_path), workers=1, report=_quiet)


def _files(folder):
  return [os.path.join(r, n) for r, _, names in os.walk(folder) for n in names]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--config=configs/vit.py", "--output=OUT"],
            "--output is for a text config's token store",
        ),
        (["--config=configs/gpt.py", "--output=OUT"], "is one text tokenized when a run starts"),
        (["--config=configs/gpt.py:dataset=embedded"], "--output=DIR is required"),
        (["--output=OUT"], "--config is required"),
        (
            ["--config=configs/gpt.py:dataset=embedded", "--output=OUT", "--splits=test2"],
            "is not a split of 'embedded'",
        ),
    ],
)
def test_bad_preparation_input_is_one_line_and_exit_2(args, message, tmp_path):
  args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
  out = helpers.run([sys.executable, "-m", "vit_jax.prepare", *args])
  assert out.returncode == 2, out.stderr[-3000:]
  lines = [line for line in out.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("code, status", [(None, 0), (2, 2), ("error: message", 1)])
def test_prepare_ends_with_its_exit_status_and_output_without_the_interpreters_teardown(
    code, status
):
  """What pyarrow's threads can abort after an hf: dataset is read (exit -6) is skipped; the
  output, the atexit functions and the exit status are as sys.exit's."""
  script = (
      "import atexit, sys\n"
      "from vit_jax import prepare\n"
      "class Teardown:\n"
      "  def __del__(self):\n"
      "    print('teardown ran', flush=True)\n"
      "kept = Teardown()\n"
      "atexit.register(print, 'atexit ran')\n"
      "def run():\n"
      "  print('working')\n"
      f"  sys.exit({code!r})\n"
      "prepare._exit_without_teardown(run)\n"
  )
  ran = helpers.run([sys.executable, "-c", script])
  assert ran.returncode == status, ran.stderr[-3000:]
  assert ran.stdout.splitlines() == ["working", "atexit ran"]
  assert ran.stderr.strip() == ("" if status != 1 else code)


def test_a_store_in_a_bucket(text_files, tmp_path, gcs):
  local, remote = str(tmp_path / "store"), gcs.new_dir("store")
  config = gpt_config(text_files)
  for out in (local, remote):
    store_writer.prepare(config, out, examples_per_shard=20, workers=1, report=_quiet)
  assert json.loads(gcs.objects(remote)["store.json"]) == json.load(open(f"{local}/store.json"))
  tok = tokenizers.load_tokenizer(f"{local}/tokenizer")
  for make in (batches.clm_batches, batches.mlm_batches):
    read = lambda store: next(
        make(text_files, tok, batch_size=B, seq_len=L, token_store=store, seed=2)
    )
    _same(read(remote), read(local))
  storage_client = gcs._client().bucket(gcs.bucket)  # pylint: disable=protected-access
  prefix = remote.removeprefix(f"gs://{gcs.bucket}/")
  storage_client.blob(f"{prefix}/train/00001.text.offsets").upload_from_string(b"\0" * 8)
  with pytest.raises(errors.DataError, match="train/00001.text.offsets is 8 bytes, not"):
    token_store.open_store(remote, ["train"])


class _Interrupted(Exception):
  pass


def test_a_bucket_store_interrupted_and_rerun_by_worker_processes_is_finished(text_files, gcs):
  """The rerun's shards are written by worker processes, whose objects this process's cached
  listing of the bucket does not hold: they count as done, store.json is written, and training
  opens the store."""
  config, remote = gpt_config(text_files), gcs.new_dir("store")

  def stop_after_one_shard(line):
    if "shard 1/" in line:
      raise _Interrupted

  with pytest.raises(_Interrupted):  # one shard of 7 done
    store_writer.prepare(config, remote, examples_per_shard=10, report=stop_after_one_shard)
  said = []
  finished = store_writer.prepare(
      config, remote, examples_per_shard=10, workers=2, report=said.append
  )
  assert finished, said[-1]
  assert "6 of its 7 shards to tokenize, 2 at a time" in said[0], said
  store = token_store.open_store(remote, ["train", "validation"])
  assert [len(store.manifest["splits"][s]["shards"]) for s in store.splits] == [6, 1]


def test_a_shard_of_empty_documents_reads_as_empty_documents(tmp_path):
  """Its token file is empty (0 bytes, which cannot be memory-mapped): its documents, and any
  window of them, read as no tokens."""
  texts = ["alpha beta"] * 10 + [""] * 9 + ["held out"] + [""]  # position 19: validation's
  (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
  out = str(tmp_path / "store")
  config = gpt_config(f"files:{tmp_path}/docs.jsonl")
  store_writer.prepare(config, out, split_names=["train"], examples_per_shard=10, report=_quiet)
  assert os.path.getsize(f"{out}/train/{token_store.tokens_file('00001', 'text')}") == 0
  split = token_store.open_store(out, ["train"]).split("train")
  assert [len(d) for d in split.examples("text", np.arange(20))] == [10] * 10 + [0] * 10
  assert [len(w) for w in split.spans("text", [9, 15], [5, 0], [9, 4])] == [4, 0]


def test_a_store_whose_eval_split_has_no_tokens_is_refused_before_anything_runs(tmp_path):
  """Too few documents to hold one out, prepare refuses from its count before it writes. A
  validation split whose one document is empty it cannot know of before it tokenizes, but the
  run is refused by its checks, not at its first eval after all its training."""
  texts = ["alpha beta"] * 19
  (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
  out = str(tmp_path / "store")
  config = gpt_config(f"files:{tmp_path}/docs.jsonl")
  with pytest.raises(errors.DataError, match="has 19 documents, too few for a non-empty train"):
    store_writer.prepare(config, out, report=_quiet)
  assert not os.path.exists(out)
  with open(tmp_path / "docs.jsonl", "a", encoding="utf-8") as f:
    f.write(json.dumps({"text": ""}) + "\n")  # position 19: the validation split's
  store_writer.prepare(config, out, report=_quiet)
  config.token_store = out
  with pytest.raises(errors.DataError) as refused:
    checks.validate_training(config, str(tmp_path / "w"))
  assert str(refused.value).startswith(
      f"--config.eval_split='validation': the 'validation' split of the token store {out} "
      f"(files:{tmp_path}/docs.jsonl) holds 1 examples and no tokens"
  )
  assert "from more documents, or ones with text" in str(refused.value)
  assert not (tmp_path / "w").exists()


def test_a_rerun_on_files_that_changed_is_refused_naming_them(tmp_path):
  """Finished or interrupted, a store is not added to from files the pattern now matches
  otherwise: a file added, removed or resized is named (a listing, nothing read), and nothing is
  changed."""
  folder = tmp_path / "texts"
  folder.mkdir()
  for i in range(20):
    (folder / f"doc{i:02d}.txt").write_text(f"document {i}\n")
  config, out = gpt_config(f"files:{folder}/*.txt"), str(tmp_path / "store")
  store_writer.prepare(config, out, report=_quiet)
  stamps = {p: os.stat(p).st_mtime_ns for p in _files(out)}
  rerun = lambda: store_writer.prepare(config, out, report=_quiet)
  (folder / "doc20.txt").write_text("a new one\n")
  with pytest.raises(errors.DataError, match=f"other files .*\\(added {folder}/doc20.txt\\)"):
    rerun()
  (folder / "doc20.txt").unlink()
  (folder / "doc00.txt").write_text("document 0, longer\n")
  (folder / "doc01.txt").unlink()
  with pytest.raises(errors.DataError) as refused:
    rerun()
  assert f"(removed {folder}/doc01.txt; resized {folder}/doc00.txt (11 bytes, now 19))" in str(
      refused.value
  )
  os.remove(os.path.join(out, token_store.MANIFEST_FILE))  # as if interrupted: refused alike
  del stamps[os.path.join(out, token_store.MANIFEST_FILE)]
  with pytest.raises(errors.DataError, match="removed"):
    rerun()
  assert {p: os.stat(p).st_mtime_ns for p in _files(out)} == stamps
  (folder / "doc00.txt").write_text("document 0\n")
  (folder / "doc01.txt").write_text("document 1\n")
  assert rerun()  # the same files again: the store is finished
