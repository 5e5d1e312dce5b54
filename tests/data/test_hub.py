"""hf: datasets (vit_jax/data/hub.py), offline, from folders in the hub's layout and save_to_disk
folders written here: text splits and their held-out slice, token stores prepared from them and
trained on with the documented commands, images through the same pipeline as a folder: dataset
(the same images train to the same accuracy), and each bad input in one line."""

import os
import sys

import jax
import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs as configs_lib
from tests.data import hub_data
from vit_jax import data
from vit_jax import errors
from vit_jax.config import checks
from vit_jax.data import tokenizers
from vit_jax.data.image import pipeline
from vit_jax.data.image import sources
from vit_jax.data.text import corpus
from vit_jax.data.text import datasets
from vit_jax.data.text import store_writer
from vit_jax.data.text import token_store
from vit_jax.training import train

DOCUMENTS = corpus.split_documents("train")[:240]
VALIDATION = corpus.split_documents("validation")[:20]


def _quiet(_):
  pass


@pytest.fixture(scope="module")
def text(tmp_path_factory):
  """{layout: hf: dataset}: a hub-layout folder with train (2 files) and validation splits, one
  with a train split alone (3 files, its text in `content`), one with two subsets, and a
  save_to_disk folder."""
  root = tmp_path_factory.mktemp("hub_text")
  splits = {"train": DOCUMENTS, "validation": VALIDATION}
  hub_data.write_text(root / "subsets", {"train": DOCUMENTS[:5]}, subset="en")
  return {
      "folder": hub_data.write_text(root / "folder", splits, files=2),
      "train_only": hub_data.write_text(
          root / "train_only", {"train": DOCUMENTS}, text_key="content", files=3
      ),
      "subsets": hub_data.write_text(root / "subsets", {"train": DOCUMENTS[5:9]}, subset="fr"),
      "saved": hub_data.save_text(root / "saved", splits),
  }


def options(**given):
  return data.ReadOptions(**{"text_key": "text", **given})


def read(path, split, **given):
  return datasets.memory_examples(f"hf:{path}", split, read_options=options(**given))


def test_text_splits_read_as_written(text):
  for layout in ("folder", "saved"):
    assert read(text[layout], "train") == list(DOCUMENTS), layout
    assert read(text[layout], "validation") == list(VALIDATION), layout
  assert read(text["subsets"], "train", hf_subset="fr") == list(DOCUMENTS[5:9])


def test_the_held_out_slice_is_the_same_whole_and_in_shards(text):
  """hf_holdout=5 on a train-only dataset: about one document in 5 is "validation", none is in
  both splits, and a token store's shards (one per data file) hold each split once, in order."""
  name, held = f"hf:{text['train_only']}", options(text_key="content", hf_holdout=5)
  train_docs = datasets.memory_examples(name, "train", read_options=held)
  validation = datasets.memory_examples(name, "validation", read_options=held)
  assert sorted(train_docs + validation) == sorted(DOCUMENTS)
  assert not set(train_docs) & set(validation)
  assert 0.1 < len(validation) / len(DOCUMENTS) < 0.3, len(validation)
  for split, whole in (("train", train_docs), ("validation", validation)):
    count = datasets.num_shards(name, split, 1_000, read_options=held)
    assert count == 3  # the data files
    parts = [
        list(datasets.read_examples(name, split, shard=k, shard_count=3, read_options=held))
        for k in range(count)
    ]
    assert [d for part in parts for d in part] == whole and all(parts)


def gpt_command(module, dataset, *extra):
  config = f"{helpers.ROOT}/configs/gpt.py:dataset={dataset},variant=pico"
  return [sys.executable, "-m", module, f"--config={config}", *extra]


TINY_GPT = [
    "--config.total_steps=12",
    "--config.batch_size=8",
    "--config.seq_len=32",
    "--config.eval_every=12",
    "--config.checkpoint_every=12",
    "--config.eval_max_batches=2",
    "--config.log_every=4",
    "--config.progress=lines",
    "--config.optimizer.warmup_steps=2",
]


def test_a_store_prepared_from_a_hub_folder_trains_and_evaluates_on_its_held_out_split(
    text, tmp_path
):
  """The documented commands: prepare a token store of a hub-layout folder (its text in
  `content`, validation held out), then train on the store and evaluate on that validation."""
  dataset, store = f"hf:{text['train_only']}", str(tmp_path / "store")
  settings = ["--config.text_key=content", "--config.hf_holdout=5"]
  prepared = helpers.run(
      gpt_command("vit_jax.prepare", dataset, *settings, "--workers=1", f"--output={store}")
  )
  assert prepared.returncode == 0, prepared.stderr[-3000:]
  manifest = token_store.open_store(store, ["train", "validation"]).manifest
  assert manifest["read_settings"] == {"text_key": "content", "hf_subset": None, "hf_holdout": 5}
  assert [len(manifest["splits"][s]["shards"]) for s in ("train", "validation")] == [3, 3]
  held = options(text_key="content", hf_holdout=5)
  for split in ("train", "validation"):
    tokenizer = tokenizers.load_tokenizer(token_store.tokenizer_dir(store))
    stored = token_store.open_store(store).split(split)
    documents = datasets.memory_examples(dataset, split, read_options=held)
    assert stored.num_examples == len(documents)
    first = stored.examples("text", np.arange(1))[0]
    assert tokenizer.decode(first) == documents[0]
  workdir = tmp_path / "w"
  trained = helpers.run(
      gpt_command("vit_jax.main", dataset, *settings, *TINY_GPT, f"--config.token_store={store}",
                  f"--workdir={workdir}")  # fmt: skip
  )
  assert trained.returncode == 0, trained.stderr[-3000:]
  final = [r for r in helpers.read_metrics(workdir) if "eval/loss" in r][-1]
  assert final["step"] == 12 and np.isfinite(final["eval/loss"])
  # Another held-out slice is other data: refused by the store, and by the workdir on resume.
  other = configs_lib.load("gpt", f"dataset={dataset},variant=pico")
  other.update(text_key="content", hf_holdout=4, token_store=store)
  with pytest.raises(errors.DataError, match=r"--config\.hf_holdout=5 \(not 4\)"):
    checks.validate_training(other, str(tmp_path / "w2"))
  assert not (tmp_path / "w2").exists()
  with pytest.raises(errors.WorkdirError, match="hf_holdout: saved 5, now 4"):
    checks.validate_training(other, str(workdir))


def test_a_held_out_split_with_no_documents_is_refused_by_prepare_and_by_the_run(tmp_path):
  """hf_holdout larger than the dataset holds nothing out: prepare refuses before it writes; a
  store made so anyway is refused by the run's checks before its workdir exists, not at its
  first eval, after all the training."""
  folder = hub_data.write_text(tmp_path / "small", {"train": DOCUMENTS[:10]})
  config = configs_lib.load("gpt", f"dataset=hf:{folder},variant=pico")
  config.hf_holdout = 1000
  out = tmp_path / "store"
  with pytest.raises(errors.DataError) as refused:
    checks.validate_preparation(config, str(out), None)
  assert str(refused.value).startswith(
      f"--config.dataset=hf:{folder}: its 'validation' split, which the run evaluates on, holds "
      "no documents (no non-empty 'text'); hold out more with a smaller --config.hf_holdout "
      "than 1000"
  )
  assert not out.exists()
  store_writer.prepare(config, str(out), workers=1, report=_quiet)  # unchecked: empty validation
  config.token_store = str(out)
  with pytest.raises(errors.DataError) as refused:
    checks.validate_training(config, str(tmp_path / "w"))
  assert str(refused.value).startswith(
      f"--config.eval_split='validation': the 'validation' split of the token store {out} "
      f"(hf:{folder}) holds 0 examples and no tokens"
  )
  assert "a smaller --config.hf_holdout than 1000" in str(refused.value)
  assert "\n" not in str(refused.value) and not (tmp_path / "w").exists()


def test_a_save_to_disk_folder_trains_in_memory_and_evaluates_on_its_validation(text, tmp_path):
  config = configs_lib.load("gpt", f"dataset=hf:{text['saved']},variant=pico")
  config.update(total_steps=6, batch_size=8, seq_len=32, eval_every=6, checkpoint_every=6)
  metrics = train.train_and_evaluate(config, str(tmp_path / "w"))
  assert np.isfinite(metrics["eval/loss"])
  assert [r for r in helpers.read_metrics(tmp_path / "w") if "eval/loss" in r][-1]["step"] == 6


# ---- Images ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
  """scikit-learn's digits as JPEGs, written as a folder: dataset and as a hub-layout folder with
  the rows in the folder's order, and a train-only hub folder of small JPEGs."""
  root = tmp_path_factory.mktemp("hub_images")
  splits = hub_data.digit_jpegs()
  class_names = tuple(f"digit{i}" for i in range(10))
  return {
      "folder": "folder:" + hub_data.write_folder(root / "folder", splits),
      "hub": "hf:" + hub_data.write_images(root / "hub", splits, class_names, files=2),
      "train_only": "hf:"
      + hub_data.write_images(
          root / "train_only",
          {"train": hub_data.shapes_jpegs(40)},
          ("dark", "light"),
          image_key="img",
          label_key="fine_label",
      ),
      "cache": str(root / "cache"),
  }


IMAGE_OPTIONS = data.ReadOptions(image_key="image", label_key="label")


def test_hub_images_read_as_the_folder_reads_them(digits):
  """The same encoded bytes and labels, in the same order, and the same default splits."""
  hub_source = dict(read_options=IMAGE_OPTIONS, data_dir=digits["cache"])
  info = pipeline.dataset_info(digits["hub"], **hub_source)
  assert (info.num_classes, info.train_split, info.eval_split) == (10, "train", "test")
  for split in ("train", "test"):
    from_folder = sources.open_source(digits["folder"]).read(split, 1, 3)
    from_hub = sources.open_source(digits["hub"], **hub_source).read(split, 1, 3)
    pairs = list(zip(from_folder.as_numpy_iterator(), from_hub.as_numpy_iterator(), strict=True))
    assert pairs and all(
        a["image"] == b["image"] and a["label"] == b["label"] for a, b in pairs
    ), split


def test_a_resumed_hub_image_iterator_gives_the_same_batches(digits):
  make = lambda start: pipeline.train_iterator(
      digits["hub"], "train", global_batch_size=16, image_size=16, seed=3, start_step=start,
      read_options=IMAGE_OPTIONS, data_dir=digits["cache"], process_index=0, process_count=1,
  )  # fmt: skip
  straight = make(0)
  for _ in range(100):  # past the first epoch (1,437 images)
    next(straight)
  resumed = next(make(100))
  expected = next(straight)
  for key in expected:
    np.testing.assert_array_equal(resumed[key], expected[key], err_msg=key)


def vit_on(dataset, data_dir, digits_dir, steps=100):
  """The tiny ViT on `dataset` at 16 px, evaluated on its whole eval split."""
  config = configs_lib.tiny_vit(digits_dir, steps)
  config.update(dataset=dataset, data_dir=data_dir, batch_size=32, eval_max_batches=None)
  config.augment.update(inception_crop=False, flip=False)
  config.optimizer.update(lr=3e-3, warmup_steps=5, schedule="constant", weight_decay=0.0)
  del config.evals["fewshot"]
  return config


def test_a_classifier_trained_from_hub_parquet_reaches_the_folders_accuracy(
    digits, digits_dir, tmp_path
):
  """The same JPEGs as a folder: dataset and as hub parquet (rows in the folder's order), trained
  with the same seed: the hub reader hands the pipeline the same examples in the same order, so
  the two runs are the same computation and end with the same accuracy (the bar is 2 points)."""
  results = {}
  for name in ("folder", "hub"):
    config = vit_on(digits[name], digits["cache"], digits_dir)
    results[name] = train.train_and_evaluate(config, str(tmp_path / name))
  folder, from_hub = results["folder"], results["hub"]
  assert folder["eval/accuracy"] > 0.5, folder  # it learned: 10 classes
  assert abs(from_hub["eval/accuracy"] - folder["eval/accuracy"]) <= 0.02
  assert from_hub.keys() == folder.keys()
  for a, b in zip(jax.tree.leaves(from_hub), jax.tree.leaves(folder), strict=True):
    np.testing.assert_array_equal(a, b)  # the same computation, to the last bit: the params too
  losses = [
      [r["train_loss"] for r in helpers.read_metrics(tmp_path / n) if "train_loss" in r]
      for n in ("folder", "hub")
  ]
  assert losses[0] == losses[1]


def test_images_without_a_validation_split_hold_one_out(digits, digits_dir, tmp_path):
  """Columns named by image_key and label_key; hf_holdout=4 holds every 4th row out as the
  validation split, which a run evaluates on by default."""
  held = data.ReadOptions(image_key="img", label_key="fine_label", hf_holdout=4)
  source = sources.open_source(digits["train_only"], read_options=held, data_dir=digits["cache"])
  assert (source.train_split, source.eval_split) == ("train", "validation")
  sizes = {s: int(source.read(s, 0, 1).cardinality()) for s in ("train", "validation")}
  assert sizes == {"train": 30, "validation": 10}
  config = vit_on(digits["train_only"], digits["cache"], digits_dir, steps=2)
  config.update(image_key="img", label_key="fine_label", hf_holdout=4, batch_size=8)
  metrics = train.train_and_evaluate(config, str(tmp_path / "w"))
  assert 0 <= metrics["eval/accuracy"] <= 1


# ---- Bad input ---------------------------------------------------------------------------------


def refused(config, workdir, error, *names):
  """validate_training refuses `config` with `error` naming each of `names`; nothing written."""
  with pytest.raises(error) as raised:
    checks.validate_training(config, str(workdir))
  message = str(raised.value)
  assert "\n" not in message
  for name in names:
    assert name in message, (name, message)
  assert not os.path.exists(workdir)
  return message


def test_bad_text_input_is_refused_in_one_line(text, tmp_path):
  w = tmp_path / "w"

  def gpt(dataset, **overrides):
    config = configs_lib.load("gpt", f"dataset={dataset},variant=pico")
    config.update(overrides)
    return config

  folder, train_only = f"hf:{text['folder']}", f"hf:{text['train_only']}"
  refused(gpt(folder, eval_split="test"), w, errors.DataError, "'test'", "train, validation")
  refused(gpt(train_only, text_key="content"), w, errors.DataError, "'validation'", "hf_holdout=N")
  refused(
      gpt(train_only, hf_holdout=5), w, errors.DataError, "no column 'text'", "content (string)"
  )
  refused(gpt(folder, hf_holdout=5), w, errors.ConfigError, "has a validation split of its own")
  refused(gpt("embedded", hf_subset="en"), w, errors.ConfigError, "applies to hf: datasets only")
  refused(gpt(f"hf:{text['subsets']}"), w, errors.ConfigError, "--config.hf_subset", "en, fr")
  refused(gpt(f"hf:{text['subsets']}", hf_subset="de"), w, errors.ConfigError, "'de'", "en, fr")
  refused(gpt(f"hf:{tmp_path}/none"), w, errors.MissingFileError, "no folder")
  # A hub dataset is trained on from its token store, which prepare streams from the hub.
  refused(gpt("hf:someorg/corpus"), w, errors.DataError, "python -m vit_jax.prepare")
  with pytest.raises(errors.DatasetNotPreparedError, match="hf download --repo-type dataset"):
    checks.validate_preparation(gpt("hf:someorg/corpus"), str(tmp_path / "store"))
  assert not (tmp_path / "store").exists()


def test_a_document_holding_a_control_character_is_a_bad_document(tmp_path):
  """As in a jsonl or parquet file: an error naming its row, or skipped and counted."""
  documents = ["first document", "a NUL \x00 inside", "third document"]
  folder = hub_data.write_text(tmp_path / "nul", {"train": documents, "validation": ["v"]})
  with pytest.raises(errors.DataError, match=r"train\) row 2: its 'text' holds control char"):
    read(folder, "train")
  assert read(folder, "train", bad_documents="skip") == [documents[0], documents[2]]


def test_bad_image_input_is_refused_in_one_line(digits, digits_dir, tmp_path):
  w = tmp_path / "w"

  def vit(dataset, **overrides):
    config = vit_on(dataset, digits["cache"], digits_dir)
    config.update(overrides)
    return config

  train_only = digits["train_only"]
  refused(vit(digits["hub"], eval_split="validation"), w, errors.DataError, "train, test")
  refused(vit(train_only), w, errors.DataError, "no column 'image'", "img (Image)")
  refused(vit(train_only, image_key="img"), w, errors.DataError, "no column 'label'", "fine_label")
  message = refused(
      vit("hf:someorg/images"), w, errors.DatasetNotPreparedError, "hf download", "load_dataset"
  )
  assert "someorg/images" in message


def test_a_label_column_that_is_not_a_class_label_says_how_to_make_one(tmp_path, digits_dir):
  import datasets as hf_datasets  # pylint: disable=g-import-not-at-top

  examples = hub_data.shapes_jpegs(8)
  features = hf_datasets.Features(
      {"image": hf_datasets.Image(), "label": hf_datasets.Value("int64")}
  )
  hf_datasets.Dataset.from_dict(
      {"image": [{"bytes": b, "path": None} for b, _ in examples], "label": [0, 1] * 4},
      features=features,
  ).save_to_disk(str(tmp_path / "saved"))
  config = vit_on(f"hf:{tmp_path / 'saved'}", None, digits_dir)
  refused(config, tmp_path / "w", errors.DataError, "not a ClassLabel", "class_encode_column")


def test_json_text_that_the_library_cannot_parse_is_one_error(tmp_path):
  """A JSON string that is half of a UTF-16 pair: in a first file, where the library learns the
  columns (without it they are unknown, not missing), and in a later one, read as it comes."""
  good = "".join(f'{{"text": "document {i}"}}\n' for i in range(30)).encode()
  bad = good + b'{"text": "half \\ud83d emoji"}\n'
  for name, parts in (("first", [bad]), ("later", [good, bad])):
    folder = tmp_path / name / "data"
    folder.mkdir(parents=True)
    for k, part in enumerate(parts):
      (folder / f"train-{k:05d}-of-{len(parts):05d}.jsonl").write_bytes(part)
    with pytest.raises(errors.DataError) as refused:
      read(tmp_path / name, "train")
    assert str(refused.value) == (
        f"hf:{tmp_path / name} (train): a data file cannot be read (JSON parse error: The "
        f"surrogate pair in string is invalid. in row 30); fix or remove it."
    )


def test_without_the_data_extra_an_hf_dataset_names_the_install(monkeypatch, text):
  monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
  with pytest.raises(errors.MissingExtraError, match=r'pip install -e "\.\[data\]"'):
    read(text["folder"], "train")


OFFLINE_IMAGES = """
import runpy, sys
sys.argv = ["vit_jax.main"] + sys.argv[1:]
runpy.run_module("vit_jax.main", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "hide_datasets, dataset, message",
    [
        (False, "hf:someorg/images", "hf download --repo-type dataset someorg/images"),
        (True, "hf:someorg/images", 'pip install -e ".[data]"'),
    ],
)
def test_the_command_line_says_it_in_one_line_with_exit_2(
    hide_datasets, dataset, message, tmp_path
):
  """Offline with a hub dataset not in the cache, and the base install without `datasets`."""
  hide = "import sys; sys.modules['datasets'] = None\n" if hide_datasets else ""
  workdir = tmp_path / "w"
  result = helpers.run(
      [sys.executable, "-c", hide + OFFLINE_IMAGES, f"--config={helpers.VIT_CONFIG}",
       f"--config.dataset={dataset}", f"--workdir={workdir}"]  # fmt: skip
  )
  assert result.returncode == 2, result.stderr[-3000:]
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines
  assert not workdir.exists()


def test_a_parquet_file_whose_record_of_features_is_damaged_is_named(tmp_path):
  """The library reads a parquet file's features from a JSON record in its schema: a changed
  byte there is the file's damage, named, not the library's JSONDecodeError."""
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

  folder = tmp_path / "data"
  folder.mkdir()
  table = pa.table({"text": [f"document {i}" for i in range(30)]})
  record = b'{"info": {"features": {"text": {"dtype": "string", "_type": "Value"}}}}'
  for name, damaged in (("ok", record), ("bad", record.replace(b'"_type', b'"\x01type'))):
    table = table.replace_schema_metadata({b"huggingface": damaged})
    pq.write_table(table, folder / f"train-{name}.parquet")
  with pytest.raises(errors.DataError) as refused:
    read(tmp_path, "train")
  assert f"{folder / 'train-bad.parquet'} does not read (JSONDecodeError" in str(refused.value)
