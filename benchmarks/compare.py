"""Side-by-side throughput of vit_jax against timm, Hugging Face and torch, in one invocation.

  python benchmarks/compare.py [--quick] [--only vit_ti gpt ...] [--json results.json]

Each workload builds our step and the peer's on the same shapes (fp32, AdamW for training),
warms both up (our compile happens there), then alternates rounds of timed steps, ours then the
peer's, so load changes hit both alike. The table gives the median step's throughput and
ours / peer. The input pipeline row compares our pipeline's images/s with the rate at which our
ViT-Ti/16 step consumes them. `--quick` shrinks every shape to a smoke run (seconds, not a
measurement).
"""

# pylint: disable=g-bad-import-order
import argparse
import json
import statistics
import tempfile
import time

from benchmarks import peers  # torchvision (via timm) must load before TensorFlow
from vit_jax import startup

startup.set_cpu_xla_defaults()  # ours runs as the trainer does
import jax  # noqa: E402  # pylint: disable=wrong-import-position

from benchmarks import input_pipeline  # noqa: E402
from benchmarks import ours  # noqa: E402
from vit_jax.interop import hf_llama  # noqa: E402

GPT = dict(width=384, depth=6, heads=6, vocab=8192, max_len=256)
GPT_QUICK = dict(width=32, depth=1, heads=2, vocab=64, max_len=32)


# A small Llama: the GPT row's shape with 2 key-value heads, SwiGLU at about 8/3 x width, untied.
LLAMA = dict(width=384, depth=6, heads=6, kv_heads=2, mlp_dim=1024, vocab=8192, max_len=256)
LLAMA_QUICK = dict(width=32, depth=1, heads=4, kv_heads=2, mlp_dim=64, vocab=64, max_len=32)
# A small encoder-decoder (post-LN, ReLU, sinusoidal positions, tied vocabulary), as Marian is.
SEQ2SEQ = dict(width=256, layers=3, heads=4, mlp_dim=1024, vocab=8192, input_len=32, target_len=32)
SEQ2SEQ_QUICK = dict(width=32, layers=1, heads=2, mlp_dim=64, vocab=64, input_len=8, target_len=8)


def _llama_peer(shape, kv_heads=None):
  shape = dict(shape, kv_heads=kv_heads or shape["kv_heads"])
  return peers.llama_config(**shape, tied=False)


def _llama_ours(shape, kv_heads=None):
  """Our GPT with the Llama options, read from the peer's config by the hub converter's table,
  so that both sides have one shape."""
  return hf_llama.config_from_hf(_llama_peer(shape, kv_heads).to_dict())


def _seq2seq_ours(shape):
  return {
      "name": "seq2seq",
      "vocab_size": shape["vocab"],
      "width": shape["width"],
      "num_layers": shape["layers"],
      "num_heads": shape["heads"],
      "mlp_dim": shape["mlp_dim"],
      "max_len": shape["input_len"] + shape["target_len"],
      "posemb": "sincos1d",
      "pre_ln": False,
      "activation": "relu",
      "dropout_rate": 0.0,
  }


def _seq2seq_peer(shape):
  return peers.marian_config(
      shape["width"],
      shape["layers"],
      shape["heads"],
      shape["mlp_dim"],
      shape["vocab"],
      shape["input_len"] + shape["target_len"],
  )


def _gpt_ours(shape):
  return {
      "name": "gpt",
      "variant": "pico",
      "width": shape["width"],
      "depth": shape["depth"],
      "num_heads": shape["heads"],
      "vocab_size": shape["vocab"],
      "max_len": shape["max_len"],
  }


# The peers' GELU where it is the exact (erf) form: timm's ViT (nn.GELU) and Hugging Face's
# BertConfig (hidden_act="gelu"); our models default to the tanh form, which GPT-2's peer shares.
PEER_GELU = "gelu"


def _vit_ours(variant, quick):
  config = {"name": "vit", "variant": variant, "num_classes": 1000, "activation": PEER_GELU}
  if quick:
    config.update(variant="Ti/8", width=32, depth=1, num_heads=2, mlp_dim=64, num_classes=10)
  return config


def workloads(quick: bool):
  """name -> (unit, items per step, our runner factory, peer runner factory)."""
  px = 32 if quick else 224
  vit_peer = (
      dict(patch_size=8, embed_dim=32, depth=1, num_heads=2, mlp_ratio=2, num_classes=10)
      if quick
      else {}
  )
  gpt = GPT_QUICK if quick else GPT
  seq, batch = (16, 2) if quick else (256, 16)
  bert = (
      dict(width=32, depth=1, heads=2, vocab=64, seq=16, batch=2, masked=3)
      if quick
      else dict(width=256, depth=4, heads=4, vocab=30522, seq=128, batch=32, masked=20)
  )
  bert_ours = {
      "name": "bert_mlm",
      "variant": "base",
      "width": bert["width"],
      "depth": bert["depth"],
      "num_heads": bert["heads"],
      "mlp_dim": 4 * bert["width"],
      "vocab_size": bert["vocab"],
      "max_len": max(bert["seq"], 32),
      "dropout_rate": 0.1,
      "attention_dropout_rate": 0.1,
      "activation": PEER_GELU,
  }
  gpt2 = (
      dict(GPT_QUICK) if quick else dict(width=768, depth=12, heads=12, vocab=50257, max_len=1024)
  )
  prompt, new = (4, 8) if quick else (32, 128)
  vit_batch = 2 if quick else 32
  table = {
      "vit_ti16_train": (
          "img/s",
          vit_batch,
          lambda: ours.vit_train(_vit_ours("Ti/16", quick), vit_batch, px),
          lambda: peers.vit_train("vit_tiny_patch16_224", vit_batch, px, **vit_peer),
      ),
      "vit_s16_train": (
          "img/s",
          vit_batch,
          lambda: ours.vit_train(_vit_ours("S/16", quick), vit_batch, px),
          lambda: peers.vit_train("vit_small_patch16_224", vit_batch, px, **vit_peer),
      ),
      "gpt_train": (
          "tok/s",
          batch * seq,
          lambda: ours.gpt_train(_gpt_ours(gpt), batch, seq),
          lambda: peers.gpt_train(peers.gpt_config(**gpt), batch, seq),
      ),
      "bert_mlm_train": (
          "tok/s",
          bert["batch"] * bert["seq"],
          lambda: ours.bert_mlm_train(bert_ours, bert["batch"], bert["seq"], bert["masked"]),
          lambda: peers.bert_mlm_train(
              bert["width"],
              bert["depth"],
              bert["heads"],
              bert["vocab"],
              bert["batch"],
              bert["seq"],
              bert["masked"],
          ),
      ),
      "gpt2_124m_train": (
          "tok/s",
          2 * (16 if quick else 512),
          lambda: ours.gpt_train(_gpt_ours(gpt2), 2, 16 if quick else 512),
          lambda: peers.gpt_train(peers.gpt_config(**gpt2), 2, 16 if quick else 512),
      ),
      "matmul_fp32": (
          "GFLOP/s",
          2 * (256 if quick else 4096) ** 3 / 1e9,
          lambda: ours.matmul(256 if quick else 4096),
          lambda: peers.matmul(256 if quick else 4096),
      ),
  }
  for b in (1, 8):
    table[f"gpt_decode_b{b}"] = (
        "tok/s",
        b * new,
        lambda b=b: ours.gpt_decode(_gpt_ours(gpt), b, prompt, new),
        lambda b=b: peers.gpt_decode(peers.gpt_config(**gpt), b, prompt, new),
    )
  llama = LLAMA_QUICK if quick else LLAMA
  table["llama_train"] = (
      "tok/s",
      batch * seq,
      lambda: ours.gpt_train(_llama_ours(llama), batch, seq),
      lambda: peers.gpt_train(_llama_peer(llama), batch, seq),
  )
  for b in (1, 8):
    table[f"llama_decode_b{b}"] = (
        "tok/s",
        b * new,
        lambda b=b: ours.gpt_decode(_llama_ours(llama), b, prompt, new),
        lambda b=b: peers.gpt_decode(_llama_peer(llama), b, prompt, new),
    )
  # Not a peer: ours with grouped-query attention against ours with every head's keys and values.
  table["llama_gqa_vs_mha"] = (
      "tok/s",
      8 * new,
      lambda: ours.gpt_decode(_llama_ours(llama), 8, prompt, new),
      lambda: ours.gpt_decode(_llama_ours(llama, kv_heads=llama["heads"]), 8, prompt, new),
  )
  # The same pair where the KV cache weighs: a 1,024-slot cache (512-token prompts, 512 new), whose
  # reads at 6 key-value heads are 38 MB a step against the weights' 50 MB, 13 MB at 2.
  long_prompt = long_new = 16 if quick else 512
  llama_long = dict(llama, max_len=long_prompt + long_new)
  table["llama_gqa_vs_mha_long"] = (
      "tok/s",
      8 * long_new,
      lambda: ours.gpt_decode(_llama_ours(llama_long), 8, long_prompt, long_new),
      lambda: ours.gpt_decode(
          _llama_ours(llama_long, kv_heads=llama["heads"]), 8, long_prompt, long_new
      ),
  )
  s2s = SEQ2SEQ_QUICK if quick else SEQ2SEQ
  s2s_batch = 2 if quick else 64
  table["seq2seq_train"] = (
      "tok/s",
      s2s_batch * s2s["target_len"],
      lambda: ours.seq2seq_train(
          _seq2seq_ours(s2s), s2s_batch, s2s["input_len"], s2s["target_len"]
      ),
      lambda: peers.marian_train(
          _seq2seq_peer(s2s), s2s_batch, s2s["input_len"], s2s["target_len"]
      ),
  )
  table["seq2seq_beam4"] = (  # tokens of the best beam per sentence
      "tok/s",
      s2s_batch * s2s["target_len"],
      lambda: ours.seq2seq_beam(
          _seq2seq_ours(s2s), s2s_batch, s2s["input_len"], s2s["target_len"], 4
      ),
      lambda: peers.marian_beam(
          _seq2seq_peer(s2s), s2s_batch, s2s["input_len"], s2s["target_len"], 4
      ),
  )
  return table


def measure(make_ours, make_peer, warmup: int, rounds: int, steps: int):
  """Median seconds per step of ours and the peer, timed in alternating rounds."""
  runners = {"ours": make_ours(), "peer": make_peer()}
  for run in runners.values():
    for _ in range(warmup):
      run()
  times = {side: [] for side in runners}
  for _ in range(rounds):
    for side, run in runners.items():
      for _ in range(steps):
        start = time.perf_counter()
        run()
        times[side].append(time.perf_counter() - start)
  return {side: statistics.median(t) for side, t in times.items()}


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--quick", action="store_true", help="tiny shapes: a smoke run")
  parser.add_argument("--only", nargs="+", help="run only these workloads")
  parser.add_argument("--json", help="write the results to this file")
  parser.add_argument("--rounds", type=int, default=None)
  args = parser.parse_args()
  rounds = args.rounds or (1 if args.quick else 5)
  results = []
  print(f"{'workload':<18} {'unit':<8} {'ours':>10} {'peer':>10} {'ratio':>7}", flush=True)
  for name, (unit, items, make_ours, make_peer) in workloads(args.quick).items():
    if args.only and name not in args.only:
      continue
    few = name.startswith(
        ("gpt2", "gpt_decode", "llama_decode", "llama_gqa", "seq2seq_beam")
    )  # slow units: fewer of them
    seconds = measure(
        make_ours,
        make_peer,
        warmup=1 if args.quick else 2,
        rounds=rounds,
        steps=1 if (args.quick or few) else 3,
    )
    row = {
        "workload": name,
        "unit": unit,
        "ours": items / seconds["ours"],
        "peer": items / seconds["peer"],
    }
    results.append(row)
    print(
        f"{name:<18} {unit:<8} {row['ours']:>10.1f} {row['peer']:>10.1f} "
        f"{row['ours'] / row['peer']:>6.2f}x",
        flush=True,
    )
  vit = next((r for r in results if r["workload"] == "vit_ti16_train"), None)
  if vit is not None and (not args.only or "input_pipeline" in args.only):
    with tempfile.TemporaryDirectory() as data_dir:
      input_pipeline.prepare(data_dir, 16 if args.quick else 256)
      rate = input_pipeline.images_per_sec(
          data_dir,
          batch_size=8 if args.quick else 32,
          batches=2 if args.quick else 20,
          warmup=1 if args.quick else 3,
      )
    row = {
        "workload": "input_pipeline",
        "unit": "img/s",
        "ours": rate,
        "peer": vit["ours"],
        "per_core": rate / input_pipeline.cores(),
    }
    results.append(row)
    print(
        f"{'input_pipeline':<18} {'img/s':<8} {rate:>10.1f} {vit['ours']:>10.1f} "
        f"{rate / vit['ours']:>6.2f}x  (peer column: our ViT-Ti step's consumption; "
        f"{row['per_core']:.1f} img/s/core)",
        flush=True,
    )
  info = {
      "device": jax.devices()[0].device_kind,
      "cores": input_pipeline.cores(),
      "quick": args.quick,
      "results": results,
  }
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(info, f, indent=2)


if __name__ == "__main__":
  main()
