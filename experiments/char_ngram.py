"""The bar a character language model must clear: an interpolated Kneser-Ney character n-gram.

  python -m experiments.char_ngram --dataset=stream:embedded --order=6

Reads a `stream:` dataset exactly as `configs/gpt.py:dataset=stream:...` does (one text, its last
--holdout held out; vit_jax/data/text/stream.py), tokenizes it with the same character tokenizer
trained on the training text, counts every n-gram of the training text up to --order, and prints
the bits per character of the held-out text: each held-out character predicted from the --order
minus 1 characters before it in the whole stream (the first from the training text's last ones),
the characters the GPT's causal_lm evaluator scores, with the same unit (the nll of every token,
unknown characters included, over the characters that are not unknown).

The model is interpolated modified Kneser-Ney (Chen & Goodman 1998, section 3.5): three
discounts per order from the count-of-counts, continuation counts below the top order, and a
uniform distribution over the vocabulary at the bottom, so every character has a probability.
"""

import argparse
import collections
import json
import math
import sys

from vit_jax import errors
from vit_jax import startup
from vit_jax.data import tokenizers
from vit_jax.data.text import stream


class _Parser(argparse.ArgumentParser):

  def error(self, message):
    raise errors.ConfigError(
        f"{message}; usage: python -m experiments.char_ngram --dataset=stream:... [--order=6]"
    )


def parse_args(argv):
  parser = _Parser(prog="python -m experiments.char_ngram", description=__doc__.splitlines()[0])
  parser.add_argument("--dataset", default="stream:embedded", help="a stream: dataset")
  parser.add_argument("--order", type=int, default=6, help="the longest n-gram (context + 1)")
  parser.add_argument("--holdout", type=float, default=0.1, help="as --config.stream.holdout")
  args = parser.parse_args(argv)
  if not stream.is_stream(args.dataset):
    raise errors.ConfigError(
        f"--dataset={args.dataset}: name a stream: dataset (e.g. stream:embedded or "
        "stream:files:/path/book.txt), the protocol whose every held-out character is scored."
    )
  if args.order < 1:
    raise errors.ConfigError(f"--order={args.order} must be at least 1.")
  return args


def _discounts(counts) -> tuple[float, float, float]:
  """Chen & Goodman's D1, D2, D3+ from how many n-grams occur 1, 2, 3 and 4 times."""
  n = collections.Counter(c for c in counts if c <= 4)
  n1, n2, n3, n4 = (max(n[r], 1) for r in (1, 2, 3, 4))
  y = n1 / (n1 + 2 * n2)
  d = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
  # An estimate outside (0, r] (tiny or odd texts) is clipped to [0.1, r], so that every seen
  # context leaves some probability to the symbols it was never followed by.
  return tuple(min(max(x, 0.1), r + 1.0) for r, x in enumerate(d))


class KneserNey:
  """Counts of one text (a str of symbols); `prob(history, symbol)` over `vocab_size` symbols."""

  def __init__(self, text: str, order: int, vocab_size: int):
    self.order, self.vocab_size = order, vocab_size
    # counts[k]: each k-gram's count (raw at the top order, continuation counts below it: how
    # many distinct symbols precede it).
    counts = [None] * (order + 1)
    counts[order] = collections.Counter(text[i : i + order] for i in range(len(text) - order + 1))
    for k in range(order - 1, 0, -1):
      counts[k] = collections.Counter(gram[1:] for gram in counts[k + 1])
      if text[:k] not in counts[k]:  # the text's first k-gram occurs with no predecessor
        counts[k][text[:k]] = 1
    self.counts = counts
    self.discounts = [None] + [_discounts(counts[k].values()) for k in range(1, order + 1)]
    # Per context of each order: (total count, how many symbols follow it 1, 2 and 3+ times).
    self.contexts = [None] * (order + 1)
    for k in range(1, order + 1):
      table = collections.defaultdict(lambda: [0, 0, 0, 0])
      for gram, c in counts[k].items():
        row = table[gram[:-1]]
        row[0] += c
        row[min(c, 3)] += 1
      self.contexts[k] = dict(table)

  def prob(self, history: str, symbol: str) -> float:
    """P(symbol | the last order - 1 symbols of history), interpolated from unigrams up."""
    p = 1.0 / self.vocab_size
    for k in range(1, self.order + 1):
      context = history[len(history) - (k - 1) :] if k > 1 else ""
      if k > 1 and len(context) < k - 1:
        break  # the stream's first symbols: no longer context exists
      row = self.contexts[k].get(context)
      if row is None:
        break  # an unseen context: the lower orders' estimate stands (so do longer ones')
      total, n1, n2, n3 = row
      d = self.discounts[k]
      c = self.counts[k].get(context + symbol, 0)
      discounted = max(c - d[min(c, 3) - 1], 0.0) if c else 0.0
      backoff = (d[0] * n1 + d[1] * n2 + d[2] * n3) / total
      p = discounted / total + backoff * p
    return p


def evaluate(dataset: str, order: int, holdout: float) -> dict:
  """Bits per character of the held-out text (see the module docstring)."""
  text = stream.whole_text(dataset)
  tokenizer = tokenizers.build_tokenizer("char", stream.tokenizer_texts(dataset, holdout))
  train_N, held_out_M = stream.stream_tokens(dataset, tokenizer, holdout)
  # One str symbol per token id: slicing and hashing strings is what keeps the counting fast.
  train, held_out = ("".join(map(chr, ids.tolist())) for ids in (train_N, held_out_M))
  model = KneserNey(train, order, tokenizer.vocab_size - len(tokenizer.special_id_set()) + 1)
  whole = train + held_out
  unk = chr(tokenizer.unk_id)
  nll, chars = 0.0, 0
  for i in range(len(train), len(whole)):
    nll -= math.log(model.prob(whole[max(i - order + 1, 0) : i], whole[i]))
    chars += whole[i] != unk
  return {
      "dataset": dataset,
      "order": order,
      "train_chars": len(train),
      "held_out_chars": chars,
      "text_chars": len(text),
      "bits_per_char": nll / max(chars, 1) / math.log(2),
  }


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  print(json.dumps(evaluate(args.dataset, args.order, args.holdout)))
  return 0


def run() -> None:
  startup.quiet_startup()
  with errors.exit_on_user_error():
    code = main()
  sys.exit(code)


if __name__ == "__main__":
  run()
