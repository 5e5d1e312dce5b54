"""Our workdirs: `W/checkpoints/<step>/state` (orbax: {params, opt_state, step, and ema_params
when the run kept an EMA of its params}),
`W/checkpoints/<step>/model` (JSON record with the model config), the tokenizer in `W/tokenizer`
and the run's settings in `W/config.json` (see `assets`).

A written workdir holds {params, step=0}, the record, the tokenizer that came with the source and
a config.json naming the task, with no optimizer state: it is for fine-tuning
(`--config.init_from=W`), evaluation and `vit_jax.generate`, not for resuming a training run.
"""

import jax
import numpy as np
import orbax.checkpoint as ocp

from vit_jax import checkpoint
from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.interop import assets
from vit_jax.interop import flat_params
from vit_jax.interop import models
from vit_jax.interop import orbax_host_arrays


def find_step_dir(path: str) -> str:
  """The step directory of a workdir or `checkpoints/` dir (its latest finished step, step 0
  included), or `path` itself when it is one step's directory."""
  path = workdir_lib.checkpoints_of(path)
  if storage.isdir(storage.join(path, workdir_lib.STATE_ITEM)):
    return path
  steps = ocp.step.checkpoint_steps(path) if storage.isdir(path) else []
  if not steps:
    raise errors.ConversionError(
        f"{path} is not a vit_jax workdir or checkpoint: no finished checkpoint step with a "
        "'state' directory found."
    )
  step_dir = storage.join(path, str(max(steps)))
  if not storage.isdir(storage.join(step_dir, workdir_lib.STATE_ITEM)):
    raise errors.ConversionError(f"{step_dir} has no 'state' directory.")
  return step_dir


def _candidates(path: str) -> list[str]:
  """The step directories to try, newest first: every step of a workdir, or the one step given."""
  return checkpoint.step_dirs(path) or [find_step_dir(path)]


def read_params(path: str) -> dict:
  """Flat params as saved (stacked if the model scans its layers) from our workdir (its newest
  intact step), a `checkpoints/` dir or one step's dir. Arrays come back whole on this host,
  whatever mesh or process count saved them."""
  return checkpoint.first_intact(_candidates(path), _read_step_params)[1]


def _read_step_params(step_dir: str, ema: bool = False) -> dict:
  """Flat params of one step, read one array at a time as numpy arrays (the optimizer state
  is not read); `ema`: its EMA of the params instead, cast to the params' dtypes as it is read."""
  state_dir = storage.join(find_step_dir(step_dir), workdir_lib.STATE_ITEM)
  saved = checkpoint.saved_state_metadata(state_dir)
  key = checkpoint.EMA_PARAMS if ema else "params"
  if key not in saved:
    raise errors.ConversionError(
        f"{step_dir} holds no EMA of the params: its run did not set --config.ema_decay. "
        "Read its params instead (convert without --ema)."
    )
  tree = {key: saved[key]}
  if ema:  # read in the params' dtypes
    as_params = lambda m, p: jax.ShapeDtypeStruct(m.shape, p.dtype)
    tree = {key: jax.tree.map(as_params, saved[key], saved["params"])}
  return flat_params.flatten(orbax_host_arrays.restore(state_dir, tree)[key])


def read_state_dir(state_dir: str):
  """The whole train state saved in `state_dir` (params, optimizer state, step), restored onto
  this host's first device whatever mesh saved it."""
  tree = checkpoint.saved_state_metadata(state_dir)
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), tree)
  return ocp.StandardCheckpointer().restore(state_dir, target)


def read(path: str, ema: bool = False) -> models.Checkpoint:
  """Params of the newest intact step (or the step directory given), the recorded model config
  and the workdir's tokenizer. `ema`: the step's EMA of the params instead (a ConversionError if
  it has none)."""
  read_one = lambda step_dir: read_step(step_dir, ema)
  step_dir, (params, record) = checkpoint.first_intact(_candidates(path), read_one)
  workdir = storage.parent(storage.parent(step_dir))  # W/checkpoints/<step>
  notes = [f"read {step_dir}" + (" (the EMA of its params)" if ema else "")]
  return models.Checkpoint(
      params, dict(record["model"]), notes, assets.read_workdir_tokenizer(workdir)
  )


def read_step(step_dir: str, ema: bool = False):
  """(flat params, model record) of one step; any failure but a UserError marks the step
  damaged. `ema`: the EMA of the params instead."""
  record_dir = storage.join(step_dir, workdir_lib.MODEL_ITEM)
  if not storage.isdir(record_dir):
    raise FileNotFoundError(f"{step_dir} has no model record ('model' directory)")
  params = _read_step_params(step_dir, ema)
  return params, ocp.Checkpointer(ocp.JsonCheckpointHandler()).restore(record_dir)


def write(ckpt: models.Checkpoint, path: str, overwrite: bool = False) -> None:
  tree = ckpt.tree()
  task = {"tokenizer": ckpt.tokenizer.fingerprint} if ckpt.tokenizer is not None else {}
  record = checkpoint.model_record(ckpt.model, tree, task)
  with storage.output_path(path, overwrite) as staged:
    # The tree written as it is, a few arrays at a time (orbax's own writer copies it first).
    saver = checkpoint.Checkpointer(
        staged, 1, 1, record, state_handler=orbax_host_arrays.StandardSaveFewAtATime()
    )
    try:
      saver.save(0, {"params": tree, "step": np.zeros((), np.int32)}, force=True)
    finally:
      saver.close()
    assets.write_workdir_assets(staged, ckpt.model, ckpt.tokenizer)
