"""Checks that the Llama and encoder-decoder rows of `compare` time one shape on both sides.

  python -m benchmarks.same_shapes            # the rows' shapes, about 2 min on 2 cores
  python -m benchmarks.same_shapes --quick    # the smoke shapes

Llama: the peer's random weights go through the hub converter (`interop/hf_llama.py`) into our
model; the logits must agree and the greedy continuations be equal, at 2 and at all key-value
heads. Encoder-decoder: no converter reads Marian, so the parameter counts are compared, with the
initial loss (near ln V on both) and the beam search's output lengths as a sanity check.
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import torch
import transformers

from benchmarks import compare
from vit_jax.interop import flat_params
from vit_jax.interop import hf_llama
from vit_jax.models import build_model
from vit_jax.models import sampling


def _count(params) -> int:
  return sum(x.size for x in jax.tree.leaves(params))


def check_llama(shape, kv_heads):
  hf_config = compare._llama_peer(shape, kv_heads)  # pylint: disable=protected-access
  config = compare._llama_ours(shape, kv_heads)  # pylint: disable=protected-access
  torch.manual_seed(0)
  peer = transformers.LlamaForCausalLM(hf_config).eval()
  tensors = {k: v.detach().numpy() for k, v in peer.state_dict().items()}
  _, flat, _ = hf_llama.import_(hf_config.to_dict(), tensors)
  params = flat_params.unflatten(flat)
  model = build_model(config)
  tokens_BxT = np.random.default_rng(0).integers(0, shape["vocab"], (2, 24))
  ours_BxTxV = np.asarray(model.apply({"params": params}, jnp.asarray(tokens_BxT)))
  prompt = torch.from_numpy(tokens_BxT[:, :8])
  with torch.no_grad():
    peer_BxTxV = peer(torch.from_numpy(tokens_BxT)).logits.numpy()
    peer_new = peer.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        do_sample=False,
        max_new_tokens=12,
        min_new_tokens=12,
        pad_token_id=0,
    )[:, 8:]
  ours_new = sampling.generate(config, params, tokens_BxT[:, :8].tolist(), max_new_tokens=12)
  print(
      f"llama, {config['num_kv_heads']} kv heads: parameters ours {_count(params):,}, "
      f"peer {sum(p.numel() for p in peer.parameters()):,}; max |logit difference| "
      f"{np.abs(ours_BxTxV - peer_BxTxV).max():.1e}; greedy equal: {ours_new == peer_new.tolist()}"
  )


def check_seq2seq(shape):
  config = compare._seq2seq_ours(shape)  # pylint: disable=protected-access
  peer = transformers.MarianMTModel(compare._seq2seq_peer(shape))  # pylint: disable=protected-access
  model = build_model(config)
  rng = np.random.default_rng(0)
  vocab, target_len = shape["vocab"], shape["target_len"]
  sources_BxS = rng.integers(3, vocab, (4, shape["input_len"]))
  tokens_BxT = rng.integers(3, vocab, (4, target_len + 1))
  inputs, targets = tokens_BxT[:, :-1].copy(), tokens_BxT[:, 1:].copy()
  params = model.init(jax.random.PRNGKey(0), jnp.asarray(sources_BxS), jnp.asarray(inputs))
  params = params["params"]
  logits_BxTxV = model.apply({"params": params}, jnp.asarray(sources_BxS), jnp.asarray(inputs))
  log_p_BxTxV = jax.nn.log_softmax(logits_BxTxV)
  ours_loss = -jnp.mean(jnp.take_along_axis(log_p_BxTxV, jnp.asarray(targets)[..., None], -1))
  with torch.no_grad():
    peer_loss = peer(
        input_ids=torch.from_numpy(sources_BxS),
        decoder_input_ids=torch.from_numpy(inputs),
        labels=torch.from_numpy(targets),
    ).loss
  decoded = sampling.seq2seq_decode(
      config,
      params,
      sources_BxS,
      np.ones_like(sources_BxS),
      max_new_tokens=target_len,
      start_id=0,
      eos_id=None,
      beam_size=4,
  )
  trainable = sum(p.numel() for p in peer.parameters() if p.requires_grad)
  print(
      f"seq2seq: parameters ours {_count(params):,}, peer {trainable:,} (trainable); initial loss "
      f"ours {float(ours_loss):.2f}, peer {float(peer_loss):.2f}, ln V {np.log(vocab):.2f}; "
      f"beam-4 tokens per sentence: ours {sorted({len(d) for d in decoded})}"
  )


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--quick", action="store_true", help="the smoke shapes")
  quick = parser.parse_args().quick
  llama = compare.LLAMA_QUICK if quick else compare.LLAMA
  for kv_heads in (llama["kv_heads"], llama["heads"]):
    check_llama(llama, kv_heads)
  check_seq2seq(compare.SEQ2SEQ_QUICK if quick else compare.SEQ2SEQ)


if __name__ == "__main__":
  main()
