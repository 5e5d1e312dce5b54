"""attention_impl="auto" by platform: on a CPU the step is the XLA one, unchanged. For a TPU slice
the whole model's training step compiles ahead of time with splash attention, from this host
("auto" would pick XLA's at these short lengths: test_splash_attention.py has its rule).

The TPU test needs libtpu's compiler (no TPU): it runs in a venv with `jax[tpu]` installed, with
JAX_PLATFORMS=cpu, and skips where libtpu is absent.
"""

import functools
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests import helpers
from vit_jax import tasks
from vit_jax.models import build_model
from vit_jax.training import mesh as mesh_lib
from vit_jax.training import optimizer as optimizer_lib
from vit_jax.training import train

VIT = {"name": "vit", "variant": "Ti/16", "depth": 2, "num_classes": 10}
GPT = {"name": "gpt", "variant": "pico", "vocab_size": 50, "max_len": 200}


def gpt_batch(batch=4, length=200):
  """Packed documents (segments 1, 2) then padding (0), as the causal LM task feeds them."""
  tokens_BxT = jax.random.randint(jax.random.PRNGKey(0), (batch, length), 0, 50)
  segments_T = jnp.where(jnp.arange(length) < 80, 1, 2) * (jnp.arange(length) < 190)
  return tokens_BxT, None, jnp.broadcast_to(segments_T, (batch, length))


def vit_batch(batch=4):
  return (jax.random.normal(jax.random.PRNGKey(0), (batch, 32, 32, 3)),)


def loss_fn(model):
  return lambda params, inputs: jnp.mean(jnp.sin(model.apply({"params": params}, *inputs)))


def test_auto_is_the_xla_step_on_cpu(digits_dir):
  """The trainer's own step with "auto" lowers to the same program as with "xla", and gives the
  same loss and gradients."""
  config = helpers.vit_config("runlocal", data_dir=digits_dir, progress="lines", batch_size=8)
  task = tasks.build_task(config, workdir=None)
  tx, schedule = optimizer_lib.build_optimizer(config.optimizer, config.total_steps)
  batch = next(iter(task.train_batches(0, 0, 1)))
  lowered, results = {}, {}
  for impl in ("xla", "auto"):
    model_config = {**config.model.to_dict(), **task.model_overrides(), "attention_impl": impl}
    model = build_model(model_config)
    params = model.init(jax.random.PRNGKey(0), *task.init_inputs())["params"]
    state = {"params": params, "opt_state": tx.init(params), "step": np.int32(0)}
    step = jax.jit(
        functools.partial(
            train.update_step,
            task=task,
            model=model,
            tx=tx,
            schedule=schedule,
            step_rng=jax.random.PRNGKey(1),
        )
    )
    lowered[impl] = step.lower(state, batch).as_text()
    results[impl] = jax.tree.leaves(step(state, batch))
  assert lowered["auto"] == lowered["xla"]
  for a, b in zip(results["auto"], results["xla"]):
    np.testing.assert_array_equal(a, b)


def test_auto_gpt_with_packed_segments_is_the_xla_program_on_cpu():
  inputs = gpt_batch()
  programs = []
  for impl in ("xla", "auto"):
    model = build_model({**GPT, "attention_impl": impl})
    params = model.init(jax.random.PRNGKey(0), inputs[0][:, :8])["params"]
    grad = jax.jit(jax.value_and_grad(loss_fn(model)))
    programs.append(grad.lower(params, inputs).as_text())
  assert programs[0] == programs[1]


def tpu_slice(topology="v5p:2x2x1"):
  if importlib.util.find_spec("libtpu") is None:
    pytest.skip("needs libtpu's compiler: pip install 'jax[tpu]' in a separate venv")
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  return topologies.get_topology_desc(topology_name=topology, platform="tpu").devices


@pytest.mark.tpu_compile  # run by scripts/test_tpu_compile.sh, in the venv with libtpu
@pytest.mark.parametrize("config, inputs", [(VIT, vit_batch), (GPT, gpt_batch)], ids=["vit", "gpt"])
def test_training_step_compiles_for_a_tpu_slice_with_splash_attention(config, inputs):
  """Forward, backward and an AdamW update over a data x model mesh of a 4-chip v5p slice."""
  mesh = mesh_lib.make_mesh("data:2,model:2", tpu_slice())
  model = build_model({**config, "dtype": "bfloat16", "attention_impl": "splash"})
  example = inputs()
  tx = optax.adamw(1e-3, mu_dtype=jnp.bfloat16)

  def step(params, opt_state, inputs):
    loss, grads = jax.value_and_grad(loss_fn(model))(params, inputs)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  abstract_params = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), *example)["params"])
  abstract_opt = jax.eval_shape(tx.init, abstract_params)
  shardings = mesh_lib.tree_shardings((abstract_params, abstract_opt), mesh)
  abstract = lambda tree, shard: jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shard
  )
  batch = mesh_lib.batch_sharding(mesh)
  abstract_inputs = jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=batch), example
  )
  with jax.set_mesh(mesh):  # how attention learns the target platform (and mesh) at trace time
    state = abstract((abstract_params, abstract_opt), shardings)
    lowered = jax.jit(step).lower(*state, abstract_inputs)
  hlo = lowered.compile().as_text()
  # Splash's forward and its fused backward kernel (dq, dk, dv) are Mosaic custom calls.
  assert hlo.count("tpu_custom_call") >= 2
