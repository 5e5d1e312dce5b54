"""Every tokenizer kind: round trip, save/load, fingerprints, errors."""

import json
import types

import numpy as np
import pytest

from vit_jax import errors
from vit_jax.data import tokenizers
from vit_jax.data.text import corpus

SAMPLE = "  Indented code:\n\tx = f(a, b)  # ok\n\nUnicode: naïve café ☃ 😀\n"


def _build(kind, docs):
  vocab_size = {"char": None, "spm_unigram": 600, "spm_bpe": 600, "byte_bpe": 600}[kind]
  return tokenizers.build_tokenizer(kind, docs[:40], vocab_size)


@pytest.fixture(scope="module", params=tokenizers.TRAINABLE_KINDS)
def built(request, train_docs):
  return request.param, _build(request.param, train_docs)


@pytest.fixture
def trained(built):
  return built[1]


def test_round_trip(trained, train_docs):
  texts = list(train_docs[:3])
  if trained.kind != "char":  # Only the char vocabulary lacks unseen chars.
    texts += list(corpus.split_documents("validation")[:3]) + [SAMPLE]
  for text in texts:
    ids = trained.encode(text)
    assert all(0 <= i < trained.vocab_size for i in ids)
    assert trained.decode(ids) == text
  assert trained.encode_batch(texts) == [trained.encode(t) for t in texts]


def test_special_tokens_are_distinct_and_present(trained):
  ids = trained.special_ids
  assert set(ids) == {"pad", "unk", "cls", "sep", "mask", "bos", "eos"}
  assert None not in ids.values()
  assert len(set(ids.values())) == 7
  assert set(ids.values()) <= trained.special_id_set()
  assert not set(trained.normal_ids()) & trained.special_id_set()
  # Text never encodes to CLS/SEP/MASK, so they can't be masked by accident.
  text = "a [MASK] b [CLS]<pad></s>"  # Characters every vocabulary has.
  assert not set(trained.encode(text)) & trained.special_id_set()


def test_save_and_load_is_identical(trained, tmp_path):
  trained.save(str(tmp_path))
  meta = json.loads((tmp_path / "tokenizer_meta.json").read_text())
  assert meta["kind"] == trained.kind
  assert meta["fingerprint"] == trained.fingerprint
  loaded = tokenizers.load_tokenizer(str(tmp_path))
  assert type(loaded) is type(trained)
  assert loaded.fingerprint == trained.fingerprint
  assert loaded.special_ids == trained.special_ids
  assert loaded.vocab_size == trained.vocab_size
  assert loaded.encode(SAMPLE) == trained.encode(SAMPLE)


def test_training_is_deterministic(built, train_docs):
  kind, trained = built
  assert _build(kind, train_docs).fingerprint == trained.fingerprint


def test_fingerprint_mismatch_raises(tmp_path, char_tokenizer, spm_tokenizer):
  workdir = str(tmp_path / "tokenizer")
  kept = tokenizers.load_or_build(workdir, lambda: char_tokenizer)
  assert kept.fingerprint == char_tokenizer.fingerprint
  # A later command gets the saved tokenizer, not a freshly built one.
  again = tokenizers.load_or_build(workdir, lambda: spm_tokenizer)
  assert again.fingerprint == char_tokenizer.fingerprint
  with pytest.raises(
      tokenizers.TokenizerMismatchError, match="fingerprint.*different|tokenizer saved"
  ):
    tokenizers.load_or_build(
        workdir, lambda: spm_tokenizer, expected_fingerprint=spm_tokenizer.fingerprint
    )
  with pytest.raises(tokenizers.TokenizerMismatchError, match="mismatch"):
    tokenizers.check_fingerprint(spm_tokenizer, char_tokenizer.fingerprint)


def test_altered_files_are_detected(tmp_path, char_tokenizer):
  char_tokenizer.save(str(tmp_path))
  vocab_path = tmp_path / "char_vocab.json"
  pieces = json.loads(vocab_path.read_text())
  pieces[-1], pieces[-2] = pieces[-2], pieces[-1]
  vocab_path.write_text(json.dumps(pieces))
  with pytest.raises(tokenizers.TokenizerMismatchError):
    tokenizers.load_tokenizer(str(tmp_path))


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_damaged_saved_tokenizer_is_one_error_naming_its_folder(built, tmp_path, damage):
  """Every file of every kind, cut in half or with a byte changed: a DataError naming the folder,
  the fingerprint's mismatch (a change that still loads), or, where the change is in what no
  loader reads, the very tokenizer saved; never another exception or another tokenizer."""
  kind, trained = built
  trained.save(str(tmp_path / "saved"))
  for name in sorted(p.name for p in (tmp_path / "saved").iterdir()):
    folder = tmp_path / f"{damage}_{name}"
    trained.save(str(folder))
    data = (folder / name).read_bytes()
    if damage == "cut":
      data = data[: len(data) // 2]
    else:
      data = (
          data[: len(data) // 3] + bytes([data[len(data) // 3] ^ 0x5A]) + data[len(data) // 3 + 1 :]
      )
    (folder / name).write_bytes(data)
    try:
      loaded = tokenizers.load_tokenizer(str(folder))
    except (errors.DataError, tokenizers.TokenizerMismatchError) as e:
      assert str(folder) in str(e) and "\n" not in str(e), (kind, name)
    else:
      assert loaded.fingerprint == trained.fingerprint, (kind, name)
      assert loaded.special_ids == trained.special_ids, (kind, name)


def test_load_pretrained_files(tmp_path, spm_tokenizer, train_docs):
  spm_tokenizer.save(str(tmp_path / "spm"))
  loaded = tokenizers.load_pretrained(str(tmp_path / "spm" / "spm.model"))
  assert loaded.special_ids == spm_tokenizer.special_ids
  assert loaded.encode(SAMPLE) == spm_tokenizer.encode(SAMPLE)

  bpe = _build("byte_bpe", train_docs)
  bpe.save(str(tmp_path / "bpe"))
  loaded = tokenizers.load_pretrained(str(tmp_path / "bpe" / "tokenizer.json"))
  assert loaded.fingerprint == bpe.fingerprint
  with pytest.raises(ValueError, match="tokenizer.json"):
    tokenizers.load_pretrained(str(tmp_path / "vocab.txt"))


def _path_settings(kind, path, vocab_size=None):
  """A config's `tokenizer` block naming `path`."""
  return types.SimpleNamespace(kind=kind, vocab_size=vocab_size, path=str(path))


def test_tokenizer_path_takes_a_saved_folder_or_any_file_in_it_of_the_kind_named(built, tmp_path):
  """A token store's or workdir's tokenizer/ (as the other stores of a mixture are prepared):
  the folder, or any of its files, loads the saved tokenizer itself (its fingerprint), as the
  kind the config names."""
  kind, trained = built
  trained.save(str(tmp_path / "tokenizer"))
  for path in [tmp_path / "tokenizer", *sorted((tmp_path / "tokenizer").iterdir())]:
    loaded = tokenizers.from_path(_path_settings(kind, path))
    assert loaded.fingerprint == trained.fingerprint, path
  loaded = tokenizers.from_path(_path_settings(kind, tmp_path / "tokenizer", trained.vocab_size))
  assert loaded.fingerprint == trained.fingerprint
  other = "byte_bpe" if kind == "char" else "char"
  fix = {"char": "char", "byte_bpe": "byte_bpe"}.get(kind, "spm_unigram or spm_bpe")
  with pytest.raises(errors.ConfigError) as refused:
    tokenizers.from_path(_path_settings(other, tmp_path / "tokenizer"))
  assert f"holds a '{trained.kind}' tokenizer, not a '{other}' one" in str(refused.value)
  assert str(refused.value).endswith(f"set --config.tokenizer.kind={fix}.")
  with pytest.raises(errors.ConfigError, match=f"holds a vocabulary of {trained.vocab_size}, not"):
    tokenizers.from_path(_path_settings(kind, tmp_path / "tokenizer", trained.vocab_size + 1))


def test_a_tokenizer_path_of_anything_else_is_one_line_naming_it(tmp_path):
  (tmp_path / "notes.txt").write_text("text")
  (tmp_path / "vocab.json").write_text(json.dumps(["<pad>", "a"]))  # a char vocabulary, alone
  (tmp_path / "empty").mkdir()
  cases = {
      tmp_path / "missing": "does not exist",
      tmp_path / "notes.txt": "is not a tokenizer",
      tmp_path / "empty": "is not a tokenizer",
      tmp_path / "vocab.json": "is not a Hugging Face tokenizer.json",
  }
  for path, what in cases.items():
    with pytest.raises(errors.ConfigError) as refused:
      tokenizers.from_path(_path_settings("char", path))
    message = str(refused.value)
    assert message.startswith(f"--config.tokenizer.path={path} {what}"), message
    assert "a token store's or workdir's tokenizer folder" in message and "\n" not in message


@pytest.mark.parametrize("kind", tokenizers.TRAINABLE_KINDS)
def test_empty_corpus_is_a_clear_error(kind):
  with pytest.raises(ValueError, match="corpus is empty"):
    tokenizers.build_tokenizer(kind, ["", "  \n"], 100)


def test_unknown_kind_lists_known_kinds():
  with pytest.raises(ValueError, match="spm_unigram"):
    tokenizers.build_tokenizer("wordpiece", ["text"], 100)


def test_char_vocab_size_keeps_most_frequent():
  tok = tokenizers.build_tokenizer("char", ["aaab", "ac"], vocab_size=8)
  assert tok.vocab_size == 8  # 7 specials + 'a'.
  assert tok.encode("ab") == [7, tok.unk_id]


def test_word_starts(spm_tokenizer, char_tokenizer):
  for tok in (spm_tokenizer, char_tokenizer):
    ids = np.array(tok.encode("hello world again"))
    starts = tok.word_starts(ids)
    words, current = [], ""
    for i, start in zip(ids, starts):
      if start and current:
        words.append(current)
        current = ""
      current += tok.decode([i])
    words.append(current)
    assert [w.strip() for w in words if w.strip()] == ["hello", "world", "again"]


def test_load_bert_style_wordpiece_json(tmp_path, train_docs):
  """A tokenizer.json of another family: specials found by their names."""
  import tokenizers as hf  # pylint: disable=import-outside-toplevel

  wordpiece = hf.Tokenizer(hf.models.WordPiece(unk_token="[UNK]"))
  wordpiece.pre_tokenizer = hf.pre_tokenizers.BertPreTokenizer()
  wordpiece.decoder = hf.decoders.WordPiece()
  wordpiece.train_from_iterator(
      train_docs[:20],
      hf.trainers.WordPieceTrainer(
          vocab_size=500,
          show_progress=False,
          special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
      ),
  )
  wordpiece.save(str(tmp_path / "tokenizer.json"))
  tok = tokenizers.load_pretrained(str(tmp_path / "tokenizer.json"))
  assert tok.special_ids == {
      "pad": 0,
      "unk": 1,
      "cls": 2,
      "sep": 3,
      "mask": 4,
      "bos": None,
      "eos": None,
  }
  ids = np.array(tok.encode("interpreter interpreter"))
  pieces = [tok.id_to_piece(i) for i in ids]
  assert pieces[1].startswith("##")  # A rare word, split into pieces.
  starts = tok.word_starts(ids)
  assert starts.sum() == 2 and starts[0]


def test_a_run_and_prepare_check_the_tokenizer_path_before_anything_is_written(
    tmp_path, char_tokenizer
):
  # pylint: disable=g-import-not-at-top
  from tests import tiny_configs
  from vit_jax.config import checks

  char_tokenizer.save(str(tmp_path / "tokenizer"))
  config = tiny_configs.load("gpt", "dataset=embedded,variant=pico")
  config.tokenizer.update(kind="byte_bpe", path=str(tmp_path / "tokenizer"))
  for check in (
      lambda: checks.validate_training(config, str(tmp_path / "w")),
      lambda: checks.validate_preparation(config, str(tmp_path / "out")),
  ):
    with pytest.raises(errors.ConfigError, match="holds a 'char' tokenizer, not a 'byte_bpe'"):
      check()
  assert not (tmp_path / "w").exists() and not (tmp_path / "out").exists()
