"""GPT causal language modeling: the embedded corpus read as one stream by default, TFDS text by
name.

Arguments after the colon (`k=v`, comma separated):
  dataset   stream:embedded (default: ~2 MB of English that ships with Python, read as one text
            whose last 10% is held out, as nanoGPT's char-level data; docs/text.md), embedded
            (the same corpus as documents, every 20th held out), stream:files:/path/*.txt,
            tiny_shakespeare, lm1b, c4, wikipedia, files:/path/*.txt, or mixture (the token
            stores of --config.mixture at its weights, below).
  variant   GPT preset: pico, nano (default), micro, gpt2, gpt2-medium, gpt2-large, gpt2-xl;
            today's decoders smollm2-135m, smollm2-360m, qwen2.5-0.5b, llama3.2-1b,
            llama3.1-8b. The gpt2 presets get GPT-2's pretraining recipe, the decoders each
            its own (below).
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

Today's decoders (GPU/TPU; not run here): SmolLM2-135M and -360M, Qwen2.5-0.5B, Llama-3.2-1B and
Llama-3.1-8B, each with the shape of its published config.json (vit_jax/models/gpt.py DECODERS)
and its pretraining recipe as published (the values and their sources are in _smollm2, _qwen2 and
_llama3 below), here on C4 with a byte-level BPE of the model's vocabulary size. Llama-3.1-8B:
  python -m vit_jax.prepare --config=configs/gpt.py:dataset=c4,variant=llama3.1-8b \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=128256 \
      --output=gs://BUCKET/c4-llama3
  python -m vit_jax.main --config=configs/gpt.py:dataset=c4,variant=llama3.1-8b \
      --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=128256 \
      --config.token_store=gs://BUCKET/c4-llama3 --workdir=gs://BUCKET/llama3.1-8b
  -> not run here. `python -m vit_jax.compile` with the same flags: the step fits its
     target_topology v5p-512, FSDP over the 256 chips (its memory per chip: docs/pod.md's
     table); the published model's own results are on other data and tokenizer.
     Every preset's commands, and what a run does not reproduce: docs/decoders.md.
"""

import ml_collections
from ml_collections.config_dict import placeholder

from vit_jax import evaluate as evaluators
from vit_jax.config import args
from vit_jax.config import defaults
from vit_jax.data.text import datasets
from vit_jax.data.text import stream
from vit_jax.models import gpt as gpt_model

# A v5p slice the published-batch step fits on, measured with `python -m vit_jax.compile`
# (docs/pod.md's table of the paper recipes).
TARGET_TOPOLOGY = {
    "gpt2": "v5p-64",
    "smollm2-135m": "v5p-64",
    "smollm2-360m": "v5p-128",
    "qwen2.5-0.5b": "v5p-512",
    "llama3.2-1b": "v5p-512",
    "llama3.1-8b": "v5p-512",
}
# What else the Llamas' steps need to fit their slice (beyond bf16 compute and the splash attention
# `auto` picks), measured with `python -m vit_jax.compile`: the state sharded over the slice
# (FSDP), the layers scanned and recomputed in the backward pass, the 2,048 sequences in two
# microbatches of four per chip (the same step: gradients of the whole batch); docs/pod.md's
# table has the memory per chip. FSDP alone did not do: XLA asked 19.84 TB of temporaries a chip
# for the 1B's step on v5p-2048.
_LLAMA_FIT = dict(mesh="fsdp:-1", grad_accum_steps=2, model=dict(remat="full", scan_layers=True))
FIT_SLICE = {"llama3.2-1b": _LLAMA_FIT, "llama3.1-8b": _LLAMA_FIT}

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
      head_dim=placeholder(int),  # None: width / num_heads
      mlp_dim=placeholder(int),  # None: mlp_ratio x width
      **{name: getattr(gpt_model.Gpt, name) for name in DECODER_OPTIONS},
  )
  c.batch_size = 16  # on 2 CPU cores more small steps beat fewer big ones
  # The accelerator recipes' slices (measured in docs/pod.md, "Before you spend pod hours").
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
    # Greedy; beam_size > 1 decodes by beam search, as seq2seq's (vit_jax/translate.py).
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
  elif options["variant"] in gpt_model.DECODERS:
    c.model.update(gpt_model.decoder_options(options["variant"]))
    DECODER_RECIPES[options["variant"]](c, options["variant"])
    c.update(FIT_SLICE.get(options["variant"], {}))  # nested: other model keys stay
    c.log_every = 100
    c.eval_every = c.checkpoint_every = 5_000
  if options["variant"] in PAPER_VARIANTS or options["variant"] in gpt_model.DECODERS:
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


# The SmolLM2 runs' own nanotron configs (huggingface/smollm, text/pretraining/smollm2/
# config_smollm2_135M.yaml and _360M.yaml; the line numbers below are those of both): per size,
# micro_batch_size (line 96) x data-parallel replicas (dp, line 78) sequences a step, no
# accumulation (line 93); train_steps (98); the linear decay's lr_decay_steps (64), which ends
# the run; init_method std (35).
_SMOLLM2 = {
    "smollm2-135m": dict(
        batch=8 * 64, steps=2_000_000, decay=400_000, init_std=0.041666666666666664
    ),
    "smollm2-360m": dict(batch=6 * 128, steps=2_600_000, decay=520_000, init_std=0.03227),
}


def _smollm2(c, variant):
  """SmolLM2 (Allal et al. 2025, arXiv 2502.02737) as its pretraining configs set it (_SMOLLM2):
  1,048,576 tokens a step for 2.1T tokens (135M), 1,572,864 for 4.1T (360M); the paper gives 2T
  and 4T. Weights: nanotron's StandardParametrizator (src/nanotron/scaling/parametrization.py),
  N(0, std) and the output projections N(0, std / sqrt(2 x layers)); the token embedding keeps the
  GPT model's N(0, 0.02)."""
  run = _SMOLLM2[variant]
  c.seq_len = 2048  # line 97, sequence_length
  c.batch_size = run["batch"]
  c.total_steps = run["steps"]
  c.model.rope_base = 10_000.0  # line 54 (the released config.json has 100,000)
  c.model.update(kernel_init="normal", init_std=run["init_std"], scale_residual_init=True)
  c.optimizer.update(
      name="adamw",  # line 73
      lr=3e-3,  # line 62
      b1=0.9,  # line 70
      b2=0.95,  # line 71
      eps=1e-8,  # line 72
      weight_decay=0.01,  # line 75 (PyTorch AdamW: scaled by the learning rate)
      decoupled_weight_decay=False,
      grad_clip_norm=1.0,  # line 60
      warmup_steps=2_000,  # lines 66-67, linear
      # Warmup-stable-decay: constant from the warmup to lr_decay_starting_step (line 63), then
      # linear (line 65) to min_decay_lr 0 (line 68) over the last lr_decay_steps.
      schedule="wsd",
      cooldown_steps=run["decay"],
      cooldown_shape="linear",
  )


def _qwen2(c, variant):
  """Qwen2.5 (Qwen Team 2024, arXiv 2412.15115): its report gives the context and the tokens, not
  the optimizer, whose learning rate and batch it set by scaling laws it does not publish (its
  section 3.2). Those are the last the Qwen reports published, Qwen's (Bai et al. 2023, arXiv
  2309.16609, section 2.4 and Table 1), and Llama's (Touvron et al. 2023a, arXiv 2302.13971,
  section 2.3), whose architecture Qwen's follows (Qwen 2.3), for what Qwen's leaves out."""
  del variant  # one size
  c.seq_len = 4096  # Qwen2.5 3.3: "an initial phase with a 4,096-token context length"
  c.model.rope_base = 10_000.0  # 3.3: raised to 1,000,000 only for the final 32,768-token stage
  c.batch_size = 1024  # 4M tokens: Qwen Table 1 (every size)
  c.total_steps = round(18e12 / (c.batch_size * c.seq_len))  # Qwen2.5 3.1: 18 trillion tokens
  # N(0, 0.02) for every weight: config.json's initializer_range, what transformers' Qwen2 draws
  # them from (no report gives the init).
  c.model.update(kernel_init="normal", init_std=0.02, scale_residual_init=False)
  c.optimizer.update(
      name="adamw",  # Qwen 2.4
      lr=3e-4,  # Qwen Table 1: every size's
      b1=0.9,  # Qwen 2.4
      b2=0.95,  # Qwen 2.4
      eps=1e-8,  # Qwen 2.4
      weight_decay=0.1,  # LLaMA paper 2.3 (PyTorch AdamW: scaled by the learning rate)
      decoupled_weight_decay=False,
      grad_clip_norm=1.0,  # LLaMA paper 2.3
      warmup_steps=2_000,  # LLaMA paper 2.3
      schedule="cosine",  # Qwen 2.4
      end_lr_ratio=0.1,  # Qwen 2.4: "a minimum learning rate of 10% of the peak"
  )


# Tokens each Llama preset pretrained on: "about 15T" (Llama 3 paper, section 1), and "up to 9
# trillion" (Llama 3.2's model card, "Training Data").
_LLAMA3_TOKENS = {"llama3.1-8b": 15e12, "llama3.2-1b": 9e12}


def _llama3(c, variant):
  """Llama 3 (Llama Team 2024, arXiv 2407.21783): the initial pre-training of section 3.4.1, the
  405B's, which the 8B and 70B follow ("We use similar recipes", 3.4), at Table 3's 8B learning
  rate. What the paper leaves out (AdamW's betas and epsilon, weight decay, clipping) is Llama 2's
  (Touvron et al. 2023b, arXiv 2307.09288, section 2.2). Llama 3.2 1B has no recipe of its own:
  it was pruned from Llama 3.1 8B and trained on the 8B's and 70B's logits (its model card,
  "Training Data"), so it takes this one, at the 8B's learning rate."""
  c.seq_len = 8192  # 3.4.1: "sequences of 8,192 tokens" after the first 252M tokens
  # 16M tokens: 3.4.1 doubles the batch to 16M after 2.87T tokens; the smaller batches before
  # (4M, then 8M) are not reproduced.
  c.batch_size = 2048
  c.total_steps = round(_LLAMA3_TOKENS[variant] / (c.batch_size * c.seq_len))
  # Table 3: RoPE with theta = 500,000, unscaled; the llama3 scaling in the released config.json
  # is the 128K-token model's, which 3.4.2's long-context stage trains after this one.
  c.model.update(rope_scaling="none", rope_factor=1.0)
  # N(0, 0.02) for every weight: config.json's initializer_range, what transformers' Llama draws
  # them from (the paper gives no init).
  c.model.update(kernel_init="normal", init_std=0.02, scale_residual_init=False)
  c.optimizer.update(
      name="adamw",  # 3.4.1
      lr=3e-4,  # Table 3, 8B
      b1=0.9,  # Llama 2 paper 2.2
      b2=0.95,  # Llama 2 paper 2.2
      eps=1e-5,  # Llama 2 paper 2.2
      weight_decay=0.1,  # Llama 2 paper 2.2 (PyTorch AdamW: scaled by the learning rate)
      decoupled_weight_decay=False,
      grad_clip_norm=1.0,  # Llama 2 paper 2.2
      warmup_steps=8_000,  # 3.4.1, linear
      schedule="cosine",  # 3.4.1
      end_lr_ratio=0.01,  # 3.4.1: 8e-5 decays to 8e-7
  )


DECODER_RECIPES = {
    "smollm2-135m": _smollm2,
    "smollm2-360m": _smollm2,
    "qwen2.5-0.5b": _qwen2,
    "llama3.2-1b": _llama3,
    "llama3.1-8b": _llama3,
}
