"""GPT causal language modeling: the embedded corpus by default, TFDS text by name.

Arguments after the colon (`k=v`, comma separated):
  dataset   embedded (default: ~2 MB of English that ships with Python), tiny_shakespeare, lm1b,
            c4, wikipedia, or files:/path/*.txt.
  variant   GPT preset: pico, nano (default), micro, gpt2, gpt2-medium, gpt2-large, gpt2-xl.
  runlocal  a few steps only.

Embedded default, character-level (2 CPU cores, see README for the measured figures):
  python -m vit_jax.main --config=configs/gpt.py --workdir=workdirs/gpt
  python -m vit_jax.generate --workdir=workdirs/gpt --prompt="The module"
  -> eval/bits_per_char 2.597 against eval/unigram_bits_per_char 4.697 (the corpus's unigram
     character entropy; 44.7% lower), in 7 min 55 s wall on 2 CPU cores.

GPT-2 small on C4 with a byte-level BPE (GPU/TPU; not run here):
  python -m vit_jax.main --config=configs/gpt.py:dataset=c4,variant=gpt2 \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=50257 --workdir=W
"""

import ml_collections

from vit_jax.config import args
from vit_jax.config import defaults
from vit_jax.data.text import stream

# A v5p slice the published-batch step fits on, measured with `python -m vit_jax.compile`.
TARGET_TOPOLOGY = {"gpt2": "v5p-64"}


def get_config(arg=None):
  options = args.parse(arg, dict(dataset="embedded", variant="nano", runlocal=False))
  c = defaults.text_defaults("causal_lm", options["dataset"])
  c.seq_len = 128
  c.model = defaults.text_model(
      c, "gpt", options["variant"], posemb="learn", remat="none", scan_layers=False
  )
  c.batch_size = 16  # on 2 CPU cores more small steps beat fewer big ones
  # The accelerator recipe's slice (batch 512 x 1024 tokens; measured in README.md, "Before you
  # spend pod hours").
  c.target_topology = TARGET_TOPOLOGY.get(options["variant"])
  c.total_steps = 3_000
  c.optimizer.update(lr=2e-3, b2=0.99, weight_decay=0.1, warmup_steps=200, grad_clip_norm=1.0)
  c.eval_every = c.checkpoint_every = 500  # saved at least as often as evaluated
  c.eval_max_batches = 40
  # `stream:` datasets (vit_jax/data/text/stream.py): the last `holdout` of the text is held out;
  # training reads "random" (or "sequential") windows of seq_len + 1 tokens.
  c.stream = ml_collections.ConfigDict(dict(holdout=0.1, windows="random"))
  if stream.is_stream(c.dataset):
    c.eval_max_batches = None  # the protocol scores the whole held-out text
  if options["variant"].startswith("gpt2"):  # accelerators: bf16 compute, fp32 params (nanoGPT
    c.model.dtype = "bfloat16"  # train.py:73,112: bf16 autocast; weights, AdamW moments fp32)
  if options["runlocal"]:
    defaults.shrink_for_runlocal(c)
  return c
