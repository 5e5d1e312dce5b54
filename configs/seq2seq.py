"""Encoder-decoder training: an offline toy task by default, TFDS translation by name.

Arguments after the colon (`k=v`, comma separated):
  dataset   toy_reverse (default: reverse a random string), toy_number_words (digits -> English
            words), wmt14_translate/de-en, or pairs of a files: or hf: dataset (docs/pairs.md).
  variant   small (default: 2 layers of width 128 for the CPU), or base: the Transformer base
            model and its training recipe of "Attention Is All You Need" (below).
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

Transformer base (variant=base; Vaswani et al. 2017, every value's section beside it in
_transformer_base): English -> German on WMT'14 in the hub's translation layout, one joint
vocabulary of 32k pieces for both languages (accelerators; not run here):
  python -m vit_jax.prepare --config=configs/seq2seq.py:dataset=hf:/data/wmt14,variant=base \
      --config.hf_subset=de-en --config.source_key=en --config.target_key=de \
      --output=/data/wmt14-en-de
  python -m vit_jax.main --config=configs/seq2seq.py:dataset=hf:/data/wmt14,variant=base \
      --config.hf_subset=de-en --config.source_key=en --config.target_key=de \
      --config.token_store=/data/wmt14-en-de --workdir=workdirs/transformer-base
  -> the paper's figure for this model and recipe: 27.3 BLEU on newstest2014 (Table 2) and 25.8
     on newstest2013 (Table 3), after 100k steps (12 hours on 8 P100 GPUs, section 5.2), with
     the last 5 checkpoints averaged (section 6.1: not done here) and 4 beams, alpha 0.6.
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax import errors
from vit_jax import evaluate as evaluators
from vit_jax.config import args
from vit_jax.config import defaults
from vit_jax.data.text import datasets

VARIANTS = ("small", "base")


def get_config(arg=None):
  options = args.parse(arg, dict(dataset="toy_reverse", variant="small", runlocal=False))
  if options["variant"] not in VARIANTS:
    raise errors.ConfigError(
        f"configs/seq2seq.py: variant={options['variant']!r} is not one of {', '.join(VARIANTS)}."
    )
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
  # The training loss's label smoothing (tasks/seq2seq.py; 0: none), in [0, 1).
  c.label_smoothing = 0.0
  if options["dataset"] not in datasets.TOY_DATASETS:  # translation is scored on decoded text
    c.evals.bleu = evaluators.entry(c, "decoding")
  if options["variant"] == "base":
    _transformer_base(c)
  if options["runlocal"]:
    defaults.shrink_for_runlocal(c)
  return c


def _transformer_base(c):
  """The base model of "Attention Is All You Need" (Vaswani et al. 2017; sections and Table 3's
  base row beside each value) and its training recipe."""
  c.model.update(
      width=512,  # Table 3: d_model
      num_layers=6,  # Table 3: N (the decoder follows: num_decoder_layers None)
      num_heads=8,  # Table 3: h (d_k = d_v = 64)
      mlp_dim=2048,  # Table 3: d_ff
      dropout_rate=0.1,  # section 5.4, Table 3: P_drop
      pre_ln=False,  # section 3.1: LayerNorm(x + Sublayer(x))
      posemb="sincos1d",  # section 3.5
      activation="relu",  # section 3.3: max(0, xW1 + b1)W2 + b2
  )
  # Section 3.4: one embedding shared by both sides and the pre-softmax layer (the model's own),
  # so one vocabulary for both languages: section 5.1's en-de BPE has about 37,000 tokens; 32,000
  # is flax's WMT example's (examples/wmt/configs/default.py, vocab_size).
  c.tokenizer.update(kind="spm_bpe", vocab_size=32_000)
  c.label_smoothing = 0.1  # section 5.4: epsilon_ls = 0.1
  # Section 5.1: batches of about 25,000 source and 25,000 target tokens; 1,024 rows of up to
  # 128 tokens a side hold that many where sentences average 25 tokens or more.
  c.batch_size = 1024
  c.input_len = c.target_len = 128
  c.total_steps = 100_000  # section 5.2: the base models, 100,000 steps
  # Section 5.2 trained on 8 P100 GPUs; its TPU slice here is a v5p-8, 4 chips data parallel, 256
  # rows each (docs/pod.md's row: the step's memory per chip and its bounds).
  c.target_topology = "v5p-8"
  warmup = 4_000  # section 5.3: warmup_steps = 4000
  c.optimizer.update(
      name="adamw",
      b1=0.9,  # section 5.3
      b2=0.98,  # section 5.3
      eps=1e-9,  # section 5.3
      weight_decay=0.0,  # section 5.3: Adam, no weight decay
      grad_clip_norm=0.0,  # the paper clips no gradient
      # Section 5.3, equation (3): d_model^-0.5 x min(step^-0.5, step x warmup^-1.5): a linear
      # warmup to d_model^-0.5 x warmup^-0.5, then lr / sqrt(1 + (step - warmup) / warmup) =
      # lr x sqrt(warmup / step), the rsqrt schedule with its timescale the warmup.
      lr=512**-0.5 * warmup**-0.5,
      warmup_steps=warmup,
      schedule="rsqrt",
      rsqrt_timescale=warmup,
  )
  c.log_every = 100
  c.eval_every = c.checkpoint_every = 5_000
