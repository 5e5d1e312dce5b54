"""Offline seq2seq toy tasks a small model learns in minutes on a CPU.

  reverse:       'kqzpe'  -> 'epzqk'
  number_words:  '40213'  -> 'forty thousand two hundred thirteen'

Examples are generated from a seeded numpy Generator, so every run and every
machine sees the same data; training and validation use different seeds.
"""

import numpy as np

from vit_jax import errors

_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))
_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve "
    "thirteen fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
# Split tags keep train and validation examples from different streams.
_SPLIT_TAGS = {"train": 0, "validation": 1, "test": 2}


def number_to_words(n: int) -> str:
  """English words for 0 <= n < 1_000_000, e.g. 'one hundred twenty-three'."""
  if not 0 <= n < 1_000_000:
    raise ValueError(f"number_to_words handles 0..999999, got {n}.")
  if n < 20:
    return _ONES[n]
  if n < 100:
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
  if n < 1000:
    hundreds, rest = divmod(n, 100)
    words = f"{_ONES[hundreds]} hundred"
    return words + (f" {number_to_words(rest)}" if rest else "")
  thousands, rest = divmod(n, 1000)
  words = f"{number_to_words(thousands)} thousand"
  return words + (f" {number_to_words(rest)}" if rest else "")


def _reverse_example(rng: np.random.Generator, max_len: int):
  length = rng.integers(1, max_len + 1)
  source = "".join(rng.choice(_LETTERS, size=length))
  return source, source[::-1]


def _number_words_example(rng: np.random.Generator, max_len: int):
  # Uniform over the digit count first, so short numbers are not rare.
  digits = rng.integers(1, min(max_len, 6) + 1)
  n = int(rng.integers(0 if digits == 1 else 10 ** (digits - 1), 10**digits))
  return str(n), number_to_words(n)


def make_examples(
    task: str, num_examples: int, split: str = "train", seed: int = 0, max_len: int = 12
) -> list[tuple[str, str]]:
  """`num_examples` (source, target) string pairs of `task`.

  max_len bounds the source: letters for 'reverse', digits (<= 6) for
  'number_words'.
  """
  if task not in _MAKERS:
    raise errors.ConfigError(f"Unknown toy task {task!r}; known: {', '.join(_MAKERS)}.")
  if split not in _SPLIT_TAGS:
    raise errors.DataError(f"Unknown split {split!r}; use {sorted(_SPLIT_TAGS)}.")
  rng = np.random.default_rng([seed, _SPLIT_TAGS[split], list(_MAKERS).index(task)])
  return [_MAKERS[task](rng, max_len) for _ in range(num_examples)]


# Each task's example maker; the order seeds the streams (a task's data never changes).
_MAKERS = {"reverse": _reverse_example, "number_words": _number_words_example}
