"""The contiguous-text protocol (`stream:` datasets): the exact split, every held-out token scored
exactly once by the sliding window, training windows that resume exactly, and a char-GPT that
trains on it, resumes exactly and reports bits per character."""

import math
import sys

import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs as configs
from vit_jax import interop
from vit_jax.data import tokenizers
from vit_jax.data.text import stream
from vit_jax.tasks import causal_lm
from vit_jax.training import train


def test_the_split_is_the_first_90_percent_of_characters_and_the_rest():
  text = stream.whole_text("stream:embedded")
  train_text = stream.split_text(text, "train", 0.1)
  held_out = stream.split_text(text, "validation", 0.1)
  assert train_text + held_out == text
  assert len(train_text) == math.floor(0.9 * len(text))


def test_files_are_read_whole_in_path_order(tmp_path):
  (tmp_path / "b.txt").write_text("second\n")
  (tmp_path / "a.txt").write_text("first\n\nparagraph\n")
  assert stream.whole_text(f"stream:files:{tmp_path}/*.txt") == "first\n\nparagraph\nsecond\n"


@pytest.mark.parametrize(
    "train_len,held_len,seq_len,stride",
    [(50, 37, 8, 8), (50, 37, 8, 3), (50, 37, 8, 1), (3, 20, 8, 5), (1, 5, 8, 8), (40, 64, 16, 16)],
)
def test_every_held_out_token_is_scored_exactly_once(train_len, held_len, seq_len, stride):
  train_N = np.arange(1, train_len + 1, dtype=np.int32)
  held_out_M = np.arange(1000, 1000 + held_len, dtype=np.int32)  # a token is its position + 1
  stream_T = np.concatenate([train_N, held_out_M])
  scored = []
  for row in stream.eval_windows(train_N, held_out_M, seq_len, stride):
    for i in np.flatnonzero(row["weights"]):
      target = row["targets"][i]
      scored.append(target)
      position = int(np.flatnonzero(stream_T == target)[0])
      assert row["inputs"][i] == stream_T[position - 1]  # predicted from the token before it
      context = i + 1  # inputs 0..i of the window are its context
      assert context >= min(seq_len - stride + 1, position)  # the least context the window gives
      np.testing.assert_array_equal(row["inputs"][: i + 1], stream_T[position - i - 1 : position])
  assert scored == list(held_out_M)  # each once, in order


def test_shards_split_the_windows_and_still_score_each_token_once():
  train_N, held_out_M = np.arange(1, 30), np.arange(100, 183)
  scored = []
  for shard in range(3):
    for batch in stream.eval_batches(
        train_N, held_out_M, batch_size=2, seq_len=8, stride=4, process_index=shard, process_count=3
    ):
      assert batch["inputs"].shape == (2, 8)
      scored.extend(batch["targets"][batch["weights"] > 0])
  assert sorted(scored) == list(held_out_M)


@pytest.mark.parametrize("windows", stream.WINDOWS)
def test_training_windows_resume_exactly_and_read_the_training_text(windows):
  tokens_N = np.arange(500, dtype=np.int32)
  read = lambda start, shard=0: stream.train_batches(
      tokens_N,
      batch_size=4,
      seq_len=16,
      seed=3,
      start_step=start,
      windows=windows,
      process_index=shard,
      process_count=2,
  )
  fresh = read(0)
  batches = [next(fresh) for _ in range(40)]  # sequential windows wrap around within 40 steps
  resumed = read(25)
  for k in range(25, 40):
    batch = next(resumed)
    for key in batch:
      np.testing.assert_array_equal(batch[key], batches[k][key])
  for batch in batches:
    np.testing.assert_array_equal(batch["targets"], batch["inputs"] + 1)  # contiguous windows
    assert batch["inputs"].min() >= 0 and batch["targets"].max() < 500
  other_shard = next(read(0, shard=1))
  assert not np.array_equal(other_shard["inputs"], batches[0]["inputs"])


def tiny_stream_gpt(text_file, steps):
  """A 1-layer char-GPT on a 20,000-character stream (2,000 held out), scored with stride 16."""
  config = configs.load("gpt", f"dataset=stream:files:{text_file}")
  config.model.update(width=32, depth=1, num_heads=2)
  config.seq_len, config.batch_size, config.total_steps = 32, 8, steps
  config.eval_every, config.checkpoint_every = steps, steps // 2
  config.eval_max_batches = None
  config.evals.eval.stride = 16
  return config


class Crash(Exception):
  pass


def test_a_char_gpt_trains_on_a_stream_resumes_exactly_and_reports_bits_per_char(
    tmp_path, monkeypatch
):
  text_file = tmp_path / "text.txt"
  text_file.write_text(stream.whole_text("stream:embedded")[:20_000], encoding="utf-8")
  straight = train.train_and_evaluate(tiny_stream_gpt(text_file, 8), str(tmp_path / "straight"))
  tokenizer = tokenizers.load_tokenizer(str(tmp_path / "straight" / "tokenizer"))
  _, held_out_M = stream.stream_tokens(f"stream:files:{text_file}", tokenizer, 0.1)
  assert len(held_out_M) == 2_000  # one token per character
  assert straight["eval/tokens"] == len(held_out_M)  # the whole held-out text, once
  assert straight["eval/bits_per_char"] == pytest.approx(straight["eval/bits_per_token"])  # chars
  assert straight["eval/unigram_bits_per_char"] > 4.0  # the held-out text's character entropy

  real_batches = causal_lm.CausalLM.train_batches

  def crash_before_step_6(self, start_step, *args):
    for step, batch in enumerate(real_batches(self, start_step, *args), start_step + 1):
      if step == 6:
        raise Crash("killed")
      yield batch

  resumed = str(tmp_path / "resumed")
  monkeypatch.setattr(causal_lm.CausalLM, "train_batches", crash_before_step_6)
  with pytest.raises(Crash):  # after the checkpoint at step 4
    train.train_and_evaluate(tiny_stream_gpt(text_file, 8), resumed)
  monkeypatch.setattr(causal_lm.CausalLM, "train_batches", real_batches)
  again = train.train_and_evaluate(tiny_stream_gpt(text_file, 8), resumed)
  a, b = interop.read_params(str(tmp_path / "straight")), interop.read_params(resumed)
  for key in a:
    np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-6, err_msg=key)
  assert again["eval/bits_per_char"] == pytest.approx(straight["eval/bits_per_char"], abs=1e-6)


@pytest.mark.parametrize(
    "config_arg,override,named",
    [
        ("dataset=stream:embedded", "--config.stream.holdout=1.5", "stream.holdout"),
        ("dataset=stream:embedded", "--config.evals.eval.stride=999", "evals.eval.stride"),
        ("dataset=stream:embedded", "--config.eval_split=test", "eval_split"),
        # Documents have no stride.
        ("dataset=embedded", "--config.evals.eval.stride=8", "evals.eval.stride"),
    ],
)
def test_bad_stream_settings_are_one_line(tmp_path, config_arg, override, named):
  from tests.survival import conftest as survival  # pylint: disable=g-import-not-at-top

  config = f"{helpers.ROOT}/configs/gpt.py:{config_arg},runlocal"
  result = helpers.run(
      [
          sys.executable,
          "-m",
          "vit_jax.main",
          f"--config={config}",
          f"--workdir={tmp_path / 'w'}",
          override,
      ]
  )
  assert result.returncode == 2, result.stderr[-3000:]
  survival.assert_one_line_error(result.stderr, named)
