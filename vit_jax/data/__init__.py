"""Input data: image/ (TFDS, folders, digits, synthetic shapes), text/ and tokenizers/.

Each family checks its own config (image/checks.py, text/checks.py) before training. Within
`opened_once()` (a training run, an evaluate command) whatever a source opens through `opened`
is opened once, so the checks, the input pipeline and the evaluators share it.
"""

import contextlib
from typing import Callable, Hashable, TypeVar

SPLIT_KEYS = ("train_split", "eval_split")  # the config keys that name a split of the dataset

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
