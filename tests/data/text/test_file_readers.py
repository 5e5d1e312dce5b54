"""How a files: dataset (vit_jax/data/text/files.py) meets files that are damaged, text that is
not text, and names and columns in the forms other tools write: a file that cannot be read whole
is one error naming it and where, whatever bad_documents says; a document that is not text is a
bad document like any other; an extension in any case and a dictionary column read as any."""

import gzip
import json
import os
import re
import sys
import zlib

import pandas
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from tests import tiny_configs as configs_lib
from tests.data.text import corpora
from vit_jax import data
from vit_jax import errors
from vit_jax.data.text import datasets
from vit_jax.data.text import files
from vit_jax.data.text import records
from vit_jax.data.text import store_writer

DOCS = corpora.documents(40)
BIG = corpora.documents(2_000, seed=1)  # 450 KiB: zstd blocks (128 KiB) whole before a cut


@pytest.fixture(autouse=True)
def _own_warnings(monkeypatch):
  """The bad documents these tests skip are not counted against the process's warnings."""
  monkeypatch.setattr(records, "_warned", set())


def _read(bad_documents: str = "error") -> data.ReadOptions:
  return data.ReadOptions(text_key="text", bad_documents=bad_documents)


def _jsonl(docs) -> bytes:
  return "".join(json.dumps({"text": d}) + "\n" for d in docs).encode("utf-8")


def _zstd(raw: bytes) -> bytes:
  """As the zstd tool writes it: with the frame's content checksum."""
  return zstandard.ZstdCompressor(write_checksum=True).compress(raw)


COMPRESS = {".jsonl.gz": gzip.compress, ".jsonl.zst": _zstd}


def _flipped(compressed: bytes) -> bytes:
  damaged = bytearray(compressed)
  damaged[len(damaged) // 2] ^= 0x55
  return bytes(damaged)


def _other_size(compressed: bytes) -> bytes:
  """A zstd frame without a checksum whose header declares a content size it does not hold."""
  header = zstandard.frame_header_size(compressed)  # the content size is its last field
  damaged = bytearray(compressed)
  damaged[header - 1] ^= 0x01
  return bytes(damaged)


DAMAGES = {  # name -> (the damaged file's bytes from BIG's compressed, what the error says)
    "cut": (lambda c: c[: len(c) // 2], r"the file ends inside a (gzip member|zstd frame)"),
    "flipped": (_flipped, r"[Ee]rror"),
    "empty": (lambda c: b"", r"the file holds no (gzip member|zstd frame)"),
    "trailing bytes": (lambda c: c + b"not compressed\n", r"[Ee]rror"),
}


def _decoded_before_the_cut(ext: str, cut: bytes) -> bytes:
  if ext == ".jsonl.gz":
    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut)
  return zstandard.ZstdDecompressor().decompressobj().decompress(cut)


@pytest.mark.parametrize(
    "ext, damage", [(e, d) for e in COMPRESS for d in DAMAGES] + [(".jsonl.zst", "declared size")]
)
def test_a_damaged_compressed_file_is_one_error_whatever_bad_documents_says(ext, damage, tmp_path):
  """Named with the line after which it is damaged, by prepare before anything is written and by
  a run that reads the files directly; never read as a shorter file."""
  corpora.write(f"{tmp_path}/in/*{ext}", DOCS, files=2)  # good files first
  path = f"{tmp_path}/in/part-00002{ext}"
  if damage == "declared size":
    damaged, says = _other_size(zstandard.ZstdCompressor().compress(_jsonl(BIG))), "corruption"
  else:
    make, says = DAMAGES[damage]
    damaged = make(COMPRESS[ext](_jsonl(BIG)))
  with open(path, "wb") as f:
    f.write(damaged)
  after = r"\d+"
  if damage == "cut":  # the lines whole before the cut, and no more
    after = str(_decoded_before_the_cut(ext, damaged).count(b"\n"))
    assert 0 < int(after) < len(BIG)
  elif damage == "empty":
    after = "0"
  name = f"files:{tmp_path}/in/*{ext}"
  for bad_documents in ("error", "skip"):
    config = configs_lib.load("gpt", f"dataset={name}")
    config.bad_documents = bad_documents
    out = tmp_path / f"store_{bad_documents}"
    with pytest.raises(errors.DataError) as refused:
      store_writer.prepare(config, str(out), workers=1, report=lambda _: None)
    assert re.fullmatch(
        re.escape(f"{path}: its compressed stream is damaged after line ")
        + after
        + r" \(.*"
        + says
        + r".*\); download or compress the file again, or leave it out of the pattern\.",
        str(refused.value),
    ), str(refused.value)
    assert not out.exists()
    with pytest.raises(errors.DataError, match=re.escape(f"{path}: its compressed stream")):
      datasets.memory_examples(name, "train", read_options=_read(bad_documents))


@pytest.mark.parametrize("ext", list(COMPRESS))
def test_concatenated_members_and_frames_read_as_one_file(ext, tmp_path):
  """As `cat a.gz b.gz`, `zstd` of several frames, and gzip's zero padding after a member."""
  compress = COMPRESS[ext]
  whole = compress(_jsonl(BIG[:700])) + compress(_jsonl(BIG[700:]))
  if ext == ".jsonl.gz":
    whole += b"\0" * 10
  with open(tmp_path / f"a{ext}", "wb") as f:
    f.write(whole)
  name = f"files:{tmp_path}/*{ext}"
  assert datasets.memory_examples(name, "all", read_options=_read()) == BIG


def _row_group_damaged(path: str) -> None:
  """Row group 1 of `path` overwritten in its text column: its page header does not decode."""
  column = pq.ParquetFile(path).metadata.row_group(1).column(1)
  start = column.dictionary_page_offset or column.data_page_offset
  with open(path, "r+b") as f:
    f.seek(start)
    f.write(b"\xff" * column.total_compressed_size)


@pytest.mark.parametrize("damage", ["footer", "row group"])
def test_a_parquet_file_that_cannot_be_read_whole_is_one_error_whatever_bad_documents_says(
    damage, tmp_path
):
  corpora.write(f"{tmp_path}/in/*.parquet", DOCS, files=2)
  path = f"{tmp_path}/in/part-00002.parquet"
  corpora.write(f"{tmp_path}/damaged/*.parquet", DOCS, files=1)  # row groups of 7 rows
  os.rename(f"{tmp_path}/damaged/part-00000.parquet", path)
  if damage == "footer":
    with open(path, "wb") as f:
      f.write(b"PAR1 not really parquet PAR1")
    says = f"{path}: not a readable parquet file ("
  else:
    _row_group_damaged(path)
    says = f"{path}: its row group 1 does not decode ("
  name = f"files:{tmp_path}/in/*.parquet"
  for bad_documents in ("error", "skip"):
    with pytest.raises(errors.DataError) as refused:
      files.scan(name, _read(bad_documents), report=None)
    message = str(refused.value)
    assert message.startswith(says), message
    fix = "; download or compress the file again, or leave it out of the pattern."
    assert message.endswith(fix)
    with pytest.raises(errors.DataError, match=re.escape(says)):
      datasets.memory_examples(name, "train", read_options=_read(bad_documents))


def _parquet_of_bytes(path: str, values: list[bytes]) -> None:
  """A text column of `values` as they are, UTF-8 or not (pyarrow does not check a file's)."""
  pq.write_table(pa.table({"text": pa.array(values, pa.binary()).view(pa.string())}), path)


BAD_TEXT = {  # name -> (extension, the third document's raw form, the error's words)
    "lone surrogate": (
        ".jsonl",
        b'{"text": "half \\ud83d emoji"}',
        "line 3: its field 'text' holds lone surrogate '\\ud83d' at character 5",
    ),
    "NUL in jsonl": (
        ".jsonl.gz",
        b'{"text": "nul \\u0000 inside"}',
        "line 3: its field 'text' holds control character '\\x00' at character 4",
    ),
    "control in parquet": (
        ".parquet",
        b"escape \x1b[31m red",
        "row 3: its 'text' holds control character '\\x1b' at character 7",
    ),
    "not UTF-8 in parquet": (
        ".parquet",
        b"caf\xe9 latin-1",
        "row 3: its 'text' is not UTF-8 (byte 0xe9 at offset 3)",
    ),
}


@pytest.mark.parametrize("case", list(BAD_TEXT))
def test_text_that_is_not_text_is_a_bad_document(case, tmp_path):
  """Refused in one line naming it, or skipped and counted with the others in their places."""
  ext, raw, words = BAD_TEXT[case]
  path = str(tmp_path / f"part-00000{ext}")
  docs = DOCS[:20]
  if ext == ".parquet":
    _parquet_of_bytes(path, [d.encode() for d in docs[:2]] + [raw] + [d.encode() for d in docs[3:]])
  else:
    lines = _jsonl(docs).splitlines()
    lines[2] = raw
    corpora.write_jsonl(path, b"\n".join(lines))
  name = f"files:{tmp_path}/*{ext}"
  with pytest.raises(errors.DataError) as refused:
    files.scan(name, _read(), report=None)
  assert str(refused.value) == (
      f"{path} {words}; fix or remove it, or skip such documents with --config.bad_documents=skip."
  )
  inventory = files.scan(name, _read("skip"), report=None)
  assert inventory.counts == (20,) and inventory.skipped == 1
  assert datasets.memory_examples(name, "all", read_options=_read("skip")) == docs[:2] + docs[3:]
  assert datasets.memory_examples(name, "validation", read_options=_read("skip")) == [docs[19]]


def test_a_txt_file_with_a_control_character_looks_binary(tmp_path):
  """The same rule as a jsonl or parquet document's, refusing the file."""
  (tmp_path / "a.txt").write_bytes(b"text and \x00 a NUL")
  with pytest.raises(errors.DataError, match=re.escape("a.txt looks binary (control character")):
    datasets.memory_examples(f"files:{tmp_path}/*.txt", "all")


@pytest.mark.parametrize("ext", [".JSONL.ZST", ".Jsonl.Gz", ".JSONL", ".PARQUET", ".Parquet"])
def test_an_extension_in_any_case_is_read_by_its_format_and_codec(ext, tmp_path, monkeypatch):
  for path in corpora.write(f"{tmp_path}/*{ext.lower()}", DOCS, files=2):
    os.rename(path, path[: -len(ext)] + ext)
  name = f"files:{tmp_path}/*{ext}"
  assert files.check(name, _read()) == [f"{tmp_path}/part-{k:05d}{ext}" for k in range(2)]
  assert datasets.memory_examples(name, "all", read_options=_read()) == DOCS
  if ext.lower() == ".jsonl.zst":  # its reader's install is checked before reading
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(errors.MissingExtraError, match="zstd-compressed"):
      files.check(name, _read())


COLUMNS = {  # an Arrow form of a text column -> the column of `docs` in that form
    "dictionary": lambda docs: pa.array(docs).dictionary_encode(),
    "pandas category": lambda docs: pa.Array.from_pandas(pandas.Categorical(docs)),
    "large string": lambda docs: pa.array(docs, pa.large_string()),
}


@pytest.mark.parametrize("form", list(COLUMNS))
def test_a_text_column_of_any_string_form_is_read_as_text(form, tmp_path):
  docs = DOCS[:18] + DOCS[:18]  # a dictionary holds each once
  table = pa.table({"id": list(range(len(docs))), "text": COLUMNS[form](docs)})
  pq.write_table(table, str(tmp_path / "a.parquet"), row_group_size=7)
  read_as = pq.ParquetFile(str(tmp_path / "a.parquet")).schema_arrow.field("text").type
  assert pa.types.is_dictionary(read_as) == form.startswith(("dictionary", "pandas"))
  name = f"files:{tmp_path}/*.parquet"
  assert datasets.memory_examples(name, "all", read_options=_read()) == docs
