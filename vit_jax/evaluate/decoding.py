"""A model trained on pairs scored on the text it generates, as translation and summarization are
scored: the first `max_examples` sources of `split` are decoded by the code `vit_jax.generate
--input_file` runs (vit_jax/translate.py), a seq2seq model's from its encoded source, a
decoder-only model's (a causal LM on pairs) from `source [SEP]`: greedily with `beam_size` 1, else
by beam search with GNMT's length penalty `length_penalty`. `max_new_tokens` None:
translate.default_new_tokens. The
outputs are detokenized and scored against the detokenized targets:

  bleu, chrf            sacrebleu's corpus BLEU and chrF (0-100, its default settings: 13a
                        tokenization, exponential smoothing; chrF with character 6-grams)
  rouge1, rouge2, rougeL  rouge-score's F-measures (0-100, with Porter stemming), averaged over
                        the examples; its tokenizer keeps only ASCII letters and digits, so ROUGE
                        suits English outputs

The decoded lines are written beside the metrics, one JSON file per eval step
(vit_jax/workdir.py `decodes_path`): sources, references and outputs (one list each, in split
order), the metrics, and sacrebleu's signatures, which say how BLEU and chrF were computed.
sacrebleu and rouge-score come with the `eval` extra (`pip install -e .[eval]`).
"""

import importlib.util
import json

import jax
import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax import storage
from vit_jax import tasks
from vit_jax import translate
from vit_jax import workdir as workdir_lib
from vit_jax.data.text import batches as text_batches
from vit_jax.evaluate import lm

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def scores(outputs: list[str], references: list[str]) -> tuple[dict, dict]:
  """({metric: value}, {"bleu": signature, "chrf": signature}) of `outputs` against one
  reference each."""
  # pylint: disable=g-import-not-at-top  (the eval extra; only this evaluator needs them)
  from rouge_score import rouge_scorer
  import sacrebleu

  bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
  metrics = {
      "bleu": bleu.corpus_score(outputs, [references]).score,
      "chrf": chrf.corpus_score(outputs, [references]).score,
  }
  scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
  pairs = [scorer.score(ref, out) for out, ref in zip(outputs, references)]
  for kind in ROUGE_TYPES:
    metrics[kind] = 100.0 * sum(p[kind].fmeasure for p in pairs) / max(len(pairs), 1)
  signatures = {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}
  return metrics, signatures


class Seq2SeqDecoding(lm.TextTaskEval):
  """BLEU, chrF and ROUGE of the decoded first `max_examples` pairs of `split` of `dataset`
  (default: the run's dataset and eval split)."""

  def check_data(self):
    s, c = self.settings, self.config
    if tasks.examples_of(c) != "pairs":
      raise errors.ConfigError(
          f"--config.evals.{self.name} (kind 'decoding') scores a model trained on pairs, and "
          f"--config.dataset={c.dataset!r} is read as documents: name a files: or hf: dataset's "
          "source and target fields with --config.source_key and --config.target_key."
      )
    translate.check_settings(
        c,
        max_new_tokens=s.max_new_tokens or translate.default_new_tokens(c),
        where=f"--config.evals.{self.name}",
    )
    missing = [m for m in ("sacrebleu", "rouge_score") if importlib.util.find_spec(m) is None]
    if missing:
      raise errors.ConfigError(
          f"--config.evals.{self.name} (kind 'decoding') scores with sacrebleu and rouge-score, "
          f"and {' and '.join(missing)} is not installed: `pip install -e .[eval]`."
      )
    super().check_data()

  def run(self, params, step=None, name=None) -> dict:
    s, c = self.settings, self.config
    tokenizer = self.task.tokenizer
    split = text_batches.Reading(
        s.dataset,
        split=s.split,
        train=False,
        token_store=c.token_store if s.dataset == c.dataset else None,  # the run's store
        data_dir=c.data_dir,
        read_options=data.read_options(c),
    ).open("pairs", tokenizer)
    indices = np.arange(min(s.max_examples or split.num_examples, split.num_examples))
    sources = [list(ids) for ids in split.examples("source", indices)]
    targets = split.examples("target", indices)
    with jax.set_mesh(self.setup.mesh):  # the target platform for attention_impl=auto
      outputs = translate.translate(
          c,
          self.setup.model_config,
          params,
          tokenizer,
          sources,
          batch_size=c.batch_size,
          max_new_tokens=s.max_new_tokens or translate.default_new_tokens(c),
          beam_size=s.beam_size,
          length_penalty=s.length_penalty,
      )
    references = [translate.one_line(tokenizer.decode(list(ids))) for ids in targets]
    metrics, signatures = scores(outputs, references)
    if self.files_dir is not None and jax.process_index() == 0:
      record = {
          "evaluator": name or self.name,
          "step": step,
          "metrics": metrics,
          "signatures": signatures,
          "sources": [translate.one_line(tokenizer.decode(ids)) for ids in sources],
          "references": references,
          "outputs": outputs,
      }
      path = workdir_lib.decodes_path(self.files_dir, name or self.name, step)
      storage.makedirs(storage.parent(path))
      storage.write_text(path, json.dumps(record, indent=1, ensure_ascii=False))
    return metrics
