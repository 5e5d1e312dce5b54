"""experiments/char_ngram.py: the Kneser-Ney model against a hand computation and its
normalization, the whole command on a small stream, and its refusals (one line, exit code 2)."""

import json
import math
import os
import subprocess
import sys

import pytest

from experiments import char_ngram
from tests.sweep import helpers


def test_unigrams_by_hand():
  """'aab', order 1, 3 symbols: counts a 2, b 1; count-of-counts n1 = n2 = 1 (the missing n3,
  n4 count as 1), so Y = 1/3, D1 = 1/3, D2 = 1; the left-over mass (D1 + D2) / 3 = 4/9 spreads
  uniformly: P(a) = 1/3 + 4/27, P(b) = 2/9 + 4/27, P(c) = 4/27."""
  model = char_ngram.KneserNey("aab", order=1, vocab_size=3)
  assert model.discounts[1][:2] == pytest.approx((1 / 3, 1.0))
  assert model.prob("", "a") == pytest.approx(13 / 27)
  assert model.prob("", "b") == pytest.approx(10 / 27)
  assert model.prob("", "c") == pytest.approx(4 / 27)


@pytest.mark.parametrize("history", ["", "a", "ab", "the", "xyz", "qq", "he w"])
def test_every_context_is_a_distribution(history):
  text = "the cat sat on the mat. the hat. " * 20 + "abcab" * 30
  alphabet = sorted(set(text)) + ["q", "x"]  # two symbols the text never has
  model = char_ngram.KneserNey(text, order=4, vocab_size=len(alphabet))
  assert sum(model.prob(history, s) for s in alphabet) == pytest.approx(1.0, abs=1e-9)
  assert min(model.prob(history, s) for s in alphabet) > 0


def _command(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=helpers.ROOT)
  return subprocess.run(
      [sys.executable, "-m", "experiments.char_ngram", *map(str, args)],
      env=env,
      capture_output=True,
      text=True,
      timeout=300,
      cwd=helpers.ROOT,
  )


def test_command_scores_the_held_out_tail_and_longer_contexts_help(tmp_path):
  text = tmp_path / "book.txt"
  text.write_text("".join(f"line {i % 7} of a short and repetitive book.\n" for i in range(400)))
  results = {}
  for order in (1, 3, 6):
    done = _command(f"--dataset=stream:files:{text}", f"--order={order}")
    assert done.returncode == 0, done.stderr
    results[order] = json.loads(done.stdout.strip().splitlines()[-1])
  length = len(text.read_text())
  assert results[6]["held_out_chars"] == length - math.floor(0.9 * length)
  bits = [results[order]["bits_per_char"] for order in (1, 3, 6)]
  assert bits[0] > bits[1] > bits[2] > 0


@pytest.mark.parametrize(
    "args, says",
    [
        (["--dataset=embedded"], "name a stream: dataset"),
        (["--order=0"], "must be at least 1"),
        (["--orders=6"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, says):
  done = _command(*args)
  assert done.returncode == 2, done.stderr
  lines = done.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
