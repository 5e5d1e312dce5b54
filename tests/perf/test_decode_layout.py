"""The compiled decoder reads its KV cache and LM head in place (issue 13's decode profile).

On XLA:CPU a (B, S, H, K) cache made every decoding step copy the whole cache into head-major
order before the attention products (a quarter of a batch-8 step), and the LM head read the
(V, D) embedding transposed, which XLA:CPU's product of a few rows runs up to 10x slower. These
tests compile the real decoder and look for both in its optimized HLO, and for the grouped-query
step's products over its cache.
"""

import re

import jax
import numpy as np

from vit_jax.models import build_model
from vit_jax.models import sampling

# Sizes chosen so that no other array of the step has the cache's element count.
BATCH, PROMPT, NEW = 3, 5, 19
GPT = {
    "name": "gpt",
    "variant": "pico",
    "width": 32,
    "depth": 2,
    "num_heads": 2,
    "vocab_size": 97,
    "max_len": 64,
}
HEADS, HEAD_DIM, SLOTS = 2, 16, PROMPT + NEW


# Grouped-query: two key-value heads, each read by two query heads of width 8.
GQA = dict(GPT, num_heads=4, num_kv_heads=2)


def compiled_decoder_hlo(config=GPT):
  model = build_model(config)
  params = model.init(jax.random.PRNGKey(0), np.zeros((1, 8), np.int32))["params"]
  tokens_BxN = np.ones((BATCH, SLOTS), np.int32)
  decode = sampling._compiled_decoder(config, tokens_BxN.shape, PROMPT, 0.0, 0, 1.0)
  lowered = decode.lower(
      params,
      tokens_BxN,
      np.full(BATCH, PROMPT, np.int32),
      np.int32(NEW),
      np.int32(-1),
      jax.random.PRNGKey(0),
  )
  return lowered.compile().as_text()


def while_body(hlo):
  """The instructions of the token loop's body computation (not of the computations it calls)."""
  body = re.search(r" while\(.*?body=%?([\w.\-]+)", hlo).group(1)
  lines, inside = [], False
  for line in hlo.splitlines():
    if re.match(rf"%?{re.escape(body)} ", line):
      inside = True
    elif inside and line.startswith("}"):
      return lines
    elif inside:
      lines.append(line)
  raise AssertionError(f"while body {body} not found")


def result_elements(line):
  """Element count of an HLO instruction's (first) result shape, or None."""
  match = re.search(r"= \(?[a-z0-9]+\[([0-9,]*)\]", line)
  if match is None:
    return None
  return int(np.prod([int(d) for d in match.group(1).split(",") if d]))


def test_no_step_copies_or_transposes_the_cache():
  cache_elements = BATCH * SLOTS * HEADS * HEAD_DIM
  body = while_body(compiled_decoder_hlo())
  assert any(result_elements(line) == cache_elements for line in body)  # the cache is there
  moves = [
      line.strip()[:160]
      for line in body
      if re.search(r"transpose|copy", line.split("=", 1)[0] + line.split("=", 1)[-1][:60])
      and result_elements(line) == cache_elements
  ]
  assert not moves, "whole-cache copies or transposes in the decoder:\n" + "\n".join(moves)


def loop_instructions(hlo):
  """The instructions of the token loop's body and of every computation it calls (fusions)."""
  computations, current = {}, None
  for line in hlo.splitlines():
    header = re.match(r"(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
    if header:
      current = computations.setdefault(header.group(1), [])
    elif line.startswith("}"):
      current = None
    elif current is not None:
      current.append(line)
  pending = [re.search(r" while\(.*?body=%?([\w.\-]+)", hlo).group(1)]
  seen, lines = set(), []
  while pending:
    name = pending.pop()
    if name in seen:
      continue
    seen.add(name)
    lines += computations[name]
    for line in computations[name]:
      pending += re.findall(r"(?:calls|to_apply)=%?([\w.\-]+)", line)
  return lines


def test_grouped_decode_reads_the_cache_without_matrix_products():
  """XLA:CPU runs a grouped step's products over the cache as batched matrix products two query
  heads wide, slowly (attention.grouped_one_query_attention): no dot in the loop may take the
  cache (per computation, the instructions of the cache's shape)."""
  cache_shape = f"f32[{BATCH},2,{SLOTS},8]"  # (B, G, S, K)
  instructions = loop_instructions(compiled_decoder_hlo(GQA))
  assert any(cache_shape in line for line in instructions), "no cache found in the loop"
  reading = [line.strip()[:160] for line in instructions if " dot(" in line and cache_shape in line]
  cache_names = {
      match.group(1)
      for line in instructions
      if (match := re.match(rf"\s*(?:ROOT )?(%[\w.\-]+) = {re.escape(cache_shape)}", line))
  }
  reading += [
      line.strip()[:160]
      for line in instructions
      if " dot(" in line and set(re.findall(r"%[\w.\-]+", line.split(" dot(", 1)[1])) & cache_names
  ]
  assert not reading, "products over the grouped cache:\n" + "\n".join(reading)


def test_lm_head_reads_the_embedding_as_d_by_v():
  heads = [
      line
      for line in compiled_decoder_hlo().splitlines()
      if " dot(" in line and f"f32[{BATCH},{GPT['vocab_size']}]" in line.split("=", 1)[1][:30]
  ]
  assert heads, "no per-token LM head product found"
  for line in heads:  # the (D, V) copy: contracting its first dimension
    assert "rhs_contracting_dims={0}" in line, line[:200]


def test_transposed_head_gives_the_same_logits():
  model = build_model(GPT)
  tokens_BxT = np.arange(2 * 7, dtype=np.int32).reshape(2, 7) % GPT["vocab_size"]
  params = model.init(jax.random.PRNGKey(1), tokens_BxT)["params"]
  logits = model.apply({"params": params}, tokens_BxT)
  logits_dv = model.apply(
      {"params": params}, tokens_BxT, embedding_DxV=params["wte"]["embedding"].T
  )
  np.testing.assert_allclose(logits_dv, logits, rtol=1e-6, atol=1e-6)
