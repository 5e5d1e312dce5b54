"""Our workdirs: `W/checkpoints/<step>/state` (orbax: {params, opt_state, step}) and
`W/checkpoints/<step>/model` (JSON record with the model config).

A written workdir holds {params, step=0} and the record, with no optimizer state: it is for
fine-tuning (`--config.init_from=W`) and evaluation, not for resuming a training run.
"""

import os

import numpy as np
import orbax.checkpoint as ocp

from vit_jax import checkpoint
from vit_jax import init_from
from vit_jax.interop import atomic
from vit_jax.interop import common


def read(path: str) -> common.Checkpoint:
  """Params of the latest step (or the step directory given) and the recorded model config."""
  candidates = checkpoint.step_dirs(path) or [init_from.find_step_dir(path)]
  step_dir, (params, record) = checkpoint.first_intact(candidates, read_step)
  params = {k: np.asarray(v) for k, v in params.items()}
  return common.Checkpoint(params, dict(record["model"]), [f"read {step_dir}"])


def read_step(step_dir: str):
  """(flat params, model record) of one step; any failure marks the step damaged."""
  record_dir = os.path.join(step_dir, "model")
  if not os.path.isdir(record_dir):
    raise FileNotFoundError(f"{step_dir} has no model record ('model' directory)")
  params = init_from.read_checkpoint(step_dir)
  return params, ocp.Checkpointer(ocp.JsonCheckpointHandler()).restore(record_dir)


def write(ckpt: common.Checkpoint, path: str, overwrite: bool = False) -> None:
  tree = ckpt.tree()
  record = checkpoint.model_record(ckpt.model, tree)
  with atomic.output_path(path, overwrite) as staged:
    saver = checkpoint.Checkpointer(staged, 1, 1, record)
    try:
      saver.save(0, {"params": tree, "step": np.zeros((), np.int32)}, force=True)
    finally:
      saver.close()
