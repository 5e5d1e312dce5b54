"""Published initializations and dropout placement: GPT-2's and BERT's init std per parameter
group, ViT's learned position table, and dropout applied once on a residual branch."""

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import build_model
from vit_jax.models import transformer

P = 0.5


def mlp_branch_outputs(hidden_dropout: bool):
  """(dropped, deterministic) MLP branch of a pre-LN block whose attention branch is zeroed."""
  cfg = transformer.BlockConfig(
      num_heads=2, mlp_dim=64, dropout_rate=P, mlp_hidden_dropout=hidden_dropout
  )
  x_BxLxD = jax.random.normal(jax.random.PRNGKey(0), (16, 64, 32))
  block = transformer.EncoderBlock(cfg)
  params = block.init(jax.random.PRNGKey(1), x_BxLxD)["params"]
  attention_out = params["MultiHeadDotProductAttention_1"]["out"]
  attention_out = jax.tree.map(jnp.zeros_like, attention_out)
  params = flax.core.unfreeze(params)
  params["MultiHeadDotProductAttention_1"]["out"] = attention_out
  train = transformer.EncoderBlock(cfg, deterministic=False)
  dropped = train.apply({"params": params}, x_BxLxD, rngs={"dropout": jax.random.PRNGKey(2)})
  plain = block.apply({"params": params}, x_BxLxD)
  return np.asarray(dropped - x_BxLxD), np.asarray(plain - x_BxLxD)


@pytest.mark.parametrize("hidden_dropout", [False, True])
def test_mlp_branch_is_dropped_once(hidden_dropout):
  """One dropout zeroes a fraction p of the branch outputs (dropping twice: 1 - (1-p)^2, 0.75
  at p=0.5), with or without ViT's extra dropout after the MLP activation."""
  dropped, _ = mlp_branch_outputs(hidden_dropout)
  np.testing.assert_allclose(np.mean(dropped == 0), P, atol=0.02)


def test_mlp_branch_variance_matches_one_dropout():
  """Without hidden dropout the kept outputs are the plain branch scaled by 1/(1-p), so the
  second moment grows by 1/(1-p) (2 at p=0.5; 4 if dropped twice)."""
  dropped, plain = mlp_branch_outputs(hidden_dropout=False)
  kept = dropped != 0
  np.testing.assert_allclose(dropped[kept], plain[kept] / (1 - P), rtol=1e-4, atol=1e-5)
  ratio = np.mean(dropped**2) / np.mean(plain**2)
  np.testing.assert_allclose(ratio, 1 / (1 - P), rtol=0.05)


def test_hidden_dropout_is_an_option():
  """ViT's MLP also drops after the activation: outputs are no longer the plain branch scaled."""
  dropped, plain = mlp_branch_outputs(hidden_dropout=True)
  kept = dropped != 0
  assert not np.allclose(dropped[kept], plain[kept] / (1 - P), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize(
    "config, hidden_dropout",
    [
        ({"name": "vit", "variant": "Ti/16"}, True),  # vision_transformer models_vit.py:91
        ({"name": "bert_mlm", "variant": "tiny"}, False),  # bert modeling.py:866-879
        ({"name": "bert_classifier", "variant": "tiny"}, False),
        ({"name": "gpt", "variant": "gpt2"}, False),  # gpt-2 src/model.py:115-121, no dropout
    ],
)
def test_each_family_drops_after_the_mlp_activation_as_its_reference(config, hidden_dropout):
  model = build_model(config)
  assert getattr(model, "bert", model).mlp_hidden_dropout is hidden_dropout


def stds(params) -> dict:
  flat = flax.traverse_util.flatten_dict(params, sep="/")
  return {path: float(np.std(np.asarray(v, np.float64))) for path, v in flat.items()}


def test_gpt2_init_std_per_parameter_group():
  """GPT-2 124M: weights N(0, 0.02) (gpt-2 src/model.py:53), token embedding 0.02 (line 155),
  positions 0.01 (line 153), residual output projections 0.02/sqrt(2 x 12) (paper section 2.3),
  biases 0, LayerNorm scales 1."""
  model = build_model({"name": "gpt", "variant": "gpt2", "vocab_size": 50257, "max_len": 1024})
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32)))
  assert shapes["params"]["wpe"]["embedding"].shape == (1024, 768)
  # Generating 124M values runs longer than it compiles: the full LLVM optimization for it.
  init = jax.jit(model.init, compiler_options={"xla_backend_optimization_level": 3})
  params = init(jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32))["params"]
  residual = 0.02 / np.sqrt(2 * 12)
  groups = {"wte": 0.02, "wpe": 0.01, "residual": residual, "weight": 0.02, "bias": 0.0}
  seen = {group: 0 for group in groups}
  for path, std in stds(params).items():
    if path.endswith("scale"):
      assert float(np.min(flax.traverse_util.flatten_dict(params, sep="/")[path])) == 1.0
      continue
    if path.startswith(("wte", "wpe")):
      group = path[:3]
    elif path.endswith("bias"):
      group = "bias"
    elif "/out/" in path or "Dense_1" in path:
      group = "residual"
    else:
      group = "weight"
    seen[group] += 1
    np.testing.assert_allclose(std, groups[group], rtol=0.03, atol=1e-7, err_msg=path)
  # 12 blocks: q, k, v, MLP in; attention out, MLP out; and their biases (+ LayerNorm biases).
  assert seen["weight"] == 48 and seen["residual"] == 24 and seen["wte"] == seen["wpe"] == 1


def test_bert_init_is_truncated_normal():
  """BERT's modeling.py create_initializer (line 375): truncated normal, range 0.02 (std of the
  truncated distribution 0.02 x 0.88), nothing beyond two standard deviations."""
  model = build_model({"name": "bert_mlm", "variant": "mini", "vocab_size": 1000, "max_len": 64})
  params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32))["params"]
  flat = flax.traverse_util.flatten_dict(params, sep="/")
  weights = {p: v for p, v in flat.items() if p.endswith(("kernel", "embedding"))}
  assert len(weights) > 20
  for path, value in weights.items():
    value = np.asarray(value)
    np.testing.assert_allclose(np.std(value), 0.02 * 0.8796, rtol=0.05, err_msg=path)
    assert np.max(np.abs(value)) <= 0.04 + 1e-6, path


@pytest.mark.parametrize("override, want", [({}, 192**-0.5), ({"posemb_init_std": 0.02}, 0.02)])
def test_vit_learned_position_table(override, want):
  """big_vision models/vit.py:49: N(0, 1/sqrt(width)); the original ViT's 0.02 is an option."""
  config = {"name": "vit", "variant": "Ti/4", "num_classes": 3, "posemb": "learn", **override}
  model = build_model(config)
  params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 64, 64, 3)))["params"]
  table = params["Transformer"]["posembed_input"]["pos_embedding"]
  np.testing.assert_allclose(float(np.std(table)), want, rtol=0.05)


def embedded_tokens(train: bool):
  """ViT's encoder input: patches + position table, then the embedding dropout (p = P)."""
  config = {"name": "vit", "variant": "Ti/4", "num_classes": 3, "posemb": "learn"}
  model = build_model({**config, "dropout_rate": P})
  images = jax.random.normal(jax.random.PRNGKey(0), (4, 16, 16, 3))
  params = model.init(jax.random.PRNGKey(1), images)["params"]
  _, state = model.apply(
      {"params": params},
      images,
      train=train,
      rngs={"dropout": jax.random.PRNGKey(2)},
      capture_intermediates=lambda module, _: module.name in ("posembed_input", "Dropout_0"),
  )
  captured = state["intermediates"]["Transformer"]
  before = captured["posembed_input"]["__call__"][0]
  after = captured["Dropout_0"]["__call__"][0]
  return np.asarray(before), np.asarray(after)


def test_vit_drops_its_embedded_tokens_in_training_only():
  """vision_transformer models_vit.py: dropout after the position embedding, off at eval."""
  before, after = embedded_tokens(train=True)
  np.testing.assert_allclose(np.mean(after == 0), P, atol=0.03)
  kept = after != 0
  np.testing.assert_allclose(after[kept], before[kept] / (1 - P), rtol=1e-5)
  before, after = embedded_tokens(train=False)
  np.testing.assert_array_equal(after, before)


def test_gpt_drops_its_embedded_tokens_in_training_only():
  """nanoGPT model.py: dropout after token + position embeddings, off at eval (no dropout key
  needed there)."""
  model = build_model({"name": "gpt", "variant": "pico", "vocab_size": 50, "dropout_rate": P})
  tokens = jax.random.randint(jax.random.PRNGKey(0), (2, 16), 0, 50)
  params = jax.jit(model.init)(jax.random.PRNGKey(1), tokens)["params"]

  def embedded(train: bool):
    _, state = model.apply(
        {"params": params},
        tokens,
        train=train,
        rngs={"dropout": jax.random.PRNGKey(2)} if train else {},
        capture_intermediates=lambda module, _: module.name == "Dropout_0",
    )
    return np.asarray(state["intermediates"]["Dropout_0"]["__call__"][0])

  after_train, after_eval = embedded(True), embedded(False)
  np.testing.assert_allclose(np.mean(after_train == 0), P, atol=0.03)
  kept = after_train != 0
  np.testing.assert_allclose(after_train[kept], after_eval[kept] / (1 - P), rtol=1e-5)
