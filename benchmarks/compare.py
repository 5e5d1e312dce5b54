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

GPT = dict(width=384, depth=6, heads=6, vocab=8192, max_len=256)
GPT_QUICK = dict(width=32, depth=1, heads=2, vocab=64, max_len=32)
# The encoder-decoder beside a Marian model of its shape: sentences of 32 source tokens, 32 target
# tokens (training) or 32 new ones (decoding, 4 beams, 64 sentences a batch).
S2S = dict(width=256, depth=3, heads=4, mlp=1024, vocab=8000, max_len=128)
S2S_QUICK = dict(width=32, depth=1, heads=2, mlp=64, vocab=64, max_len=32)


def _seq2seq_ours(shape):
  return {
      "name": "seq2seq",
      "width": shape["width"],
      "num_layers": shape["depth"],
      "num_heads": shape["heads"],
      "mlp_dim": shape["mlp"],
      "vocab_size": shape["vocab"],
      "max_len": shape["max_len"],
      "pre_ln": False,  # Marian's blocks are post-LN
      "dropout_rate": 0.0,
  }


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
  s2s, length = (S2S_QUICK, 8) if quick else (S2S, 32)
  table["seq2seq_train"] = (
      "tok/s",
      32 * length,
      lambda: ours.seq2seq_train(_seq2seq_ours(s2s), 32, length, length),
      lambda: peers.marian_train(peers.marian_config(**s2s), 32, length, length),
  )
  table["seq2seq_beam4_b64"] = (
      "sent/s",
      64,
      lambda: ours.seq2seq_beam_decode(_seq2seq_ours(s2s), 64, length, length, 4),
      lambda: peers.marian_beam_decode(peers.marian_config(**s2s), 64, length, length, 4),
  )
  for b in (1, 8):
    table[f"gpt_decode_b{b}"] = (
        "tok/s",
        b * new,
        lambda b=b: ours.gpt_decode(_gpt_ours(gpt), b, prompt, new),
        lambda b=b: peers.gpt_decode(peers.gpt_config(**gpt), b, prompt, new),
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
    few = name.startswith(("gpt2", "gpt_decode", "seq2seq_beam"))  # slow units: fewer of them
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
