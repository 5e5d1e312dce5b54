"""BERT masked-LM pretraining (optionally with next-sentence prediction).

Arguments after the colon (`k=v`, comma separated):
  dataset   embedded (default), wikipedia, c4, lm1b, tiny_shakespeare, or files:/path/*.txt.
  variant   BERT preset: tiny (default), mini, small, medium, base, large.
  nsp       add next-sentence prediction ([CLS] A [SEP] B [SEP] pairs).
  runlocal  a few steps only.

Embedded default, character-level (2 CPU cores, see README):
  python -m vit_jax.main --config=configs/bert.py --workdir=workdirs/bert
  -> eval/mlm_accuracy 0.380 vs eval/majority_accuracy 0.157 (always predicting the most
     frequent character), in 7 min wall on 2 CPU cores.

BERT-base on Wikipedia with NSP (accelerators; not run here):
  python -m vit_jax.main --config=configs/bert.py:dataset=wikipedia,variant=base,nsp \
      --config.tokenizer.kind=spm_unigram --config.tokenizer.vocab_size=30522 \
      --config.seq_len=512 --config.batch_size=256 --config.model.dropout_rate=0.1 \
      --config.model.attention_dropout_rate=0.1 --workdir=W
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax.config import args
from vit_jax.config import defaults

# A v5p slice the published-batch step fits on, measured with `python -m vit_jax.compile`.
TARGET_TOPOLOGY = {"base": "v5p-8", "large": "v5p-32"}


def get_config(arg=None):
  options = args.parse(arg, dict(dataset="embedded", variant="tiny", nsp=False, runlocal=False))
  c = defaults.text_defaults("masked_lm", options["dataset"])
  c.seq_len = 128
  c.nsp = options["nsp"]
  c.masking = ml_collections.ConfigDict(dict(rate=0.15, whole_word=False, span=False))
  # No dropout for the short CPU default (see text_model); BERT's own value is 0.1.
  c.model = defaults.text_model(
      c,
      "bert" if options["nsp"] else "bert_mlm",
      options["variant"],
      remat="none",
      scan_layers=False,
      mlp_dim=placeholder(int),
  )
  c.batch_size = 32
  # The accelerator recipe's slice (batch 256 x 512 tokens; measured in README.md, "Before you
  # spend pod hours").
  c.target_topology = TARGET_TOPOLOGY.get(options["variant"])
  c.total_steps = 2_500
  c.optimizer.update(lr=1e-3, b2=0.98, weight_decay=0.01, warmup_steps=300, schedule="linear")
  c.eval_max_batches = 20
  if options["variant"] in ("base", "large"):  # accelerators: bf16 compute, fp32 params; the
    c.model.dtype = "bfloat16"  # original BERT trained in fp32, bf16 halves activation memory
  if options["runlocal"]:
    defaults.shrink_for_runlocal(c)
  return c
