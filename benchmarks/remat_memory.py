"""Peak train-step memory of ViT-S/16 with each remat policy (XLA's plan; nothing is run).

  python benchmarks/remat_memory.py [--batch_size 64]

Prints the temporaries (activations kept for the backward pass) per policy, with and without
scanned layers, and the ratio to the plain model. The step is the trainer's own (`update_step` in
vit_jax/training/train.py), compiled for abstract state and batch. docs/pod.md's note on remat and
scan_layers on the CPU backend comes from this command.
"""

import argparse
import functools

import jax
import jax.numpy as jnp
import ml_collections
import optax

from vit_jax.models import build_model
from vit_jax.models import transformer
from vit_jax.tasks import classification
from vit_jax.training import train


def train_step_temp_bytes(model_config: dict, batch_size: int, image_size: int = 224) -> int:
  """Bytes of temporaries (activations kept for the backward pass, workspaces) of one step."""
  num_classes = model_config["num_classes"]
  config = ml_collections.ConfigDict(
      {"image_size": image_size, "loss": "softmax_xent", "model": model_config}
  )
  task = classification.ImageClassification(config, num_classes=num_classes)
  model = build_model(model_config)
  tx = optax.adam(1e-3)

  def init_state(rng):
    params = model.init(rng, *task.init_inputs())["params"]
    return {"params": params, "opt_state": tx.init(params), "step": jnp.array(0, jnp.int32)}

  state = jax.eval_shape(init_state, jax.random.PRNGKey(0))
  batch = {
      "image": jax.ShapeDtypeStruct((batch_size, image_size, image_size, 3), jnp.float32),
      "label": jax.ShapeDtypeStruct((batch_size,), jnp.int32),
      "labels": jax.ShapeDtypeStruct((batch_size, num_classes), jnp.float32),
  }
  step = functools.partial(
      train.update_step,
      task=task,
      model=model,
      tx=tx,
      schedule=optax.constant_schedule(1e-3),
      step_rng=jax.random.PRNGKey(0),
  )
  compiled = jax.jit(step, donate_argnums=(0,)).lower(state, batch).compile()
  return int(compiled.memory_analysis().temp_size_in_bytes)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--batch_size", type=int, default=64)
  parser.add_argument("--variant", default="S/16")
  args = parser.parse_args()
  base = None
  print(f"ViT-{args.variant}, batch {args.batch_size}, 224 px: train-step temporaries")
  for scan in (False, True):
    for policy in transformer.REMAT_POLICIES:
      config = {
          "name": "vit",
          "variant": args.variant,
          "num_classes": 1000,
          "remat": policy,
          "scan_layers": scan,
      }
      temp = train_step_temp_bytes(config, args.batch_size)
      base = base or temp
      print(
          f"  scan_layers={scan!s:<5} remat={policy:<14} {temp / 2**20:9.1f} MiB"
          f"   x{temp / base:.2f}",
          flush=True,
      )


if __name__ == "__main__":
  main()
