"""BERT masked-LM pretraining (optionally with next-sentence prediction).

Arguments after the colon (`k=v`, comma separated):
  dataset   embedded (default), wikipedia, c4, lm1b, tiny_shakespeare, or files:/path/*.txt.
  variant   BERT preset: tiny (default), mini, small, medium, base, large. base and large get
            the paper's pretraining recipe (below).
  phase     1 (default) or 2: the paper recipe's sequence-length phase (base and large only).
  nsp       add next-sentence prediction ([CLS] A [SEP] B [SEP] pairs).
  runlocal  a few steps only.

Embedded default, character-level:
  python -m vit_jax.main --config=configs/bert.py --workdir=workdirs/bert
  -> should take about 10 min on 2 CPU cores and reach eval/mlm_accuracy about 0.44, against
     about 0.16 for eval/majority_accuracy, always predicting the most frequent character
     (measured: docs/results.md).

BERT-base on Wikipedia with NSP, the paper's recipe (Devlin et al. 2019, appendix A.2; the values
and their sources are in _paper below): batch 256, Adam lr 1e-4 (b2 0.999, epsilon 1e-6), weight
decay 0.01, 10k warmup steps then linear decay over 1M steps, dropout 0.1, sequences of 128
tokens for 90% of the steps and 512 for the rest. Wikipedia is tokenized once into a token store
(docs/text.md); then two commands, the second starting from the first's parameters (Adam's
moments restart, as in BERT's own two-run recipe, README "Pre-training tips"); together they
follow the paper's one learning-rate line to within 1%:
  python -m vit_jax.prepare --config=configs/bert.py:dataset=wikipedia,variant=base,nsp \
      --config.tokenizer.kind=spm_unigram --config.tokenizer.vocab_size=30522 \
      --output=gs://BUCKET/wikipedia-spm
  python -m vit_jax.main --config=configs/bert.py:dataset=wikipedia,variant=base,nsp \
      --config.tokenizer.kind=spm_unigram --config.tokenizer.vocab_size=30522 \
      --config.token_store=gs://BUCKET/wikipedia-spm --workdir=W1
  python -m vit_jax.main --config=configs/bert.py:dataset=wikipedia,variant=base,nsp,phase=2 \
      --config.tokenizer.kind=spm_unigram --config.tokenizer.vocab_size=30522 \
      --config.token_store=gs://BUCKET/wikipedia-spm --config.init_from=W1 --workdir=W2
  -> the paper reports a GLUE average of 79.6 for BERT-base after fine-tuning (Table 1), from
     pretraining on BooksCorpus + Wikipedia "on 4 Cloud TPUs in Pod configuration (16 TPU chips
     total)" in 4 days (appendix A.2). Not reproduced here. Differences: Wikipedia only
     (BooksCorpus is not in TFDS) and a SentencePiece vocabulary of the same size in place of
     WordPiece.
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax import errors
from vit_jax.config import args
from vit_jax.config import defaults

# A v5p slice the published-batch step fits on, measured with `python -m vit_jax.compile`.
TARGET_TOPOLOGY = {"base": "v5p-8", "large": "v5p-32"}

PAPER_VARIANTS = ("base", "large")
PAPER_STEPS = 1_000_000  # BERT README, "1M update steps"; paper A.2
PHASE_1_STEPS = 900_000  # paper A.2: "sequence length of 128 for 90% of the steps"
PEAK_LR = 1e-4  # paper A.2; BERT README "Pre-training tips": "used in the paper was 1e-4"


def get_config(arg=None):
  options = args.parse(
      arg, dict(dataset="embedded", variant="tiny", phase=1, nsp=False, runlocal=False)
  )
  c = defaults.text_defaults("masked_lm", options["dataset"])
  c.seq_len = 128
  c.nsp = options["nsp"]
  c.masking = ml_collections.ConfigDict(dict(rate=0.15, whole_word=False, span=False))
  # No dropout for the short CPU default (see text_model); BERT's own value is 0.1. Xavier
  # weights too, the CPU default's choice; the paper recipe below takes BERT's truncated normal
  # 0.02.
  c.model = defaults.text_model(
      c,
      "bert" if options["nsp"] else "bert_mlm",
      options["variant"],
      remat="none",
      scan_layers=False,
      mlp_dim=placeholder(int),
      kernel_init="xavier_uniform",
  )
  c.batch_size = 32
  # The accelerator recipe's slice (batch 256 x 512 tokens; measured in docs/pod.md, "Before you
  # spend pod hours").
  c.target_topology = TARGET_TOPOLOGY.get(options["variant"])
  c.total_steps = 2_500
  c.optimizer.update(lr=1e-3, b2=0.98, weight_decay=0.01, warmup_steps=300, schedule="linear")
  c.eval_max_batches = 20
  if options["variant"] in PAPER_VARIANTS:
    _paper(c, options["phase"])
    c.model.dtype = "bfloat16"  # accelerators: bf16 compute, fp32 params; the original BERT
    # trained in fp32, bf16 halves activation memory
  if options["runlocal"]:
    defaults.shrink_for_runlocal(c)
  return c


def _paper(c, phase: int):
  """Devlin et al. 2019 appendix A.2, google-research/bert optimization.py and modeling.py."""
  c.model.update(
      max_len=512,  # modeling.py line 43, max_position_embeddings: both phases share the table
      dropout_rate=0.1,  # modeling.py line 41, hidden_dropout_prob
      attention_dropout_rate=0.1,  # modeling.py line 42
      kernel_init="truncated_normal",  # modeling.py line 375, create_initializer: stddev 0.02
  )
  c.batch_size = 256  # paper A.2: "batch size of 256 sequences"
  c.optimizer.update(
      name="adamw",
      b1=0.9,  # optimization.py line 62
      b2=0.999,  # optimization.py line 63
      eps=1e-6,  # optimization.py line 64
      bias_correction=False,  # optimization.py lines 131-137: m / (sqrt(v) + eps), raw moments
      weight_decay=0.01,  # optimization.py line 61, scaled by the learning rate (coupled)
      decoupled_weight_decay=False,
      grad_clip_norm=1.0,  # optimization.py line 74
      schedule="linear",  # optimization.py lines 32-38: polynomial decay, power 1, to 0
  )
  # The paper's learning rate falls on one line from 1e-4 (after 10k warmup steps,
  # run_pretraining.py line 72) to 0 at 1M steps; phase 1 stops on it at 900k steps (1e-5) and
  # phase 2 runs the rest of it.
  lr_at_phase_2 = PEAK_LR * (PAPER_STEPS - PHASE_1_STEPS) / PAPER_STEPS
  if phase == 1:
    c.seq_len = 128
    c.total_steps = PHASE_1_STEPS
    c.optimizer.update(lr=PEAK_LR, warmup_steps=10_000, end_lr_ratio=lr_at_phase_2 / PEAK_LR)
  elif phase == 2:
    c.seq_len = 512
    c.total_steps = PAPER_STEPS - PHASE_1_STEPS
    c.optimizer.update(lr=lr_at_phase_2, warmup_steps=0, end_lr_ratio=0.0)
  else:
    raise errors.ConfigError(f"configs/bert.py: phase={phase} must be 1 or 2.")
  c.log_every = 1_000
  c.eval_every = c.checkpoint_every = 10_000
