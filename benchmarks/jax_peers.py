"""The JAX peers' own train steps, built from their checkouts: big_vision's `update_fn` for its
ViT and nanodo's trainer step for its decoder-only transformer.

benchmarks/step_memory.py compiles them for a TPU slice beside our trainer's step, and
benchmarks/cpu_steps.py times them on this machine's CPU beside it. A `PeerStep` holds the
jitted step (its state donated), the state's and the other arguments' shapes, and how to make
real ones (initialized parameters, random inputs) for a run.

big_vision: its models/vit.py, and train.py's update_fn: value_and_grad of the configured loss,
its optax `make` with configs/vit_i1k.py's optimizer, apply_updates, and the three norms it logs;
its in-step mixup is left out (ours mixes on the host). nanodo: its model.py and model_factory,
loss.py, optimizer.py (under `optax.MultiSteps`, as its trainer always runs) and metrics.py, in
train.py's `_train_step` and the jit of its `Trainer`, written out here because train.py imports
clu's TensorBoard writer and with it TensorFlow.

Neither step touches data loading or file I/O, but both peers import their libraries at module
level (big_vision's utils.py: TensorFlow's gfile; nanodo's data.py: grain and TFDS). Where one is
not installed (a GPU machine with JAX alone), `_import_stand_ins` puts an empty module in its place,
whose every attribute is `object`, so the imports, annotations and base classes resolve; a call
into one would fail loudly, and none is made.
"""

import contextlib
import dataclasses
import importlib.util
import os
import sys
import types
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

PEERS = ("big_vision", "nanodo")  # their checkouts: benchmarks/checkouts.py


@dataclasses.dataclass
class PeerStep:
  step: Callable  # jitted, state donated: (state, *inputs) -> (state, metrics)
  abstract_state: Any  # the state's ShapeDtypeStructs
  abstract_inputs: tuple  # the other arguments' ShapeDtypeStructs
  init: Callable  # () -> the state, initialized
  example_inputs: Callable  # () -> the other arguments, random, of the real shapes and kinds


class _StandIn(types.ModuleType):

  def __getattr__(self, name):
    return object


@contextlib.contextmanager
def _import_stand_ins(*names: str):
  """Within the block, each dotted module name that is not installed (and its parents) is an
  empty stand-in; afterwards only the modules imported within hold them."""
  # flax.io asks once whether TF is installed, to pick its file API: it must see the truth.
  import flax.io  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import

  added, absent = [], object()
  for name in names:
    if importlib.util.find_spec(name.split(".")[0]) is not None:
      continue
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
      dotted = ".".join(parts[:depth])
      if sys.modules.get(dotted) is None:  # absent, or None: an import known to fail
        added.append((dotted, sys.modules.get(dotted, absent)))
        sys.modules[dotted] = _StandIn(dotted)
      if depth > 1:
        setattr(sys.modules[".".join(parts[: depth - 1])], parts[depth - 1], sys.modules[dotted])
  try:
    yield
  finally:
    for dotted, before in added:
      if before is absent:
        del sys.modules[dotted]
      else:
        sys.modules[dotted] = before


def _shardings(mesh, state, inputs_batch_axis):
  """Replicated state, inputs split over `data` where `inputs_batch_axis` says so."""
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  by_data = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  return (
      jax.tree.map(lambda _: replicated, state),
      tuple(by_data if split else replicated for split in inputs_batch_axis),
  )


def big_vision(
    checkout: str,
    *,
    variant: str,
    batch_size: int,
    image_size: int = 224,
    dtype_mm: str = "float32",
    depth: int | None = None,
    mesh=None,
) -> PeerStep:
  """big_vision's update_fn for configs/vit_i1k.py at `variant` (its ViT, sigmoid loss, Adam with
  a bf16 first moment, clipping, decoupled weight decay). `mesh`: data parallel over its `data`
  axis, as big_vision's default sharding rules replicate a ViT; None: the default device.
  `depth`: fewer blocks than the variant's (smoke runs)."""
  sys.path.insert(0, checkout)
  # pylint: disable=g-import-not-at-top
  import flax.linen as nn
  import optax

  with _import_stand_ins("tensorflow.io.gfile"):
    from big_vision import optax as bv_optax
    from big_vision import utils as u
    from big_vision.models import vit

  spec = importlib.util.spec_from_file_location(
      "vit_i1k", os.path.join(checkout, "big_vision/configs/vit_i1k.py")
  )
  config_module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(config_module)
  config = config_module.get_config(f"variant={variant}")
  model_config = {**config.model, **({"depth": depth} if depth else {})}
  model = vit.Model(num_classes=config.num_classes, dtype_mm=dtype_mm, **model_config)
  image = jnp.zeros((1, image_size, image_size, 3))
  init_params = lambda: nn.unbox(model.init(jax.random.PRNGKey(0), image)["params"])
  params = jax.eval_shape(init_params)
  total_steps = config.total_epochs * 1_281_167 // config.input.batch_size
  tx, _ = bv_optax.make(
      config, params, sched_kw=dict(total_steps=total_steps, batch_size=batch_size, data_size=1)
  )

  def update_fn(train_state, rng, batch):  # train.py's, mixup left out
    step_count = bv_optax.get_count(train_state["opt"], jittable=True)
    rng = jax.random.fold_in(rng, step_count)
    rng, rng_model = jax.random.split(rng, 2)

    def loss_fn(params):
      logits, _ = model.apply(
          {"params": params}, batch["image"], train=True, rngs={"dropout": rng_model}
      )
      return getattr(u, config.loss)(logits=logits, labels=batch["labels"])

    params, opt = train_state["params"], train_state["opt"]
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt = tx.update(grads, opt, params)
    params = optax.apply_updates(params, updates)
    measurements = {"training_loss": loss}
    for name, tree in (("l2_grads", grads), ("l2_params", params), ("l2_updates", updates)):
      measurements[name] = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(tree)))
    return {"params": params, "opt": opt}, measurements

  def init():
    params = init_params()
    return {"params": params, "opt": tx.init(params)}

  state = jax.eval_shape(init)
  inputs = (
      jax.ShapeDtypeStruct((2,), jnp.uint32),
      {
          "image": jax.ShapeDtypeStruct((batch_size, image_size, image_size, 3), jnp.float32),
          "labels": jax.ShapeDtypeStruct((batch_size, config.num_classes), jnp.float32),
      },
  )

  def example_inputs():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, config.num_classes, batch_size)
    return jax.random.PRNGKey(0), {
        "image": jnp.asarray(rng.standard_normal(inputs[1]["image"].shape), jnp.float32),
        "labels": jnp.asarray(np.eye(config.num_classes, dtype=np.float32)[labels]),
    }

  options = {}
  if mesh is not None:
    state_sharding, (rng_sharding, batch_sharding) = _shardings(mesh, state, (False, True))
    options = dict(
        in_shardings=(
            state_sharding,
            rng_sharding,
            jax.tree.map(lambda _: batch_sharding, inputs[1]),
        ),
        out_shardings=(state_sharding, rng_sharding),
    )
  step = jax.jit(update_fn, donate_argnums=(0,), **options)
  return PeerStep(step, state, inputs, init, example_inputs)


def nanodo_optimizer(config) -> dict:
  """Our config's AdamW and cosine schedule (`config.optimizer`, `config.total_steps`) in the
  names of nanodo's optimizer config. Its warmup starts from `init_learning_rate`, ours from 0;
  its weight decay is optax's, scaled by the learning rate (ours with decoupled_weight_decay
  False, as configs/gpt.py sets it)."""
  optimizer = config.optimizer
  return dict(
      peak_learning_rate=optimizer.lr,
      init_learning_rate=0.0,
      final_learning_rate=optimizer.lr * optimizer.end_lr_ratio,
      warmup_steps=optimizer.warmup_steps,
      num_train_steps=config.total_steps,
      b1=optimizer.b1,
      b2=optimizer.b2,
      weight_decay=optimizer.weight_decay,
      clip_by_global_norm=optimizer.grad_clip_norm,
  )


def nanodo(
    checkout: str,
    *,
    shape: dict,
    vocab: int,
    batch_size: int,
    dtype: str = "float32",
    optimizer_overrides: dict | None = None,
    mesh=None,
) -> PeerStep:
  """nanodo's trainer step for its model at `shape` (DoConfig's D, H, L, N, F), with its default
  config's optimizer updated by `optimizer_overrides`. Parameters replicated (fsdp_enabled=False,
  as a data-parallel mesh keeps them); `mesh`: its `data` axis splits the batch."""
  sys.path.insert(0, checkout)
  # pylint: disable=g-import-not-at-top
  from flax import linen as nn
  from flax.training.train_state import TrainState
  import optax

  with _import_stand_ins("grain.python", "tensorflow_datasets"):
    from nanodo import metrics as metrics_lib
    from nanodo import model_factory
    from nanodo import optimizer
    from nanodo.configs import default

  config = default.get_config()
  config.model.update(shape, dtype=dtype, fsdp_enabled=False)
  config.opt.update(optimizer_overrides or {})
  module, get_loss_fn = model_factory.get_model_and_loss(config, vocab)
  tokens = jax.ShapeDtypeStruct((batch_size, config.model.L), jnp.int32)

  def init():  # train.py _init_train_state's
    params = module.init(jax.random.PRNGKey(0), jnp.zeros((1, config.model.L), jnp.int32))
    return TrainState.create(
        apply_fn=module.apply, params=params["params"], tx=optimizer.get_optimizer(config.opt)
    )

  state = jax.eval_shape(init)
  constrain = lambda x: x
  if mesh is not None:
    by_data = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    constrain = lambda x: jax.lax.with_sharding_constraint(x, by_data)

  def train_step(state, in_BxL):  # train.py _train_step
    in_BxL = constrain(in_BxL)
    grad_fn = jax.value_and_grad(get_loss_fn(in_BxL, state.apply_fn, config), has_aux=True)
    (loss, aux_data), grads = grad_fn(state.params)
    updates, new_opt_state = state.tx.update(grads, state.opt_state, state.params)
    new_state = state.replace(
        step=state.opt_state.gradient_step + 1,
        params=optax.apply_updates(state.params, updates),
        opt_state=new_opt_state,
    )
    metrics = metrics_lib.get_metrics(aux_data, config, loss, state, grads, updates)
    return new_state, metrics

  options = {}
  if mesh is not None:  # Trainer's: the batch comes in replicated and is split in the step
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    shardings = nn.get_sharding(state, mesh)
    options = dict(in_shardings=(shardings, replicated), out_shardings=(shardings, replicated))
  step = jax.jit(train_step, donate_argnames=("state", "in_BxL"), **options)

  def example_inputs():
    rng = np.random.default_rng(0)
    # Token 0 is nanodo's padding id, which its loss weighs 0: real tokens only.
    return (jnp.asarray(rng.integers(1, vocab, tokens.shape), jnp.int32),)

  return PeerStep(step, state, (tokens,), init, example_inputs)
