"""BERT sequence classification, usually fine-tuned from a masked-LM run of configs/bert.py.

Arguments after the colon (`k=v`, comma separated):
  dataset   glue/sst2 (default), imdb_reviews or ag_news_subset (4 news topics) (TFDS; prepare
            them with `tfds build`).
  variant   BERT preset; must match the checkpoint in init_from.
  runlocal  a few steps only.

Fine-tune the embedded-corpus MLM model on SST-2 (needs glue/sst2 prepared; not run here):
  python -m vit_jax.main --config=configs/bert_classifier.py \
      --config.init_from=workdirs/bert --config.tokenizer.kind=char --workdir=W
  init_from a workdir of ours reuses its tokenizer; the MLM/NSP heads are dropped and the
  classifier starts fresh. The variant must match the pretrained one, and so must the tokenizer
  settings (the defaults are configs/bert.py's: characters, no vocab_size), or rerunning the
  command to resume is refused. From a BERT-base run, pass its --config.tokenizer.* values.
"""

from ml_collections.config_dict import placeholder

from vit_jax.config import args
from vit_jax.config import defaults
from vit_jax.data.text import datasets


def get_config(arg=None):
  options = args.parse(arg, dict(dataset="glue/sst2", variant="tiny", runlocal=False))
  # The labeled dataset's class count and eval split (vit_jax/data/text/datasets.py); the run
  # refuses a dataset that is not labeled.
  spec = datasets.TFDS_DATASETS.get(options["dataset"])
  labeled = spec is not None and spec.kind == "labeled"
  c = defaults.text_defaults(
      "text_classification", options["dataset"], eval_split=spec.eval_split if labeled else "test"
  )
  c.num_classes = spec.num_classes if labeled else 2
  c.seq_len = 128
  c.model = defaults.text_model(
      c,
      "bert_classifier",
      options["variant"],
      dropout_rate=0.1,  # fine-tuning, as in the BERT paper
      attention_dropout_rate=0.1,
      mlp_dim=placeholder(int),
  )
  c.batch_size = 32
  c.total_steps = 2_000
  c.optimizer.update(lr=5e-5, weight_decay=0.01, warmup_steps=200, schedule="linear")
  c.eval_every = 500
  c.checkpoint_every = 500
  if options["runlocal"]:
    defaults.shrink_for_runlocal(c)
  return c
