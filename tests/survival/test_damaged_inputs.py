"""Every format the project reads, damaged as a copy that stopped early or a bad disk would
damage it, and read by its own reader in-process: truncated at several points (a tenth, half,
nine tenths of its length, one byte short) and with a byte changed at several offsets, and
hypothesis (derandomized) draws more of both.

Each case ends in exactly one of
  - a UserError whose one line names the damaged file;
  - the documented skip, counted: a jsonl line or a parquet row that is a bad document with
    bad_documents=skip, an image that does not decode (left out, the warning naming it), a null
    text of an hf: dataset;
  - for a checkpoint, the fallback to the step before it, said in one warning line;
or as many documents (examples, samples) as the undamaged file holds: a changed byte may leave a
file valid, only different. Never a traceback, and never fewer documents with neither an error
nor a count.
"""

import contextlib
import dataclasses
import io
import os
import re
import shutil
import sys

from hypothesis import example
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
import jax
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests import tiny_configs as configs_lib
from tests.data import hub_data
from tests.data.image import wds_shards
from tests.data.text import corpora
from tests.survival import conftest
from vit_jax import checkpoint
from vit_jax import data
from vit_jax import errors
from vit_jax.data.image import folder as image_folder
from vit_jax.data.image import pipeline
from vit_jax.data.image import sources
from vit_jax.data.image import webdataset
from vit_jax.data.text import datasets
from vit_jax.data.text import files
from vit_jax.data.text import records
from vit_jax.data.text import store_writer
from vit_jax.data.text import token_store

DOCS = corpora.documents(20)

# ---- Damage ------------------------------------------------------------------------------------

# (how, where as a fraction of the file's length, the bits a flip changes): "cut" keeps the bytes
# before `where` (at least one, at most all but the last), "flip" changes the byte at `where` (the
# last byte at 1.0).
DAMAGE = st.tuples(
    st.sampled_from(["cut", "flip"]), st.floats(0, 1), st.sampled_from([0x01, 0x20, 0x80, 0xFF])
)
NAMED = (  # every format gets these first, then what hypothesis draws
    ("cut", 0.1, 0),
    ("cut", 0.5, 0),
    ("cut", 0.9, 0),
    ("cut", 1.0, 0),  # one byte short
    ("flip", 0.0, 0xFF),
    ("flip", 0.3, 0x01),
    ("flip", 0.6, 0x80),
    ("flip", 1.0, 0x01),  # the last byte
)


def battery(drawn: int, named=NAMED):
  """A test of `damage`: the `named` damages, then `drawn` more that hypothesis draws (the same
  ones every run)."""

  def wrap(test):
    for damage in named:
      test = example(damage=damage)(test)
    return settings(
        max_examples=drawn,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )(given(damage=DAMAGE)(test))

  return wrap


def damaged(blob: bytes, damage) -> bytes:
  how, where, bits = damage
  if how == "cut":
    return blob[: min(max(1, int(where * len(blob))), len(blob) - 1)]
  at = min(int(where * len(blob)), len(blob) - 1)
  return blob[:at] + bytes([blob[at] ^ bits]) + blob[at + 1 :]


def damage_file(path, damage) -> None:
  """Damages the file at `path` in place, keeping its modification time (as a bad disk does)."""
  with open(path, "rb") as f:
    blob = f.read()
  stat = os.stat(path)
  with open(path, "wb") as f:
    f.write(damaged(blob, damage))
  os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
  """A new empty folder at each call (hypothesis runs a test many times in one tmp_path)."""
  return lambda: str(tmp_path_factory.mktemp("case"))


# ---- What a read ended in ------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
  error: str | None = None  # a UserError's message
  count: int = 0  # documents (examples) read
  skipped: int = 0  # those left out, as the reader counted them
  said: str = ""  # its stderr


def outcome(read) -> Outcome:
  """What `read()` ended in: it returns (documents read, those it said it left out), and runs
  with sys.stderr a StringIO it may read its warnings from. An exception other than a UserError
  is not caught: the test fails with its traceback."""
  said = io.StringIO()
  try:
    with contextlib.redirect_stderr(said):
      count, skipped = read()
  except errors.UserError as e:
    return Outcome(error=str(e), said=said.getvalue())
  return Outcome(count=count, skipped=skipped, said=said.getvalue())


def check(got: Outcome, path: str, expected: int, *, skips: bool, warned: str = "") -> None:
  """`got` is an error naming `path` (or `warned`: a bad document of a dataset whose rows are
  named by the dataset's name) in one line, a counted skip (where the reader documents one:
  `skips`) said in a warning naming `path` (or `warned`), or all `expected` documents."""
  name = os.path.basename(path)
  if got.error is not None:
    assert name in got.error or (warned and f"{warned} (" in got.error), (name, got.error)
    assert "\n" not in got.error.strip(), got.error
    return
  if got.skipped:
    assert skips, f"{path}: {got.skipped} left out, and this read documents no skip"
    assert (warned or name) in got.said, got.said
    return
  assert got.count == expected, f"{path}: {got.count} of {expected} read, no error, no count"


# ---- Text files: .txt, jsonl (plain, gzip, zstd), parquet ----------------------------------------

TEXT_FORMATS = (".txt", ".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet")


@pytest.fixture(scope="module")
def text_files(tmp_path_factory):
  """{extension: the bytes of one file of that format}: DOCS, or for .txt its first (a .txt
  file is one document)."""
  root = tmp_path_factory.mktemp("text")
  blobs = {}
  for ext in TEXT_FORMATS:
    [path] = corpora.write(
        f"{root}/{ext.strip('.')}/*{ext}", DOCS[:1] if ext == ".txt" else DOCS, files=1
    )
    with open(path, "rb") as f:
      blobs[ext] = f.read()
  return blobs


def _count_said(said: str) -> int:
  """The count in files.py's "N bad documents skipped" warning, 0 without one."""
  found = re.search(r"([\d,]+) bad documents? skipped", said)
  return int(found.group(1).replace(",", "")) if found else 0


def _read_documents(name, options):
  records._warned.clear()  # pylint: disable=protected-access  (each bad document named again)
  docs = list(files.documents(name, "all", options))
  return len(docs), _count_said(sys.stderr.getvalue())


def _scan(name, options):
  records._warned.clear()  # pylint: disable=protected-access
  inventory = files.scan(name, options, report=lambda _: None)
  return inventory.total, inventory.skipped


def _whole_records(original: bytes, cut: bytes) -> int:
  """The records of a plain file cut at a line's end: what it still holds whole (nothing can
  tell such a file from a shorter one)."""
  lines = set(original.splitlines())
  return sum(1 for line in cut.splitlines() if line in lines)


@pytest.mark.parametrize("bad_documents", ["error", "skip"])
@pytest.mark.parametrize("ext", TEXT_FORMATS)
@battery(drawn=16)
def test_a_damaged_text_file(text_files, scratch, ext, bad_documents, damage):
  """files.documents (a run's read) and files.scan (prepare's first pass). A compressed file
  that does not decompress whole, or a parquet file that does not read whole, is an error
  whatever bad_documents says: only a line or a row is a bad document."""
  original = text_files[ext]
  path = os.path.join(scratch(), "part-00000" + ext)
  with open(path, "wb") as f:
    f.write(damaged(original, damage))
  expected = 1 if ext == ".txt" else len(DOCS)
  if ext == ".jsonl" and damage[0] == "cut":
    expected = _whole_records(original, damaged(original, damage))
  name = f"files:{path}"
  options = data.ReadOptions(text_key="text", bad_documents=bad_documents)
  for read in (_read_documents, _scan):
    got = outcome(lambda: read(name, options))  # pylint: disable=cell-var-from-loop
    check(got, path, expected, skips=bad_documents == "skip")
    assert f"skipping {path}:" not in got.said, got.said  # a whole file is no bad document
    assert "does not decode" not in got.said, got.said  # nor is a parquet row group


def test_a_damaged_compressed_file_stops_prepare_in_one_line(tmp_path):
  """The command: exit 2 and one `error:` line naming the file, with bad_documents=skip too, and
  no store written."""
  [path] = corpora.write(f"{tmp_path}/docs/*.jsonl.gz", corpora.documents(100), files=1)
  damage_file(path, ("cut", 0.9, 0))  # what is left before the damage is enough to train on
  out = tmp_path / "store"
  result = helpers.run(
      [
          sys.executable,
          "-m",
          "vit_jax.prepare",
          f"--config={helpers.ROOT}/configs/gpt.py:dataset=files:{path}",
          "--config.bad_documents=skip",
          f"--output={out}",
      ]
  )
  assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
  conftest.assert_one_line_error(result.stderr, path)
  assert not out.exists()


# ---- hf: folders: the hub's layout (parquet) and save_to_disk (arrow) ----------------------------

HUB_DATA_FILES = {
    "folder": "data/train-00000-of-00001.parquet",
    "saved": "train/data-00000-of-00001.arrow",
}


@pytest.fixture(scope="module")
def hub_folders(tmp_path_factory):
  """{layout: a folder of DOCS as its train split}."""
  root = tmp_path_factory.mktemp("hub")
  return {
      "folder": hub_data.write_text(root / "folder", {"train": DOCS}),
      "saved": hub_data.save_text(root / "saved", {"train": DOCS}),
  }


def _read_hub(folder):
  options = data.ReadOptions(text_key="text", bad_documents="error")
  docs = datasets.memory_examples(f"hf:{folder}", "train", read_options=options)
  found = re.search(r"([\d,]+) rows? with a null", sys.stderr.getvalue())
  return len(docs), int(found.group(1).replace(",", "")) if found else 0


@pytest.mark.parametrize("layout", sorted(HUB_DATA_FILES))
@battery(drawn=12)
def test_a_damaged_hub_folder(hub_folders, scratch, layout, damage):
  """A data file that does not read is an error naming it; a row whose text reads as null (a
  damaged validity bitmap) is left out and counted; one whose text came to hold a control
  character is a bad document, an error naming the dataset's row."""
  folder = os.path.join(scratch(), layout)
  shutil.copytree(hub_folders[layout], folder)
  path = os.path.join(folder, HUB_DATA_FILES[layout])
  damage_file(path, damage)
  check(outcome(lambda: _read_hub(folder)), path, len(DOCS), skips=True, warned=f"hf:{folder}")


@pytest.mark.parametrize("byte", [2, 3])  # an offset far past the data's end; a negative one
def test_a_save_to_disk_file_whose_offsets_leave_its_data(hub_folders, tmp_path, byte):
  """An Arrow file is memory-mapped and not checked by the library: such an offset read as it
  is reads outside the file (a segfault, or a SystemError)."""
  import pyarrow as pa  # pylint: disable=g-import-not-at-top  (the data extra)

  folder = os.path.join(tmp_path, "saved")
  shutil.copytree(hub_folders["saved"], folder)
  path = os.path.join(folder, HUB_DATA_FILES["saved"])
  with pa.memory_map(path) as source:
    whole = source.read_buffer()
    texts = pa.ipc.open_stream(whole).read_all().column("text").chunk(0)
    at = texts.buffers()[1].address - whole.address + 4 * 3 + byte  # the 4th offset's byte
  damage_file(path, ("flip", at / os.path.getsize(path), 0x40))
  got = outcome(lambda: _read_hub(folder))
  assert got.error and os.path.basename(path) in got.error, got


def test_a_null_text_of_a_hub_folder_is_left_out_and_counted(tmp_path):
  """As a damaged validity bitmap reads: the row is no document, and the warning counts it."""
  folder = hub_data.save_text(tmp_path / "saved", {"train": DOCS[:3] + [None] + DOCS[4:]})
  got = outcome(lambda: _read_hub(folder))
  assert (got.count, got.skipped) == (len(DOCS) - 1, 1), got
  assert f"hf:{folder}: 1 row with a null 'text' left out (split train)" in got.said


@pytest.mark.parametrize(
    "target", ["dataset_dict.json", "train/state.json", "train/dataset_info.json"]
)
@battery(drawn=4, named=NAMED[1:2] + (("flip", 0.0, 0x01), ("flip", 0.1, 0x01), ("flip", 0.5, 1)))
def test_a_damaged_save_to_disk_record(hub_folders, scratch, target, damage):
  """The JSON files save_to_disk writes beside the data: a changed letter of a key is still
  JSON, which the library reads as a field missing."""
  folder = os.path.join(scratch(), "saved")
  shutil.copytree(hub_folders["saved"], folder)
  path = os.path.join(folder, target)
  damage_file(path, damage)
  check(outcome(lambda: _read_hub(folder)), path, len(DOCS), skips=False)


# ---- webdataset shards (wds:) and the index made of them -----------------------------------------

SAMPLES = 6


@pytest.fixture(scope="module")
def wds_shard(tmp_path_factory):
  """The bytes of a shard of SAMPLES samples (PNGs and their classes)."""
  root = tmp_path_factory.mktemp("wds")
  wds_shards.write_shades(root, {"train": [SAMPLES]})
  with open(root / "shades-train-000.tar", "rb") as f:
    return f.read()


def _read_wds(root, bad_images):
  options = data.ReadOptions(label_key="label", bad_images=bad_images)
  source = sources.open_source(f"wds:{root}", read_options=options)
  read = sum(1 for _ in source.read("train", 0, 1))
  return read, len(re.findall(r"warning: skipping .* not a decodable image", sys.stderr.getvalue()))


@pytest.mark.parametrize("bad_images", ["skip", "error"])
@battery(drawn=12)
def test_a_damaged_webdataset_shard(wds_shard, scratch, bad_images, damage):
  """Indexed and read: an error naming the shard, or its images that do not decode left out
  with a warning naming each (refused with bad_images=error)."""
  root = scratch()
  path = os.path.join(root, "shades-train-000.tar")
  with open(path, "wb") as f:
    f.write(damaged(wds_shard, damage))
  got = outcome(lambda: _read_wds(root, bad_images))
  check(got, path, SAMPLES, skips=bad_images == "skip")
  assert got.count + got.skipped in (SAMPLES, 0), got  # each one left out is named


def _wds_index(root):
  shards = webdataset.Shards.open(root, "label")
  return [shards.offsets.tolist(), shards.sizes.tolist(), shards.labels.tolist()]


def _folder_index(root):
  return image_folder.ImageFolder.open(root).examples


@pytest.mark.parametrize("reader", ["wds", "folder"])
@battery(drawn=12, named=NAMED + (("flip", 0.1, 0x01), ("flip", 0.5, 0x01), ("flip", 0.8, 0x04)))
def test_a_damaged_index_is_made_again(wds_shard, scratch, reader, damage):
  """The index a reader keeps beside the data (a wds: shard's samples, a folder: dataset's
  files), damaged while the data is not: the next start reads what the data holds."""
  root = scratch()
  if reader == "wds":
    with open(os.path.join(root, "shades-train-000.tar"), "wb") as f:
      f.write(wds_shard)
    index, name = _wds_index, webdataset.INDEX_NAME
  else:
    for split, label in (("train", "a"), ("train", "b"), ("test", "a")):
      os.makedirs(os.path.join(root, split, label))
      with open(os.path.join(root, split, label, "0.png"), "wb") as f:
        f.write(wds_shards.shade(7))
    index, name = _folder_index, image_folder.INDEX_NAME
  intact = index(root)  # made now
  damage_file(os.path.join(root, name), damage)
  assert index(root) == intact


# ---- folder: images ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def image_folder_root(tmp_path_factory):
  """train/ and test/, classes a and b, a JPEG and a PNG each."""
  root = tmp_path_factory.mktemp("images")
  rng = np.random.default_rng(0)
  for split in ("train", "test"):
    for label in ("a", "b"):
      os.makedirs(root / split / label)
      for name, encode in (("0.jpg", tf.io.encode_jpeg), ("1.png", tf.io.encode_png)):
        image = rng.integers(0, 256, (12, 12, 3)).astype(np.uint8)
        (root / split / label / name).write_bytes(encode(image).numpy())
  return str(root)


def _read_images(root, bad_images):
  evals = pipeline.eval_iterator(
      "folder:" + root,
      "test",
      global_batch_size=4,
      image_size=8,
      process_index=0,
      process_count=1,
      read_options=data.ReadOptions(bad_images=bad_images),
  )
  scored = int(sum(batch["mask"].sum() for batch in evals))
  return scored, len(
      re.findall(r"warning: skipping .* not a decodable image", sys.stderr.getvalue())
  )


@pytest.mark.parametrize("bad_images", ["skip", "error"])
@pytest.mark.parametrize(
    "image, damage",
    [
        ("test/a/0.jpg", ("cut", 0.5, 0)),
        ("test/a/0.jpg", ("flip", 0.0, 0xFF)),
        ("test/a/0.jpg", ("flip", 0.6, 0x80)),
        ("test/b/1.png", ("cut", 1.0, 0)),
        ("test/b/1.png", ("flip", 0.5, 0x01)),
    ],
)
def test_a_damaged_image_in_a_folder(image_folder_root, tmp_path, image, damage, bad_images):
  """Evaluated: left out with a warning naming it (refused with bad_images=error), or read."""
  root = str(tmp_path / "images")
  shutil.copytree(image_folder_root, root)
  path = os.path.join(root, image)
  damage_file(path, damage)
  got = outcome(lambda: _read_images(root, bad_images))
  check(got, path, 4, skips=bad_images == "skip")
  assert got.count + got.skipped in (4, 0), got


# ---- A token store's files -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory):
  """A token store of DOCS' train split (19 documents) in two shards."""
  root = tmp_path_factory.mktemp("store")
  corpora.write(f"{root}/docs/*.jsonl", DOCS, files=1)
  config = configs_lib.load("gpt", f"dataset=files:{root}/docs/*.jsonl")
  out = str(root / "store")
  store_writer.prepare(
      config, out, split_names=["train"], examples_per_shard=10, report=lambda _: None
  )
  return out


def _read_store(path):
  split = token_store.open_store(path, ["train"]).split("train")
  examples = split.examples("text", np.arange(split.num_examples))
  return len(examples), 0


STORE_FILES = [
    token_store.MANIFEST_FILE,
    f"train/{token_store.tokens_file('00000', 'text')}",
    f"train/{token_store.offsets_file('00000', 'text')}",
    f"train/{token_store.offsets_file('00001', 'text')}",
]


@pytest.mark.parametrize("target", STORE_FILES)
@battery(drawn=12)
def test_a_damaged_token_store(store, scratch, target, damage):
  """Opened and read whole: an error naming the file, or every example (a changed token is a
  valid store of another text)."""
  root = os.path.join(scratch(), "store")
  shutil.copytree(store, root)
  path = os.path.join(root, target)
  damage_file(path, damage)
  check(outcome(lambda: _read_store(root)), path, 19, skips=False)


# ---- Checkpoints ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
  """A workdir with checkpoints 2 and 4 of a small state, and the state each holds."""
  workdir = str(tmp_path_factory.mktemp("checkpoints"))
  rng = np.random.default_rng(0)
  params = {"w": rng.standard_normal((16, 16), np.float32), "b": np.zeros(16, np.float32)}
  record = checkpoint.model_record({"width": 16}, params)
  states = {2: {"params": params}, 4: {"params": jax.tree.map(lambda x: x + 1, params)}}
  saver = checkpoint.Checkpointer(workdir, 2, 3, record)
  for step, state in states.items():
    saver.save(step, state)
  saver.close()
  return workdir, record, states


def _resume(workdir, record, states):
  """(step, state) of the newest step that reads, as a resumed run finds it."""
  reader = checkpoint.Checkpointer(workdir, 2, 3, record)
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), states[4])
  try:
    return reader.restore_latest_intact(abstract)
  finally:
    reader.close()


CHECKPOINT_FILES = {  # what a step holds, each checked by its damage
    "arrays": None,  # the step's biggest array file
    "array index": "state/manifest.ocdbt",
    "tree": "state/_METADATA",
    "model record": "model/metadata",
    "step record": "_CHECKPOINT_METADATA",
}


@pytest.mark.parametrize("part", sorted(CHECKPOINT_FILES))
@battery(drawn=3, named=NAMED[1:2] + NAMED[3:6] + (("flip", 0.6, 0x01),))
def test_a_damaged_checkpoint_falls_back_to_the_step_before(two_steps, scratch, part, damage):
  """The damaged newest step (4) is set aside for step 2 with one warning line naming it, or
  reads as it was saved: never another state, never an error while step 2 is intact."""
  original, record, states = two_steps
  workdir = os.path.join(scratch(), "w")
  shutil.copytree(original, workdir)
  step_dir = os.path.join(workdir, "checkpoints", "4")
  target = CHECKPOINT_FILES[part]
  if target is None:
    arrays = os.path.join(step_dir, "state", "d")  # what a restore reads
    path = max((os.path.join(arrays, f) for f in os.listdir(arrays)), key=os.path.getsize)
  else:
    path = os.path.join(step_dir, target)
  damage_file(path, damage)
  said = io.StringIO()
  with contextlib.redirect_stderr(said):
    step, state = _resume(workdir, record, states)
  damaged_dir = os.path.join(workdir, "checkpoints", "damaged", "4")
  if step == 4:
    assert not said.getvalue() and not os.path.exists(damaged_dir), said.getvalue()
  else:
    assert step == 2, step
    lines = said.getvalue().splitlines()
    assert len(lines) == 1 and f"checkpoint {step_dir} is unreadable" in lines[0], lines
    assert os.path.isdir(damaged_dir)  # set aside, not deleted
  for key, value in states[step]["params"].items():
    np.testing.assert_array_equal(state["params"][key], value, err_msg=key)
