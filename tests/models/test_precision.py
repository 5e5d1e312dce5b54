"""Mixed precision: a bf16 model multiplies in bf16 but keeps its parameters, softmax statistics,
layer norms, logits and loss in fp32; the accelerator recipes ask for it."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests import helpers
from vit_jax.models import build_model
from vit_jax.models import gpt
from vit_jax.sweep import checks as sweep_checks
from vit_jax.sweep import spec as sweep_spec

VIT = {"name": "vit", "variant": "Ti/16", "depth": 2, "num_classes": 10, "dtype": "bfloat16"}
GPT = {"name": "gpt", "variant": "pico", "vocab_size": 50, "max_len": 16, "dtype": "bfloat16"}


def equations(jaxpr):
  """Every equation of a jaxpr, those of nested jaxprs (jit, custom_jvp, remat) included."""
  for eqn in jaxpr.eqns:
    yield eqn
    for param in eqn.params.values():
      for sub in param if isinstance(param, (tuple, list)) else (param,):
        if isinstance(sub, jax.extend.core.ClosedJaxpr):
          yield from equations(sub.jaxpr)
        elif isinstance(sub, jax.extend.core.Jaxpr):
          yield from equations(sub)


def dtypes_by_primitive(fn, *args):
  """{primitive name: [(input dtypes, output dtypes, output rank), ...]} of the traced `fn`."""
  found = {}
  for eqn in equations(jax.make_jaxpr(fn)(*args).jaxpr):
    ins = tuple(str(v.aval.dtype) for v in eqn.invars if hasattr(v.aval, "dtype"))
    outs = tuple(str(v.aval.dtype) for v in eqn.outvars)
    found.setdefault(eqn.primitive.name, []).append((ins, outs, eqn.outvars[0].aval.ndim))
  return found


@pytest.mark.parametrize(
    "config, inputs",
    [
        (VIT, lambda: (jnp.ones((2, 32, 32, 3)),)),
        (GPT, lambda: (jnp.zeros((2, 16), jnp.int32),)),
    ],
    ids=["vit", "gpt"],
)
def test_bf16_model_multiplies_in_bf16_and_keeps_statistics_in_fp32(config, inputs):
  model = build_model({**config, "attention_impl": "xla"})
  params = jax.jit(model.init)(jax.random.PRNGKey(0), *inputs())["params"]
  assert {str(p.dtype) for p in jax.tree.leaves(params)} == {"float32"}

  def loss(params):
    logits = model.apply({"params": params}, *inputs())
    labels = jnp.zeros(logits.shape[:-1], jnp.int32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), logits

  found = dtypes_by_primitive(jax.value_and_grad(loss, has_aux=True), params)
  dots = found["dot_general"]
  bf16_dots = [d for d in dots if d[0] == ("bfloat16", "bfloat16")]
  # Q, K, V, out, two MLP matmuls and the two attention products per block, forward and backward.
  assert len(bf16_dots) >= 8 * 2 * 2
  # The rest read bf16 activations into fp32 outputs (logits) or are fp32 (the ViT head).
  assert all(outs == ("float32",) for ins, outs, _ in dots if ins != ("bfloat16", "bfloat16"))
  # Forward: softmax (attention and loss) and layer norm statistics; the attention weights are
  # 4-D or more (GELU may use exp in bf16). The backward pass sums bias gradients in bf16.
  forward = dtypes_by_primitive(loss, params)
  for name in ("reduce_max", "log", "rsqrt", "reduce_sum"):
    assert {outs for _, outs, _ in forward[name]} == {("float32",)}, name
  assert {outs for _, outs, rank in found["exp"] if rank >= 4} == {("float32",)}
  (value, logits), _ = jax.eval_shape(jax.value_and_grad(loss, has_aux=True), params)
  assert value.dtype == jnp.float32 and logits.dtype == jnp.float32


def test_gpt_backward_multiplies_in_bf16_up_to_the_fp32_logits():
  """The LM head's fp32 logits pass back a gradient rounded to bf16, so every product of the
  backward pass, the two vocabulary-sized ones included, takes bf16 operands."""
  model = build_model({**GPT, "attention_impl": "xla"})
  tokens = jnp.zeros((2, 16), jnp.int32)
  params = model.init(jax.random.PRNGKey(0), tokens)["params"]

  def loss(params):
    logits = model.apply({"params": params}, tokens)
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens).mean()

  dots = dtypes_by_primitive(jax.grad(loss), params)["dot_general"]
  assert {ins for ins, _, _ in dots} == {("bfloat16", "bfloat16")}


def test_fp32_logits_gradients_match_the_plain_products_within_bf16():
  h = jax.random.normal(jax.random.PRNGKey(0), (2, 8, 32), jnp.bfloat16)
  embedding = jax.random.normal(jax.random.PRNGKey(1), (64, 32), jnp.bfloat16)
  targets = jax.random.randint(jax.random.PRNGKey(2), (2, 8), 0, 64)

  def loss(logits_fn):
    return lambda h, e: optax.softmax_cross_entropy_with_integer_labels(
        logits_fn(h, e), targets
    ).sum()

  plain = lambda h, e: jnp.einsum("btd,vd->btv", h, e, preferred_element_type=jnp.float32)
  ours = jax.grad(loss(gpt.fp32_logits), argnums=(0, 1))(h, embedding)
  reference = jax.grad(loss(plain), argnums=(0, 1))(h, embedding)
  assert gpt.fp32_logits(h, embedding).dtype == jnp.float32
  for got, want in zip(ours, reference):
    assert got.dtype == want.dtype == jnp.bfloat16
    scale = float(jnp.abs(want.astype(jnp.float32)).max())
    diff = jnp.abs(got.astype(jnp.float32) - want.astype(jnp.float32)).max()
    assert float(diff) <= 2**-7 * scale


def test_fp32_logits_keep_a_float16_gradient_that_float16_would_flush_to_zero():
  """(softmax - one-hot) / tokens over 4 x 1024 tokens and 8,192 classes is mostly below float16's
  smallest value: the head's backward keeps it in fp32 for float16 operands."""
  tokens, vocab, width = 4 * 1024, 8192, 32
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  h = jax.random.normal(keys[0], (4, 1024, width), jnp.float32)
  embedding = jax.random.normal(keys[1], (vocab, width), jnp.float32) * 0.1
  targets = jax.random.randint(keys[2], (4, 1024), 0, vocab)

  def loss(h, e):
    logits = gpt.fp32_logits(h, e)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).sum() / tokens

  grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
  reference = grad(h, embedding)
  ours = grad(h.astype(jnp.float16), embedding.astype(jnp.float16))
  for got, want in zip(ours, reference):
    got, want = np.asarray(got, np.float32), np.asarray(want)
    assert np.linalg.norm(got - want) <= 1e-2 * np.linalg.norm(want)


RECIPES = {  # config argument -> first-moment dtype of Adam in the reference
    "configs/vit.py:dataset=imagenet2012": "bfloat16",
    "configs/bert.py:variant=base": None,
    "configs/gpt.py:variant=gpt2": None,
}


@pytest.mark.parametrize("config_arg, mu_dtype", RECIPES.items())
def test_accelerator_recipes_compute_in_bf16_with_fp32_params(config_arg, mu_dtype):
  path, _, arg = config_arg.partition(":")
  config = helpers.repo_file(path).get_config(arg)
  assert config.model.dtype == "bfloat16"
  assert config.model.get("param_dtype", "float32") == "float32"
  assert config.optimizer.mu_dtype == mu_dtype


@pytest.mark.parametrize(
    "sweep", ["experiments/sweeps/vit_i1k_paper.py", "experiments/sweeps/vit_i21k_paper.py"]
)
def test_paper_sweeps_train_in_bf16_with_a_bf16_first_moment(sweep):
  for run in sweep_spec.load(os.path.join(helpers.ROOT, sweep)).runs:
    config = sweep_checks.run_config(run)
    assert config.model.dtype == "bfloat16", run.name
    assert config.optimizer.mu_dtype == "bfloat16", run.name
