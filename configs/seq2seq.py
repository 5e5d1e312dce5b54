"""Encoder-decoder training: an offline toy task by default, TFDS translation by name.

Arguments after the colon (`k=v`, comma separated):
  dataset   toy_reverse (default: reverse a random string), toy_number_words (digits -> English
            words), or wmt14_translate/de-en.
  runlocal  a few steps only.

Embedded default:
  python -m vit_jax.main --config=configs/seq2seq.py --workdir=workdirs/seq2seq
  python -m vit_jax.generate --workdir=workdirs/seq2seq --prompt=helloworld --beam_size=4
  -> should take about 6 min on 2 CPU cores and reach eval/exact_match 1 (teacher-forced,
     validation; measured: docs/results.md); generate prints "helloworld -> dlrowolleh" (inputs
     are 1-12 lowercase letters).

WMT'14 German -> English with a SentencePiece vocabulary (accelerators; not run here), its
sentence pairs tokenized once into a token store (docs/text.md):
  python -m vit_jax.prepare --config=configs/seq2seq.py:dataset=wmt14_translate/de-en \
      --config.tokenizer.kind=spm_bpe --config.tokenizer.vocab_size=32000 --output=/data/wmt14
  python -m vit_jax.main --config=configs/seq2seq.py:dataset=wmt14_translate/de-en \
      --config.tokenizer.kind=spm_bpe --config.tokenizer.vocab_size=32000 \
      --config.token_store=/data/wmt14 --config.model.width=512 --config.model.num_layers=6 \
      --workdir=workdirs/wmt14
  python -m vit_jax.generate --workdir=workdirs/wmt14 --input_file=newstest.de \
      --output_file=newstest.en --beam_size=4
A WMT run also logs bleu/bleu, bleu/chrf and bleu/rouge1, 2 and L: sacrebleu's and rouge-score's
scores of 4-beam decodes of 1,000 validation pairs (the `decoding` evaluator; it needs
`pip install -e .[eval]`), their lines in workdirs/wmt14/decodes/bleu/STEP.json.
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax.config import args
from vit_jax.config import defaults
from vit_jax.data.text import datasets
from vit_jax.evaluate import registry as evaluators


def get_config(arg=None):
  options = args.parse(arg, dict(dataset="toy_reverse", runlocal=False))
  c = defaults.text_defaults("seq2seq", options["dataset"])
  c.input_len = 32
  c.target_len = 32
  # The position table covers the longer side and decoding past target_len; it follows the
  # lengths, so `--config.input_len=...` reaches the model.
  max_len = defaults.follows(c, "input_len") + defaults.follows(c, "target_len")
  c.model = ml_collections.ConfigDict(
      dict(
          name="seq2seq",
          width=128,
          num_layers=2,
          num_decoder_layers=placeholder(int),
          num_heads=4,
          mlp_dim=256,
          max_len=max_len,
          posemb="sincos1d",
          pre_ln=True,
          activation="relu",
          dropout_rate=0.0,
          attention_impl="auto",
          remat="none",
          dtype="float32",
      )
  )
  c.batch_size = 64
  c.total_steps = 2_000
  c.optimizer.update(lr=1e-3, b2=0.98, weight_decay=0.01, warmup_steps=200)
  c.eval_max_batches = 10
  if options["dataset"] not in datasets.TOY_DATASETS:  # translation is scored on decoded text
    c.evals.bleu = evaluators.entry(c, "decoding")
  if options["runlocal"]:
    defaults.shrink_for_runlocal(c)
  return c
