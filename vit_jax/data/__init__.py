"""Input data: image/ (TFDS, folders, digits, synthetic shapes), text/ and tokenizers/.

Each family checks its own config (image/sources.py, text/checks.py) before training. Within
`opened_once()` (a training run, an evaluate command) whatever a source opens through `opened`
is opened once, so the checks, the input pipeline and the evaluators share it.
"""

import contextlib
import dataclasses
import importlib
import os
from typing import Callable, Hashable, TypeVar

from vit_jax import errors
from vit_jax import startup

SPLIT_KEYS = ("train_split", "eval_split")  # the config keys that name a split of the dataset
HUB_PREFIX = "hf:"  # a Hugging Face hub dataset or a folder of one (data/hub.py)
# The readers of parquet, jsonl.zst, the Hugging Face hub and webdataset shards need the data extra.
INSTALL_DATA = 'pip install -e ".[data]"'


@dataclasses.dataclass(frozen=True)
class ReadOptions:
  """How a config says its dataset is read, beside its name and data_dir (`read_options`): the
  field or column that holds text (files: jsonl and parquet, hf:), or the two that hold a pair's
  source and target (both None: the dataset is read as documents), images and labels (label_key is
  also the field of a wds: sample's KEY.json that holds its class), an hf: dataset's subset and
  held-out slice, what an image that does not decode is ("error" refuses it, else (skip, None) it
  is left out with a warning) and what a files: document that is not text is ("error" refuses it,
  "skip" leaves it out). A field is None where the config has no such key (an image config has no
  text_key)."""

  text_key: str | None = None
  source_key: str | None = None
  target_key: str | None = None
  image_key: str | None = None
  label_key: str | None = None
  hf_subset: str | None = None
  hf_holdout: int | None = None
  bad_images: str | None = None
  bad_documents: str | None = None


def read_options(config) -> ReadOptions:
  """The config's ReadOptions: the value of each of its keys that the config has."""
  names = [field.name for field in dataclasses.fields(ReadOptions)]
  return ReadOptions(**{name: config[name] for name in names if name in config})


_T = TypeVar("_T")
_opened: dict[Hashable, object] | None = None  # key -> opened thing, inside `opened_once()`


@contextlib.contextmanager
def opened_once():
  """Within the block, `opened` opens each key once; nested blocks share the outer one's."""
  global _opened
  outer = _opened
  _opened = {} if outer is None else outer
  try:
    yield
  finally:
    _opened = outer


def opened(key: Hashable, open_fn: Callable[[], _T]) -> _T:
  """`open_fn()`, or inside `opened_once()` what it returned for `key` the first time."""
  if _opened is None:
    return open_fn()
  if key not in _opened:
    _opened[key] = open_fn()
  return _opened[key]


def import_extra(module: str, needed_by: str):
  """Module `module` of the data extra, imported; a MissingExtraError naming the install command
  for `needed_by` (what reads it) where the extra is not installed."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    raise errors.MissingExtraError(
        f"{needed_by} needs the data extra ({module} is not installed): {INSTALL_DATA}"
    ) from e


# The share of the host's memory that tf.data's autotuner may fill with its buffers.
AUTOTUNE_RAM_FRACTION = 0.25


def tf_data_options():
  """The tf.data settings of every input pipeline (image train and eval, TFDS text reads), for
  hosts of many cores such as a TPU v5p host (benchmarks/input_pipeline.py sets its cores against
  the step's needs).

  - A deterministic order, for exact resume.
  - A private thread pool per pipeline, as large as the cores this process may use: the train
    pipeline and an eval pass that runs beside its prefetch each get their own pool instead of
    queueing in TF's one shared pool (big_vision sets one of 48 threads,
    big_vision/input_pipeline.py `_add_tpu_host_options`).
  - One thread per op: the parallelism is across examples (`num_parallel_calls`), and nested
    op-level threads would oversubscribe the cores.
  - An autotune RAM budget of AUTOTUNE_RAM_FRACTION of the host's memory, fixed up front:
    autotune's default, half of the memory free when the pipeline starts, does not leave room for
    what fills after it (the shuffle buffer of encoded images, which autotune does not count, and
    the trainer's host copies of checkpoints).
  """
  tf = startup.import_tensorflow()  # runs on embedded text load no TF

  options = tf.data.Options()
  options.deterministic = True
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  options.threading.private_threadpool_size = cores
  options.threading.max_intra_op_parallelism = 1
  memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  options.autotune.ram_budget = int(AUTOTUNE_RAM_FRACTION * memory)
  return options
