"""Language presets run train + eval (TFDS mock data), and bad input gets clear errors."""

import os

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import helpers
from vit_jax.data.text import datasets
from vit_jax.data.text import store_writer
from vit_jax.training import train

CONFIGS = os.path.join(helpers.ROOT, "configs")


def load_config(name, arg):
  config = helpers.repo_file(f"configs/{name}.py").get_config(arg)
  config.progress = "lines"
  config.prefetch_batches = 0  # mock_data patches the file system while it reads
  return config


def small(config):
  """Tiny vocabularies: mock data is random text, too little to train 2,000 pieces."""
  if config.tokenizer.kind != "char":
    config.tokenizer.vocab_size = 400
  return config


@pytest.mark.parametrize(
    "config_name,arg,eval_key",
    [
        ("gpt", "dataset=c4,variant=pico", "eval/bits_per_char"),
        ("gpt", "dataset=lm1b,variant=pico", "eval/perplexity"),
        ("bert_classifier", "dataset=imdb_reviews", "eval/accuracy"),
        pytest.param(  # imdb_reviews's path and metric with another dataset
            "bert_classifier", "dataset=ag_news_subset", "eval/accuracy", marks=pytest.mark.slow
        ),
        ("seq2seq", "dataset=wmt14_translate/de-en", "eval/exact_match"),
        ("bert", "dataset=c4,nsp", "eval/nsp_accuracy"),
    ],
)
def test_preset_runs_under_mock_data(tmp_path, config_name, arg, eval_key):
  config = small(load_config(config_name, arg + ",runlocal"))
  with tfds.testing.mock_data(num_examples=40):
    if datasets.is_streamed(config.dataset):  # tokenized once into a store, then read by index
      store_writer.prepare(config, str(tmp_path / "store"), workers=1, report=lambda _: None)
      config.token_store = str(tmp_path / "store")
    result = train.train_and_evaluate(config, str(tmp_path / "w"))
  rows = [r for r in helpers.read_metrics(tmp_path / "w") if "train_loss" in r]
  assert [r["step"] for r in rows] == [1, 2, 3, 4]
  assert all(np.isfinite(r["train_loss"]) for r in rows)
  assert all(set(helpers.BREAKDOWN_KEYS) <= set(r) for r in rows)  # the step-time breakdown
  assert np.isfinite(result[eval_key])
  assert (tmp_path / "w" / "tokenizer" / "tokenizer_meta.json").is_file()


def gpt_command(workdir, *overrides):
  return [
      helpers.sys.executable,
      "-m",
      "vit_jax.main",
      f"--config={os.path.join(CONFIGS, 'gpt.py')}:runlocal,variant=pico",
      f"--workdir={workdir}",
      "--config.progress=lines",
      *overrides,
  ]


@pytest.mark.slow
def test_tokenizer_mismatch_and_generate(tmp_path):
  workdir = tmp_path / "w"
  first = helpers.run(gpt_command(workdir))
  assert first.returncode == 0, first.stderr[-3000:]
  before = helpers.snapshot(workdir)
  other = helpers.run(
      gpt_command(
          workdir, "--config.tokenizer.kind=spm_unigram", "--config.tokenizer.vocab_size=500"
      )
  )
  assert other.returncode == 2
  # Refused before anything is built, naming the tokenizer keys that differ from the saved run.
  assert "tokenizer.kind" in other.stderr and "use a new --workdir" in other.stderr
  assert helpers.snapshot(workdir) == before

  generated = helpers.run(
      [
          helpers.sys.executable,
          "-m",
          "vit_jax.generate",
          f"--workdir={workdir}",
          "--prompt=The ",
          "--prompt=import",
          "--max_new_tokens=10",
          "--temperature=0",
      ]
  )
  assert generated.returncode == 0, generated.stderr[-3000:]
  assert generated.stdout.count("-" * 40) == 2 and "The " in generated.stdout


def test_unknown_dataset_and_empty_corpus(tmp_path):
  unknown = helpers.run(gpt_command(tmp_path / "a", "--config.dataset=shakespear"))
  assert unknown.returncode == 2 and "Unknown text dataset 'shakespear'" in unknown.stderr
  empty = tmp_path / "empty.txt"
  empty.write_text("")
  result = helpers.run(gpt_command(tmp_path / "b", f"--config.dataset=files:{empty}"))
  assert result.returncode == 2
  assert "empty" in result.stderr.lower()


def test_bert_classifier_fine_tunes_from_an_mlm_workdir(tmp_path, capsys):
  mlm_dir, cls_dir = tmp_path / "mlm", tmp_path / "cls"
  mlm = load_config("bert", "runlocal")
  train.train_and_evaluate(mlm, str(mlm_dir))
  classifier = load_config("bert_classifier", "dataset=imdb_reviews,runlocal")
  classifier.init_from = str(mlm_dir)
  classifier.tokenizer.kind = "char"
  with tfds.testing.mock_data(num_examples=40):
    result = train.train_and_evaluate(classifier, str(cls_dir))
  out = capsys.readouterr().out
  assert "classifier/kernel: not in the checkpoint, initialized fresh" in out
  assert "mlm/transform/kernel: dropped" in out
  assert np.isfinite(result["eval/accuracy"])
  mlm_vocab = (mlm_dir / "tokenizer" / "tokenizer_meta.json").read_text()
  assert (cls_dir / "tokenizer" / "tokenizer_meta.json").read_text() == mlm_vocab
