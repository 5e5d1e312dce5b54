"""Both designs trained on a real parallel corpus (200 English-Spanish pairs,
tests/data/text/en_es.py) prepared into token stores: the encoder-decoder from jsonl.zst files, the
decoder-only GPT from a hub folder with a translation column. The `decoding` evaluator's BLEU and
chrF are sacrebleu's on the lines it wrote, `vit_jax.generate --input_file` writes those lines, and
a causal LM pretrained on documents fine-tunes on pairs (--config.init_from), and `vit_jax.evaluate`
scores a checkpoint of each design as training did. Few steps: the lines need not be good
(docs/pairs.md has the scores of longer runs)."""

import numpy as np
import pytest
import sacrebleu

from tests import helpers
from tests import tiny_configs as configs
from tests.data.text import en_es
from vit_jax import data
from vit_jax import workdir as workdir_lib
from vit_jax.data import tokenizers
from vit_jax.data.text import store_writer
from vit_jax.evaluate import __main__ as evaluate_command
from vit_jax.training import train

STEPS = 30
VALIDATION = en_es.split("validation")


def decoder_only(dataset: str, steps: int = STEPS):
  """configs/gpt.py:pairs on `dataset` with a 1-layer model: rows of 64 tokens, 2 beams."""
  config = configs.load("gpt", f"dataset={dataset},pairs")
  config.model.update(width=32, depth=1, num_heads=2)
  config.seq_len, config.batch_size, config.total_steps = 64, 8, steps
  config.eval_every = config.checkpoint_every = max(steps, 1)
  config.optimizer.update(lr=3e-3, warmup_steps=5, schedule="constant")
  config.evals.bleu.update(max_examples=len(VALIDATION), beam_size=2)
  return config


def encoder_decoder(dataset: str, steps: int = STEPS):
  """configs/seq2seq.py on `dataset` with a 1-layer model, 48 tokens a side, 2 beams."""
  config = configs.tiny_seq2seq(steps, f"dataset={dataset}")
  config.input_len = config.target_len = 48
  config.optimizer.update(lr=3e-3, warmup_steps=5, schedule="constant")
  config.evals.bleu.update(max_examples=len(VALIDATION), beam_size=2)
  return config


def _prepared(config, store: str):
  store_writer.prepare(config, store, workers=1, report=lambda _: None)
  config.token_store = store
  return config


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """{design: (workdir, config)}, each trained STEPS steps on its own store of the corpus."""
  root = tmp_path_factory.mktemp("pairs")
  pattern = f"{root}/en-es/*.jsonl.zst"
  en_es.write_files(pattern)
  hub = en_es.write_hub(root / "opus-en-es")
  built = {}
  for design, config in (
      ("encoder-decoder", encoder_decoder(f"files:{pattern}")),
      ("decoder-only", decoder_only(f"hf:{hub}")),
  ):
    config.source_key, config.target_key = "en", "es"
    _prepared(config, str(root / f"{design}-store"))
    workdir = str(root / design)
    with data.opened_once():
      train.train_and_evaluate(config, workdir)
    built[design] = (workdir, config)
  return built


def written(workdir, step=STEPS) -> dict:
  import json  # pylint: disable=g-import-not-at-top

  with open(workdir_lib.decodes_path(workdir, "bleu", step), encoding="utf-8") as f:
    return json.load(f)


@pytest.mark.parametrize("design", ["encoder-decoder", "decoder-only"])
def test_the_evaluators_bleu_and_chrf_are_sacrebleus_on_the_lines_it_wrote(runs, design):
  workdir, _ = runs[design]
  record = written(workdir)
  outputs, references = record["outputs"], record["references"]
  assert record["sources"] == [s for s, _ in VALIDATION]
  assert references == [t for _, t in VALIDATION]
  assert len(outputs) == len(VALIDATION) and all(outputs)
  expected = {
      "bleu": sacrebleu.corpus_bleu(outputs, [references]).score,
      "chrf": sacrebleu.corpus_chrf(outputs, [references]).score,
  }
  (logged,) = [r for r in helpers.read_metrics(workdir) if "bleu/bleu" in r]
  assert logged["step"] == STEPS
  for metric, value in expected.items():
    assert record["metrics"][metric] == pytest.approx(value, abs=1e-9), metric
    assert logged[f"bleu/{metric}"] == pytest.approx(value, abs=1e-9), metric


@pytest.mark.parametrize("design", ["encoder-decoder", "decoder-only"])
def test_evaluate_scores_a_checkpoint_as_training_did(runs, design, tmp_path):
  """vit_jax.evaluate's own function, in this process (its command line: tests/evaluate/
  test_decoding.py): the same metrics and lines, the lines written beside its output."""
  workdir, _ = runs[design]
  with data.opened_once():
    metrics, _ = evaluate_command.evaluate(workdir, names=("bleu",), files_dir=str(tmp_path))
  record = written(workdir)
  assert metrics == {f"bleu/{k}": v for k, v in record["metrics"].items()}
  again = written(str(tmp_path), step=None)
  assert again["outputs"] == record["outputs"] and again["signatures"] == record["signatures"]


@pytest.fixture(scope="module")
def generated(runs, tmp_path_factory):
  """(the command's result, its output lines) of the decoder-only run translating the
  validation sources, as the documented command does."""
  workdir, _ = runs["decoder-only"]
  return helpers.translate_file(
      workdir,
      [source for source, _ in VALIDATION],
      tmp_path_factory.mktemp("generate"),
      "--batch_size=4",  # not the evaluator's: the lines do not depend on the batch
      "--beam_size=2",
  )


def test_generate_input_file_writes_the_evaluators_lines(runs, generated):
  result, lines = generated
  assert result.returncode == 0, result.stderr[-3000:]
  assert lines == written(runs["decoder-only"][0])["outputs"]
  assert "error" not in result.stderr


def test_a_causal_lm_pretrained_on_documents_fine_tunes_on_pairs(runs, tmp_path, capsys):
  """The pretrained run's tokenizer and every parameter are the fine-tuning's start. The causal
  LM is pretrained on the Spanish side read as documents (saved at step 0, as initialized)."""
  _, files_config = runs["encoder-decoder"]
  pretrained = decoder_only(files_config.dataset, steps=0)
  pretrained.text_key = "es"
  del pretrained.evals["bleu"]
  pretrained_dir = str(tmp_path / "pretrained")
  train.train_and_evaluate(pretrained, pretrained_dir)
  _, pairs_config = runs["decoder-only"]
  config = decoder_only(pairs_config.dataset, steps=4)
  config.source_key, config.target_key = "en", "es"
  config.init_from = pretrained_dir
  del config.evals["bleu"]
  capsys.readouterr()
  metrics = train.train_and_evaluate(config, str(tmp_path / "fine-tuned"))
  said = capsys.readouterr().out
  assert "init_from:" not in said, said[-2000:]  # every array loaded: none dropped or made anew
  fingerprint = lambda w: tokenizers.load_tokenizer(workdir_lib.tokenizer_dir(w)).fingerprint
  assert fingerprint(str(tmp_path / "fine-tuned")) == fingerprint(pretrained_dir)
  assert np.isfinite(metrics["eval/loss"])
  start = configs.read_state(pretrained_dir, 0)
  tuned = configs.read_state(str(tmp_path / "fine-tuned"), 4)
  embedding = next(k for k in start if "params" in k and "embed" in k.lower())
  assert start[embedding].shape == tuned[embedding].shape
  # 4 Adam steps at rates summing to 0.0036 move a weight less than 0.01 from where it started.
  assert 0 < np.abs(start[embedding] - tuned[embedding]).max() < 0.01
