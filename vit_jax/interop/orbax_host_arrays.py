"""Host (numpy) arrays saved to and restored from orbax a few at a time, never copied whole.

Orbax's own NumpyHandler deep-copies every array of a save and then writes them all at once,
so that saving a converted checkpoint held its weights about three times over (the tree, the
copy, TensorStore's encoded chunks); restoring reads every array at once likewise. This one
subclasses it and writes the same files and metadata (typestr "np.ndarray": our loaders and
orbax's read them as ever), without the copy (a converter's tree is its own: nothing changes it
while it is saved) and with at most `IN_FLIGHT_BYTES` of arrays (or one larger array) being
written or read at a time: a save or a restore then holds the tree and one array's buffers.
"""

import jax
import numpy as np
import orbax.checkpoint as ocp

# Arrays written or read together, up to this many bytes; groups of small arrays (norms,
# biases) then share one TensorStore commit, which costs about as much as a few MB of data.
IN_FLIGHT_BYTES = 16 * 2**20


def _groups(items: list, nbytes) -> list:
  """`items` in order, in consecutive groups of at most IN_FLIGHT_BYTES (or one item)."""
  groups, size = [[]], 0
  for item in items:
    if groups[-1] and size + nbytes(item) > IN_FLIGHT_BYTES:
      groups.append([])
      size = 0
    groups[-1].append(item)
    size += nbytes(item)
  return [g for g in groups if g]


class FewAtATimeNumpyHandler(ocp.type_handlers.NumpyHandler):
  """orbax's NumpyHandler, without its deep copy and with IN_FLIGHT_BYTES in flight."""

  def __init__(self):
    super().__init__(deepcopy_host_arrays=False)

  async def _background_serialize(self, values, infos, args=None):
    args = args or [ocp.SaveArgs()] * len(values)
    for group in _groups(list(zip(values, infos, args)), lambda item: item[0].nbytes):
      values_g, infos_g, args_g = (list(column) for column in zip(*group))
      await super()._background_serialize(values_g, infos_g, args_g)

  async def deserialize(self, infos, args=None):
    args = args or [ocp.RestoreArgs()] * len(infos)
    restored = []
    for info, arg in zip(infos, args):  # reads, unlike writes, cost little beside their data
      restored += await super().deserialize([info], [arg])
    return restored


# Orbax's own handlers but for numpy arrays (a tree with jax.Arrays is saved as orbax would).
_REGISTRY = ocp.type_handlers.create_type_handler_registry(
    (np.ndarray, FewAtATimeNumpyHandler()),
    (jax.Array, ocp.type_handlers.get_type_handler(jax.Array)),
)


class StandardSaveFewAtATime(ocp.StandardCheckpointHandler):
  """StandardCheckpointHandler (its checks, files and name in a step's metadata) whose numpy
  arrays are written by FewAtATimeNumpyHandler: its PyTreeCheckpointHandler (`_impl`, as in
  orbax-checkpoint 0.12) is given our handlers, which it takes no argument for."""

  def __init__(self):
    super().__init__()
    self._impl = ocp.PyTreeCheckpointHandler(type_handler_registry=_REGISTRY)

  @classmethod
  def typestr(cls) -> str:
    return ocp.StandardCheckpointHandler.typestr()


def restore(state_dir: str, tree: dict) -> dict:
  """The arrays of `tree` ({key: subtree} of some of a saved tree's top-level keys, each leaf
  with the dtype to read it in: its metadata, or a ShapeDtypeStruct) restored from one step's
  `state_dir` as numpy arrays, one at a time; the other keys are not read."""
  restore_args = jax.tree.map(lambda leaf: ocp.RestoreArgs(np.ndarray, leaf.dtype), tree)
  with ocp.Checkpointer(ocp.PyTreeCheckpointHandler(type_handler_registry=_REGISTRY)) as reader:
    return reader.restore(
        state_dir,
        args=ocp.args.PyTreeRestore(item=tree, restore_args=restore_args, partial_restore=True),
    )
