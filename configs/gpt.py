"""GPT causal language modeling: the embedded corpus read as one stream by default, TFDS text by
name.

Arguments after the colon (`k=v`, comma separated):
  dataset   stream:embedded (default: ~2 MB of English that ships with Python, read as one text
            whose last 10% is held out, as nanoGPT's char-level data; docs/text.md), embedded
            (the same corpus as documents, every 20th held out), stream:files:/path/*.txt,
            tiny_shakespeare, lm1b, c4, wikipedia, files:/path/*.txt, or mixture (the token
            stores of --config.mixture at its weights, below).
  variant   GPT preset: pico, nano (default), micro, gpt2, gpt2-medium, gpt2-large, gpt2-xl.
            The gpt2 presets get GPT-2's pretraining recipe (below).
  pairs     a decoder-only translator (docs/pairs.md): adds `bleu`, the `decoding` evaluator, for
            a dataset read as pairs (--config.source_key and --config.target_key of a files: or
            hf: dataset; toy_reverse and wmt14_translate/de-en hold pairs of their own, and get it
            without the argument), trained on rows of source [SEP] target [EOS].
  runlocal  a few steps only.

Embedded default, character-level:
  python -m vit_jax.main --config=configs/gpt.py --workdir=workdirs/gpt
  python -m vit_jax.generate --workdir=workdirs/gpt --prompt="The module"
  -> should take about 6 min on 2 CPU cores and reach eval/bits_per_char about 2.0 on the
     held-out text, below an order-6 character n-gram's 2.09 (experiments/char_ngram.py) and the
     text's unigram entropy of about 4.7 (measured: docs/results.md).

GPT-2 124M on C4 with a byte-level BPE (GPU/TPU; not run here), GPT-2's recipe (the values and
their sources are in _gpt2 below): 1024-token context, batch 512, weights N(0, 0.02) with the
residual projections scaled by 1/sqrt(2 x layers), position embeddings N(0, 0.01), no dropout;
the optimizer, which the GPT-2 paper leaves out, is nanoGPT's reproduction's (AdamW lr 6e-4,
b2 0.95, weight decay 0.1, 2k warmup, cosine to 6e-5 over 600k steps). C4 is tokenized once into
a token store (docs/text.md), then trained on by index:
  python -m vit_jax.prepare --config=configs/gpt.py:dataset=c4,variant=gpt2 \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=50257 \
      --output=gs://BUCKET/c4-gpt2
  python -m vit_jax.main --config=configs/gpt.py:dataset=c4,variant=gpt2 \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=50257 \
      --config.token_store=gs://BUCKET/c4-gpt2 --workdir=W
  -> nanoGPT "reproduces GPT-2 (124M) on OpenWebText, running on a single 8XA100 40GB node in
     about 4 days of training" to a validation loss of about 2.85 (its README); GPT-2's own
     figures are zero-shot (e.g. WikiText-103 perplexity 37.50, GPT-2 paper Table 3) after
     training on WebText, which is not public. Not reproduced here (C4 is a different corpus).

The same on a mixture, C4 at 0.8 and Wikipedia at 0.2 (docs/text.md, "Mixtures"): Wikipedia's
store is prepared with the C4 store's tokenizer (a mixture reads one vocabulary), and the run
names both stores and their weights (GPU/TPU; not run here):
  python -m vit_jax.prepare --config=configs/gpt.py:dataset=wikipedia,variant=gpt2 \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.path=gs://BUCKET/c4-gpt2/tokenizer \
      --output=gs://BUCKET/wikipedia-gpt2
  python -m vit_jax.main --config=configs/gpt.py:dataset=mixture,variant=gpt2 \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=50257 \
      --config.mixture.stores=c4=gs://BUCKET/c4-gpt2,wiki=gs://BUCKET/wikipedia-gpt2 \
      --config.mixture.weights=c4=0.8,wiki=0.2 --workdir=gs://BUCKET/gpt2-mix
  -> every train record of metrics.jsonl has tokens/c4 and tokens/wiki, the tokens read from
     each so far: 80% and 20% of them (each block of 2,048 rows holds 1,638 of C4 and 410 of
     Wikipedia); every eval has eval/c4/loss and eval/wiki/loss (each store's validation
     split) beside eval/loss (the two pooled). Stages anneal on another mixture from a step on:
     --config.mixture.weights='c4=0.8,wiki=0.2;400000:c4=0.5,wiki=0.5' (a cooldown branch too).
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax.config import args
from vit_jax.config import defaults
from vit_jax.data.text import datasets
from vit_jax.data.text import stream
from vit_jax.evaluate import registry as evaluators
from vit_jax.models import gpt as gpt_model

# A v5p slice the published-batch step fits on, measured with `python -m vit_jax.compile`.
TARGET_TOPOLOGY = {"gpt2": "v5p-64"}

PAPER_VARIANTS = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
# The block options by which today's decoders differ from GPT-2 (Llama: normalization=rmsnorm,
# gated_mlp=True, activation=silu, biases=none, num_kv_heads, rope_scaling=llama3,
# tie_embeddings=False; interop/hf_llama.py maps the hub's config keys to them). Their values
# here are the model's own defaults, GPT-2's.
DECODER_OPTIONS = (
    "activation",
    "normalization",
    "norm_eps",
    "gated_mlp",
    "biases",
    "qk_norm",
    "rope_base",
    "rope_scaling",
    "rope_factor",
    "rope_low_freq_factor",
    "rope_high_freq_factor",
    "rope_original_max_len",
    "tie_embeddings",
)


def get_config(arg=None):
  options = args.parse(
      arg, dict(dataset="stream:embedded", variant="nano", pairs=False, runlocal=False)
  )
  c = defaults.text_defaults("causal_lm", options["dataset"])
  c.seq_len = 128
  # The CPU default's initialization and learning rate are chosen for its budget (3,000 steps of
  # 16 x 128 characters) on its default data, not taken from GPT-2's recipe (docs/results.md,
  # "Character GPT against a character n-gram"). _gpt2 takes GPT-2's init.
  c.model = defaults.text_model(
      c,
      "gpt",
      options["variant"],
      posemb="learn",
      remat="none",
      scan_layers=False,
      kernel_init="xavier_uniform",
      scale_residual_init=False,
      num_kv_heads=placeholder(int),  # None: every head has its keys and values
      mlp_dim=placeholder(int),  # None: mlp_ratio x width
      **{name: getattr(gpt_model.Gpt, name) for name in DECODER_OPTIONS},
  )
  c.batch_size = 16  # on 2 CPU cores more small steps beat fewer big ones
  # The accelerator recipe's slice (batch 512 x 1024 tokens; measured in docs/pod.md, "Before you
  # spend pod hours").
  c.target_topology = TARGET_TOPOLOGY.get(options["variant"])
  c.total_steps = 3_000
  c.optimizer.update(lr=3e-3, b2=0.99, weight_decay=0.1, warmup_steps=200, grad_clip_norm=1.0)
  c.eval_every = c.checkpoint_every = 500  # saved at least as often as evaluated
  c.eval_max_batches = 40
  # `stream:` datasets (vit_jax/data/text/stream.py): the last `holdout` of the text is held out;
  # training reads windows of seq_len + 1 tokens (`windows`: config/defaults.py CHOICES).
  c.stream = ml_collections.ConfigDict(dict(holdout=0.1, windows="random"))
  # A dataset of pairs is read as rows of source [SEP] target [EOS] (data/text/packed_pairs.py);
  # the loss is on the targets of the target side (CHOICES: "all", every target of a pair).
  c.loss_on = "target"
  if options["pairs"] or datasets.holds_pairs(options["dataset"]):
    # Greedy: a decoder-only model decodes without beams (vit_jax/translate.py).
    c.evals.bleu = evaluators.entry(c, "decoding", beam_size=1)
  if stream.is_stream(c.dataset):
    c.eval_max_batches = None  # the protocol scores the whole held-out text
    # Windows overlapping by half: every held-out character is predicted from at least
    # seq_len / 2 before it (a stride of seq_len leaves the first of each window none), for
    # twice the eval's forward passes. The default run scores 2.031 bits/char so, 2.079 with
    # windows side by side (docs/results.md).
    c.evals.eval.stride = c.get_ref("seq_len") // 2
  if options["variant"] in PAPER_VARIANTS:
    _gpt2(c)
    c.model.dtype = "bfloat16"  # accelerators: bf16 compute, fp32 params (nanoGPT train.py:73,112:
    # bf16 autocast; weights, AdamW moments fp32)
  if options["runlocal"]:
    defaults.shrink_for_runlocal(c)
  return c


def _gpt2(c):
  """GPT-2 (Radford et al. 2019, section 2.3; openai/gpt-2 src/model.py) and, for what the paper
  leaves out, nanoGPT's GPT-2 reproduction (karpathy/nanoGPT train.py, config/train_gpt2.py).
  The weights' initialization is set here (the CPU default's is not GPT-2's); the embeddings'
  (tokens N(0, 0.02), positions N(0, 0.01)) is the GPT model's own (vit_jax/models/gpt.py)."""
  c.seq_len = 1024  # paper 2.3: "increase the context size from 512 to 1024 tokens"
  c.batch_size = 512  # paper 2.3: "a larger batchsize of 512 is used"
  c.model.update(dropout_rate=0.0, attention_dropout_rate=0.0)  # nanoGPT train.py line 55
  c.model.update(
      kernel_init="normal",  # gpt-2 src/model.py line 53, conv1d: N(0, w_init_stdev)
      init_std=0.02,  # line 53, w_init_stdev=0.02
      # Residual output projections N(0, 0.02 / sqrt(2 x layers)): paper section 2.3,
      # nanoGPT model.py lines 144-145.
      scale_residual_init=True,
  )
  c.total_steps = 600_000  # nanoGPT config/train_gpt2.py line 16
  c.optimizer.update(
      name="adamw",
      lr=6e-4,  # nanoGPT train.py line 58
      b1=0.9,  # line 61
      b2=0.95,  # line 62
      weight_decay=0.1,  # line 60 (PyTorch AdamW: scaled by the learning rate)
      decoupled_weight_decay=False,
      grad_clip_norm=1.0,  # line 63
      warmup_steps=2_000,  # line 66
      schedule="cosine",
      end_lr_ratio=0.1,  # line 68: min_lr 6e-5
  )
  c.log_every = 100
  c.eval_every = c.checkpoint_every = 5_000
