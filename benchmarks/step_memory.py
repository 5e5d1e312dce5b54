"""Per-chip memory and memory traffic of the ViT-B/16 ImageNet-1k train step, ours beside
big_vision's, compiled for one TPU slice with libtpu on any machine (nothing runs).

  JAX_PLATFORMS=cpu BIG_VISION=/path/to/big_vision \\
      .venv-tpu/bin/python benchmarks/step_memory.py [--topology v5p-8] [--batch_size 1024]

Rows: big_vision's step (its models/vit.py with bf16 matmuls, `dtype_mm="bfloat16"`, and the
update of its train.py: value_and_grad of the sigmoid loss, its optax `make` with
configs/vit_i1k.py's optimizer, apply_updates, the three norms it logs), then ours, the trainer's
own step (`vit_jax.compile`) for configs/vit.py's i1k recipe: as published (bf16, splash
attention on TPU), with XLA's attention, and with XLA's attention in fp32. Both sides use the
same batch, slice, data-parallel mesh, sigmoid loss and optimizer (Adam with a bf16 first
moment, clipping at 1.0, decoupled weight decay). big_vision's mixup runs inside its step and
ours on the host: it is left out of its step here. Without BIG_VISION only our rows print.

Columns, per chip: peak (arguments + outputs - donated + temporaries + code, what must fit in
HBM), temporaries, XLA's FLOPs and XLA's estimate of the bytes its ops read and write. Then,
for each step, the largest buffers live at its peak (vit_jax/tpu_planning/peak_buffers.py).
Results: benchmarks/README.md.
"""

import argparse
import importlib
import os
import sys
import tempfile

import jax
import jax.numpy as jnp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from vit_jax.tpu_planning import aot  # noqa: E402
from vit_jax.tpu_planning import peak_buffers  # noqa: E402
from vit_jax.tpu_planning import pod_table  # noqa: E402

RECIPE = "--config=configs/vit.py:dataset=imagenet2012,variant=B/16"
OURS = {
    "ours, the recipe (bf16, splash attention)": (),
    "ours, bf16, XLA attention": ("--config.model.attention_impl=xla",),
    "ours, fp32, XLA attention": (
        "--config.model.attention_impl=xla",
        "--config.model.dtype=float32",
    ),
}


def _figures(compiled, peak) -> dict:
  memory = compiled.memory_analysis()
  cost = compiled.cost_analysis()
  cost = (cost[0] if isinstance(cost, (list, tuple)) else cost) or {}
  return {
      "peak": aot.device_bytes(memory),
      "temp": memory.temp_size_in_bytes,
      "flops": cost.get("flops", 0.0),
      "bytes": cost.get("bytes accessed", 0.0),
      "buffers": peak,
  }


def _compile(lowered, keep_dir=None):
  """The compiled step and its peak buffers; XLA's files stay in `keep_dir` if given."""
  with tempfile.TemporaryDirectory() as dump_dir:
    dump_dir = keep_dir or dump_dir
    compiled = lowered.compile(
        compiler_options={**peak_buffers.DUMP_OPTIONS, "xla_dump_to": dump_dir}
    )
    return compiled, peak_buffers.read(dump_dir)


def ours(extra_args, topology: str, batch_size: int, keep_dir=None) -> dict:
  # pylint: disable=g-import-not-at-top
  from vit_jax import tasks
  from vit_jax.training import train

  args = (RECIPE, f"--config.batch_size={batch_size}", *extra_args)
  config = pod_table.config_of(args, ROOT)
  devices = aot.parse_topology(topology).devices()
  setup = train.prepare(config, tasks.build_task_without_data(config), devices)
  state, batch = setup.abstract_inputs(batch_size)
  with jax.set_mesh(setup.mesh):
    lowered = train.jit_update_step(config, setup).lower(state, batch)
  return _figures(*_compile(lowered, keep_dir))


def big_vision(checkout: str, topology: str, batch_size: int, keep_dir=None) -> dict:
  """big_vision's update_fn (train.py) for its vit_i1k.py B/16 config, bf16 matmuls."""
  sys.path.insert(0, checkout)
  # pylint: disable=g-import-not-at-top
  from big_vision import optax as bv_optax
  from big_vision import utils as u
  from big_vision.models import vit
  import flax.linen as nn
  import optax

  spec = importlib.util.spec_from_file_location(
      "vit_i1k", os.path.join(checkout, "big_vision/configs/vit_i1k.py")
  )
  config_module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(config_module)
  config = config_module.get_config("variant=B/16")
  model = vit.Model(num_classes=config.num_classes, dtype_mm="bfloat16", **config.model)
  images = jax.ShapeDtypeStruct((batch_size, 224, 224, 3), jnp.float32)
  params = nn.unbox(
      jax.eval_shape(
          lambda rng: model.init(rng, jnp.zeros((1, 224, 224, 3)))["params"], jax.random.PRNGKey(0)
      )
  )
  total_steps = 300 * 1_281_167 // config.input.batch_size
  tx, _ = bv_optax.make(
      config, params, sched_kw=dict(total_steps=total_steps, batch_size=batch_size, data_size=1)
  )
  opt = jax.eval_shape(tx.init, params)

  def update_fn(train_state, rng, batch):  # train.py update_fn, mixup left out
    step_count = bv_optax.get_count(train_state["opt"], jittable=True)
    rng = jax.random.fold_in(rng, step_count)
    rng, rng_model = jax.random.split(rng, 2)

    def loss_fn(params):
      logits, _ = model.apply(
          {"params": params}, batch["image"], train=True, rngs={"dropout": rng_model}
      )
      return u.sigmoid_xent(logits=logits, labels=batch["labels"])

    params, opt = train_state["params"], train_state["opt"]
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt = tx.update(grads, opt, params)
    params = optax.apply_updates(params, updates)
    measurements = {"training_loss": loss}
    for name, tree in (("l2_grads", grads), ("l2_params", params), ("l2_updates", updates)):
      measurements[name] = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(tree)))
    return {"params": params, "opt": opt}, measurements

  mesh = jax.sharding.Mesh(aot.parse_topology(topology).devices(), ("data",))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  by_data = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  state = {"params": params, "opt": opt}
  state_sharding = jax.tree.map(lambda _: replicated, state)
  batch = {
      "image": images,
      "labels": jax.ShapeDtypeStruct((batch_size, config.num_classes), jnp.float32),
  }
  step = jax.jit(
      update_fn,
      donate_argnums=(0,),
      in_shardings=(state_sharding, replicated, jax.tree.map(lambda _: by_data, batch)),
      out_shardings=(state_sharding, replicated),
  )
  lowered = step.lower(state, jax.ShapeDtypeStruct((2,), jnp.uint32), batch)
  return _figures(*_compile(lowered, keep_dir))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--topology", default="v5p-8")
  parser.add_argument("--batch_size", type=int, default=1024)
  parser.add_argument("--buffers", type=int, default=8, help="largest peak buffers per step")
  parser.add_argument("--dump_dir", help="keep XLA's memory files here, a folder per row")
  options = parser.parse_args()

  def keep(row: int):
    return os.path.join(options.dump_dir, str(row)) if options.dump_dir else None

  rows = {}
  checkout = os.environ.get("BIG_VISION")
  if checkout and not os.path.isfile(os.path.join(checkout, "big_vision/models/vit.py")):
    print(
        f"error: BIG_VISION={checkout} has no big_vision/models/vit.py; give the root folder of "
        "a google-research/big_vision checkout",
        file=sys.stderr,
    )
    sys.exit(2)
  if checkout:
    rows["big_vision, bf16 matmuls, XLA attention"] = big_vision(
        checkout, options.topology, options.batch_size, keep(0)
    )
  for index, (name, extra) in enumerate(OURS.items(), 1):
    rows[name] = ours(extra, options.topology, options.batch_size, keep(index))
  gib = 2**30
  print(f"\nViT-B/16 ImageNet-1k train step, {options.topology}, batch {options.batch_size}:\n")
  print("| step | peak GiB / chip | temporaries GiB | TFLOP / chip | bytes accessed |")
  print("|---|---|---|---|---|")
  for name, row in rows.items():
    print(
        f"| {name} | {row['peak'] / gib:.2f} | {row['temp'] / gib:.2f} | "
        f"{row['flops'] / 1e12:.2f} | {row['bytes'] / 1e12:.3f} TB |"
    )
  for name, row in rows.items():
    if row["buffers"]:
      print(f"\n{name}:\n{row['buffers'].text(rows=options.buffers)}")


if __name__ == "__main__":
  main()
