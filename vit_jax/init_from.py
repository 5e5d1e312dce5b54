"""Fine-tuning: load pretrained parameters into a new model, from our workdir/checkpoint, an .npz
(original ViT or big_vision layout) or a Hugging Face model directory (see vit_jax.interop).

Shapes that differ for a known reason are adapted and reported: the classification head with
another class count is re-initialized (when allowed), a learned position table is resampled to
the new patch grid. Anything else that does not fit is an error listing the keys.
"""

import os

import flax.traverse_util
import jax
import numpy as np
import orbax.checkpoint as ocp

from vit_jax import checkpoint
from vit_jax import errors
from vit_jax.models import position

# Prefixes that older or other codebases put in front of the parameter names.
_PREFIXES = ("opt/target/", "params/")


class PretrainedMismatchError(errors.UserError, ValueError):
  """The pretrained parameters do not fit the model."""


def flatten(params) -> dict:
  return {"/".join(k): v for k, v in flax.traverse_util.flatten_dict(params).items()}


def unflatten(flat: dict):
  return flax.traverse_util.unflatten_dict({tuple(k.split("/")): v for k, v in flat.items()})


def read_npz(path: str) -> dict:
  """Flat {'a/b/c': array} from an .npz (never unpickles), without optimizer prefixes."""
  try:
    with np.load(path, allow_pickle=False) as data:
      flat = {k: data[k] for k in data.files}
  except (OSError, ValueError) as e:
    raise PretrainedMismatchError(f"Cannot read {path} as an .npz of parameters: {e}") from e
  for prefix in _PREFIXES:
    if flat and all(k.startswith(prefix) for k in flat):
      flat = {k[len(prefix):]: v for k, v in flat.items()}
  # pylint: disable-next=g-import-not-at-top
  from vit_jax.interop import vit_npz  # imported here: interop imports this module
  return vit_npz.from_big_vision(flat) if vit_npz.is_big_vision(flat) else flat


def find_step_dir(path: str) -> str:
  """The step directory of our workdir (latest step), a `checkpoints/` dir or one step's dir."""
  path = os.path.abspath(path)
  if os.path.isdir(os.path.join(path, "checkpoints")):
    path = os.path.join(path, "checkpoints")
  steps = [d for d in os.listdir(path) if d.isdigit()] if os.path.isdir(path) else []
  if steps:
    path = os.path.join(path, max(steps, key=int))
  if not os.path.isdir(os.path.join(path, "state")):
    raise PretrainedMismatchError(
        f"{path} is not a vit_jax workdir or checkpoint (no 'state' directory found).")
  return path


def read_checkpoint(path: str) -> dict:
  """Flat params from our workdir (latest step), a `checkpoints/` dir or one step's dir.

  Arrays come back whole on this host, whatever mesh or process count saved them.
  """
  candidates = checkpoint.step_dirs(path) or [find_step_dir(path)]  # newest intact step
  return checkpoint.first_intact(candidates, _read_state)[1]


def _read_state(step_dir: str) -> dict:
  state_dir = os.path.join(find_step_dir(step_dir), "state")
  checkpointer = ocp.StandardCheckpointer()
  metadata = checkpointer.metadata(state_dir)
  tree = getattr(metadata, "item_metadata", metadata)
  tree = getattr(tree, "tree", tree)
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), tree)
  state = checkpointer.restore(state_dir, target)
  return {k: np.asarray(v) for k, v in flatten(state["params"]).items()}


def read_pretrained(path: str) -> dict:
  if not os.path.exists(path):
    raise errors.MissingFileError(f"init_from={path!r} does not exist.")
  from vit_jax.interop import hf_format  # pylint: disable=g-import-not-at-top
  if hf_format.is_hf_dir(path):
    return hf_format.read(path).params
  return read_npz(path) if path.endswith(".npz") else read_checkpoint(path)


def merge(init_params, pretrained: dict, *, reinit_head: bool = True, prefix_tokens: int = 1,
          head_prefixes=("head/",), droppable_prefixes=("pre_logits/",)):
  """Returns (params shaped like `init_params` with pretrained values, list of notes).

  head_prefixes: the task's new head, initialized fresh when missing or of another shape
    (if reinit_head). droppable_prefixes: pretraining-only layers the new model does not have
    (ViT's pre-logits, BERT's MLM and NSP heads), dropped with a note.
  """
  is_head = lambda key: key.startswith(tuple(head_prefixes))
  target = flatten(init_params)
  notes, problems, merged = [], [], {}
  for key, init_value in target.items():
    if key not in pretrained:
      if is_head(key) and reinit_head:
        notes.append(f"{key}: not in the checkpoint, initialized fresh")
        merged[key] = init_value
      else:
        problems.append(f"missing in checkpoint: {key} {tuple(init_value.shape)}")
      continue
    value = np.asarray(pretrained[key])
    if value.shape == init_value.shape:
      merged[key] = value.astype(init_value.dtype)
    elif is_head(key) and reinit_head:
      notes.append(f"{key}: checkpoint {value.shape} -> model {tuple(init_value.shape)}, "
                   "re-initialized (different class count)")
      merged[key] = init_value
    elif key.endswith("pos_embedding"):
      slots = init_value.shape[1] - prefix_tokens
      side = int(round(slots ** 0.5))
      merged[key] = position.resample_grid_embedding(value, (side, side), prefix_tokens).astype(
          init_value.dtype)
      notes.append(f"{key}: resampled {value.shape} -> {tuple(init_value.shape)}")
    else:
      problems.append(f"shape mismatch: {key} checkpoint {value.shape}, model "
                      f"{tuple(init_value.shape)}")
  for key in sorted(set(pretrained) - set(target)):
    if key.startswith(tuple(droppable_prefixes)):
      notes.append(f"{key}: dropped (the new model has no such layer)")
    else:
      problems.append(f"unexpected in checkpoint: {key} {tuple(np.shape(pretrained[key]))}")
  if problems:
    raise PretrainedMismatchError(
        "The pretrained parameters do not fit this model (is it the same architecture and "
        "variant?):\n  " + "\n  ".join(problems[:40]) + ("\n  ..." if len(problems) > 40 else ""))
  return unflatten(merged), notes
