"""The `decoding` evaluator: its BLEU, chrF and ROUGE are sacrebleu's and rouge-score's on the lines
it wrote, those lines are what `vit_jax.generate --input_file` and `vit_jax.evaluate` decode from
the same checkpoint, and beam search ranks by GNMT's length penalty."""

import importlib.util
import json
import sys

import numpy as np
import pytest
from rouge_score import rouge_scorer
import sacrebleu

from tests import helpers
from tests import tiny_configs as configs
from tests.survival import conftest as survival
from vit_jax import errors
from vit_jax import evaluate as evaluators
from vit_jax import workdir as workdir_lib
from vit_jax.data.text import seq2seq_toy
from vit_jax.evaluate import decoding
from vit_jax.models import beam_search
from vit_jax.training import train

STEPS = 30  # the lines need not be good (the scores' unit test has good ones), only not empty
EXAMPLES = 12
BEAMS = 2
MAX_NEW = 12


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(workdir, config) of a tiny number-words model with a `decode` evaluator at its last step."""
  config = configs.tiny_seq2seq(STEPS, "dataset=toy_number_words")
  config.optimizer.update(lr=3e-3, warmup_steps=5, schedule="constant")
  config.evals.decode = evaluators.entry(
      config, "decoding", max_examples=EXAMPLES, beam_size=BEAMS, max_new_tokens=MAX_NEW
  )
  workdir = str(tmp_path_factory.mktemp("decoding") / "s2s")
  train.train_and_evaluate(config, workdir)
  return workdir, config


def signatures(outputs, references) -> dict:
  """sacrebleu's signatures of its default BLEU and chrF, scored with one reference each."""
  bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
  bleu.corpus_score(outputs, [references])
  chrf.corpus_score(outputs, [references])
  return {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}


def written(workdir, step=STEPS, name="decode") -> dict:
  with open(workdir_lib.decodes_path(workdir, name, step), encoding="utf-8") as f:
    return json.load(f)


def test_metrics_are_sacrebleus_and_rouge_scores_on_the_written_lines(trained):
  workdir, _ = trained
  record = written(workdir)
  outputs, references = record["outputs"], record["references"]
  pairs = seq2seq_toy.make_examples("number_words", EXAMPLES, split="validation")
  assert record["sources"] == [s for s, _ in pairs]
  assert references == [t for _, t in pairs]
  assert len(outputs) == EXAMPLES
  logged = [r for r in helpers.read_metrics(workdir) if "decode/bleu" in r]
  assert [r["step"] for r in logged] == [STEPS]
  expected = {
      "bleu": sacrebleu.corpus_bleu(outputs, [references]).score,
      "chrf": sacrebleu.corpus_chrf(outputs, [references]).score,
  }
  scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
  scored = [scorer.score(ref, out) for out, ref in zip(outputs, references)]
  for kind in ("rouge1", "rouge2", "rougeL"):
    expected[kind] = 100 * np.mean([s[kind].fmeasure for s in scored])
  for metric, value in expected.items():
    assert record["metrics"][metric] == pytest.approx(value, abs=1e-9), metric
    assert logged[0][f"decode/{metric}"] == pytest.approx(value, abs=1e-9), metric
  assert all(outputs)
  assert record["signatures"] == signatures(outputs, references)
  assert record["signatures"]["bleu"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_generate_input_file_writes_the_evaluators_lines(trained, tmp_path):
  workdir, config = trained
  record = written(workdir)
  result, lines = helpers.translate_file(
      workdir,
      record["sources"],
      tmp_path,
      f"--batch_size={config.batch_size}",
      f"--beam_size={BEAMS}",
      f"--max_new_tokens={MAX_NEW}",
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert lines == record["outputs"]


def test_evaluate_scores_a_checkpoint_as_the_trainer_did(trained, tmp_path):
  workdir, _ = trained
  output = tmp_path / "metrics.json"
  result = helpers.run(
      [
          sys.executable,
          "-m",
          "vit_jax.evaluate",
          f"--checkpoint={workdir}",
          "--evals=decode",
          f"--output={output}",
      ]
  )
  assert result.returncode == 0, result.stderr[-3000:]
  record = written(workdir)
  metrics = json.loads(output.read_text())["metrics"]
  assert metrics == {f"decode/{k}": v for k, v in record["metrics"].items()}
  again = written(str(tmp_path), step=None)
  assert again["outputs"] == record["outputs"]
  assert again["signatures"] == record["signatures"]


@pytest.mark.parametrize("problem", ["missing_input", "existing_output"])
def test_generate_refuses_a_missing_input_or_an_existing_output(trained, tmp_path, problem):
  workdir, _ = trained
  sources, outputs = tmp_path / "sources.txt", tmp_path / "outputs.txt"
  if problem == "existing_output":
    sources.write_text("12\n", encoding="utf-8")
    outputs.write_text("keep me\n", encoding="utf-8")
  result = helpers.run(
      [
          sys.executable,
          "-m",
          "vit_jax.generate",
          f"--workdir={workdir}",
          f"--input_file={sources}",
          f"--output_file={outputs}",
      ]
  )
  assert result.returncode == 2
  if problem == "missing_input":
    survival.assert_one_line_error(result.stderr, "--input_file", str(sources))
    assert not outputs.exists()
  else:
    survival.assert_one_line_error(result.stderr, "--output_file", str(outputs))
    assert outputs.read_text(encoding="utf-8") == "keep me\n"


def test_scores_are_sacrebleus_and_rouge_scores():
  outputs = ["the cat sat on the mat today", "a dog ran", "forty two thousand", ""]
  references = ["the cat sat on a mat today", "the dog ran off", "forty-two thousand", "one"]
  metrics, signed = decoding.scores(outputs, references)
  assert metrics["bleu"] == sacrebleu.corpus_bleu(outputs, [references]).score > 10
  assert metrics["chrf"] == sacrebleu.corpus_chrf(outputs, [references]).score > 10
  scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
  scored = [scorer.score(ref, out) for out, ref in zip(outputs, references)]
  for kind in ("rouge1", "rouge2", "rougeL"):
    assert metrics[kind] == pytest.approx(100 * np.mean([s[kind].fmeasure for s in scored]))
  assert metrics["rouge1"] > metrics["rouge2"] > 0
  assert signed == signatures(outputs, references)


def test_the_length_penalty_ranks_beams_by_gnmts_formula():
  # Log-probabilities of a 2-token and a 10-token hypothesis (EOS counted).
  log_probs, lengths = np.array([-2.0, -3.0]), np.array([2, 10])
  for alpha in (0.0, 0.6, 1.0, 2.0):
    want = log_probs / ((5 + lengths) / 6) ** alpha
    np.testing.assert_allclose(beam_search.length_normalized(log_probs, lengths, alpha), want)
  # alpha 0: the likelier short one; (15/6)**a / (7/6)**a > 3/2 from a = 0.53 on: the long one.
  assert np.argmax(beam_search.length_normalized(log_probs, lengths, 0.0)) == 0
  assert np.argmax(beam_search.length_normalized(log_probs, lengths, 0.5)) == 0
  assert np.argmax(beam_search.length_normalized(log_probs, lengths, 0.6)) == 1


@pytest.mark.parametrize(
    "key,value,says",
    [
        ("beam_size", 0, "must be an integer >= 1"),
        ("length_penalty", -0.5, "must be >= 0"),
        ("max_examples", 0, "must be an integer >= 1 or None"),
        ("bleu_tokenize", "13a", "is not a key of a 'decoding' evaluator"),
    ],
)
def test_bad_settings_are_refused_in_one_line(key, value, says):
  config = configs.tiny_seq2seq(1)
  config.evals.decode = evaluators.entry(config, "decoding")
  config.evals.decode[key] = value
  (problem,) = evaluators.config_problems(config)
  assert f"--config.evals.decode.{key}" in problem and says in problem, problem


def test_a_run_without_the_eval_extra_is_refused_before_training(monkeypatch):
  config = configs.tiny_seq2seq(1)
  config.evals.decode = evaluators.entry(config, "decoding")
  real = importlib.util.find_spec
  monkeypatch.setattr(
      importlib.util, "find_spec", lambda name, *a: None if name == "sacrebleu" else real(name, *a)
  )
  evaluator = object.__new__(decoding.Seq2SeqDecoding)
  evaluator.name, evaluator.config = "decode", config
  evaluator.settings = evaluators.evals_of(config)["decode"]
  with pytest.raises(errors.ConfigError, match=r"sacrebleu is not installed: `pip install"):
    evaluator.check_data()
