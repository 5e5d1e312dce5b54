"""Our trainer's whole step beside the JAX peers' own steps on this machine's CPU, and beside our
bare model step, so whatever the trainer adds is measured and named.

  BIG_VISION=/path/to/big_vision NANODO=/path/to/nanodo \\
      python -m benchmarks.cpu_steps [--quick] [--rounds 5] [--only vit_ti16 gpt]

Workloads (fp32, as both sides run on a CPU):
  vit_ti16: ViT-Ti/16, batch 32, 224 px. Ours is the trainer's jitted step (`train.jit_update_step`)
    for configs/vit.py's ImageNet-1k recipe at Ti/16; the peer is big_vision's update_fn for its
    configs/vit_i1k.py at Ti/16 (benchmarks/jax_peers.py). Both: sigmoid loss, Adam with a bf16
    first moment, clipping at 1.0, decoupled weight decay.
  gpt: a 6-layer, 384-wide, 6-head GPT, vocabulary 8,192, batch 16 x 256 tokens. Ours is the
    trainer's step for configs/gpt.py at that shape; the peer is nanodo's trainer step for its
    model at that shape with configs/gpt.py's AdamW and schedule in its names
    (jax_peers.nanodo_optimizer; nanodo runs it under optax.MultiSteps and has no biases).
Rows per workload: the trainer's step; the same with its non-finite guard as a `where` per leaf
(TPU's form) instead of a lax.cond between the update and keeping the state (CPU's); the same
without the guard; the bare step (value_and_grad of the task's loss, the
optimizer update, nothing logged); the peer's step. Every row is jitted with its state donated.

All rows of a workload are built and warmed up (compiled) first, then timed in interleaved
rounds: each round runs `--steps` steps of every row in turn, so load changes hit all rows alike.
Medians of per-step wall time and of the process's CPU time over the same step. Without a peer's
checkout variable, its row is left out. `--quick` shrinks every shape (a smoke run, seconds).
"""

import argparse
import os

from vit_jax import startup

startup.set_cpu_xla_defaults()  # ours runs as the trainer does
import jax  # noqa: E402  # pylint: disable=wrong-import-position

from benchmarks import checkouts as checkouts_lib  # noqa: E402
from benchmarks import jax_peers  # noqa: E402  # pylint: disable=wrong-import-position
from benchmarks import step_timing  # noqa: E402  # pylint: disable=wrong-import-position
from vit_jax.tpu_planning import pod_table  # noqa: E402  # pylint: disable=wrong-import-position


def workloads(quick: bool) -> dict:
  """name -> (unit, items per step, our recipe's flags, peer name, peer builder)."""
  vit_batch, px = (4, 32) if quick else (32, 224)
  # nanodo's DoConfig names; F = 4 D, our GPT's MLP width.
  gpt = dict(D=64, H=2, L=32, N=1, F=256) if quick else dict(D=384, H=6, L=256, N=6, F=1536)
  gpt_batch, vocab = (2, 512) if quick else (16, 8192)
  vit_variant = "Ti/16"
  vit_flags = (
      f"--config=configs/vit.py:dataset=imagenet2012,variant={vit_variant}",
      f"--config.batch_size={vit_batch}",
      "--config.model.dtype=float32",
      f"--config.image_size={px}",
  )
  if quick:
    vit_flags += ("--config.model.depth=1",)
  gpt_flags = (
      "--config=configs/gpt.py:dataset=c4,variant=pico",
      "--config.tokenizer.kind=byte_bpe",
      f"--config.tokenizer.vocab_size={vocab}",
      f"--config.model.width={gpt['D']}",
      f"--config.model.depth={gpt['N']}",
      f"--config.model.num_heads={gpt['H']}",
      f"--config.seq_len={gpt['L']}",
      f"--config.batch_size={gpt_batch}",
  )
  return {
      "vit_ti16": (
          "img/s",
          vit_batch,
          vit_flags,
          "big_vision",
          lambda checkout: jax_peers.big_vision(
              checkout,
              variant=vit_variant,
              batch_size=vit_batch,
              image_size=px,
              depth=1 if quick else None,
          ),
      ),
      "gpt": (
          "tok/s",
          gpt_batch * gpt["L"],
          gpt_flags,
          "nanodo",
          lambda checkout: jax_peers.nanodo(
              checkout,
              shape=gpt,
              vocab=vocab,
              batch_size=gpt_batch,
              optimizer_overrides=jax_peers.nanodo_optimizer(
                  pod_table.config_of(gpt_flags, step_timing.ROOT)
              ),
          ),
      ),
  }


def our_steps(config, setup) -> dict:
  """The trainer's step, its guard's variants, and the bare step."""
  # pylint: disable=g-import-not-at-top
  import optax

  from vit_jax.training import train

  task, model, tx = setup.task, setup.model, setup.tx

  def bare_step(state, batch):
    def loss_fn(params):
      outputs = task.apply(model, params, batch, train=True, rng=setup.step_rng)
      return task.loss(outputs, batch, task.totals(batch))[0]

    loss, grads = jax.value_and_grad(loss_fn)(state["params"])
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    params = optax.apply_updates(state["params"], updates)
    return {"params": params, "opt_state": opt_state, "step": state["step"] + 1}, loss

  return {
      "ours, the trainer's step": train.jit_update_step(config, setup),
      "ours, the guard as a select (as on TPU)": train.jit_update_step(
          config, setup, guard_by_select=True
      ),
      "ours, without the non-finite guard": train.jit_update_step(
          config, setup, guard_nonfinite=False
      ),
      "ours, bare (loss, gradients, update)": jax.jit(bare_step, donate_argnums=(0,)),
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--quick", action="store_true", help="tiny shapes: a smoke run")
  parser.add_argument("--only", nargs="+", choices=tuple(workloads(quick=False)), help="these only")
  parser.add_argument("--rounds", type=int, default=None)
  parser.add_argument("--steps", type=int, default=3, help="steps per row per round")
  options = parser.parse_args()
  checkouts = {peer: checkouts_lib.checkout_from_environment(peer) for peer in jax_peers.PEERS}
  rounds = options.rounds or (1 if options.quick else 5)
  for name, (unit, items, flags, peer, build_peer) in workloads(options.quick).items():
    if options.only and name not in options.only:
      continue
    runners = step_timing.our_runners(flags, our_steps)
    if checkouts[peer]:
      # nanodo's step donates its tokens too: each call gets its own copy.
      runners[f"{peer}, its own step"] = step_timing.peer_runner(
          build_peer(checkouts[peer]), fresh_inputs=peer == "nanodo"
      )
    seconds = step_timing.measure(
        runners, warmup=1 if options.quick else 2, rounds=rounds, steps=options.steps
    )
    reference = seconds.get(f"{peer}, its own step")
    print(f"\n{name}: {items} {unit.split('/')[0]} per step, {os.cpu_count()} cores\n")
    print(f"| step | ms per step | {unit} | {unit.split('/')[0]} per CPU-second | vs the peer |")
    print("|---|---|---|---|---|")
    for row, (wall_s, cpu_s) in seconds.items():
      ratio = f"{reference[0] / wall_s:.2f}x" if reference else "-"
      rates = f"{items / wall_s:,.1f} | {items / cpu_s:,.1f}"
      print(f"| {row} | {wall_s * 1e3:.1f} | {rates} | {ratio} |", flush=True)


if __name__ == "__main__":
  main()
