"""Weighted mixtures of token stores (vit_jax/data/text/mixture.py, `dataset=mixture`).

Each row's source and its row of that source are a closed form of (seed, step, row): the sources
keep their weights (0.8 / 0.2 within 0.03 over 200 steps), each reads its rows in order across
blocks and stages, and a batch holds the windows of the sources the schedule names. A run on two
stores logs `tokens/NAME` and `eval/NAME/loss`, resumes to the straight run's parameters, and a
cooldown branch may read other weights from its branch point (the run trained on the staged
mixture from scratch), while any other change is refused. Every bad mixture is one error before
anything is written.
"""

import contextlib
import io
import itertools
import json
import os
import shutil
import sys

import numpy as np
import pytest

from tests import helpers
from tests import tiny_configs
from tests.data.text import mixture_stores
from vit_jax import errors
from vit_jax.data import tokenizers
from vit_jax.data.text import batches
from vit_jax.data.text import mixture
from vit_jax.training import train

SEQ_LEN, BATCH, STEPS, SAVED = 32, 8, 200, 100


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
  return mixture_stores.make(str(tmp_path_factory.mktemp("mixture")))


def mix(weights: str, stores=None) -> mixture.Mixture:
  stores = stores or {"web": "/w", "code": "/c"}
  return mixture.Mixture(stores, tuple(mixture.parse_weights(weights)))


# ---- Which source each row reads ---------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [8, 16, 64])
def test_tokens_per_source_over_200_steps_are_within_3_points_of_the_weights(batch_size):
  schedule = mix("web=0.8,code=0.2").schedule(batch_size, seed=0)
  rows = schedule.rows_before(STEPS * batch_size)
  assert abs(rows[0] / rows.sum() - 0.8) <= 0.03, rows
  # The closed form is the count of the sources each row is given.
  source, _ = schedule.locate(np.arange(STEPS * batch_size))
  assert np.bincount(source, minlength=2).tolist() == rows.tolist()


def test_every_block_meets_the_weights_exactly():
  schedule = mix("web=0.8,code=0.2").schedule(BATCH, seed=5)
  assert mixture.apportion([0.8, 0.2], mixture.BLOCK).tolist() == [1638, 410]
  for blocks in (1, 2, 7):
    assert schedule.rows_before(blocks * mixture.BLOCK).tolist() == [1638 * blocks, 410 * blocks]


def test_each_source_reads_its_rows_in_order_across_blocks_and_stages():
  """None twice, none skipped: a source's rows so far are its rows 0..n-1, whatever the
  weights were (stage changes here fall inside blocks)."""
  schedule = mix("web=0.7,code=0.3;5:web=0.1,code=0.9;9:web=1,code=0").schedule(1000, seed=3)
  source, row = schedule.locate(np.arange(12_000))
  for k in (0, 1):
    assert row[source == k].tolist() == list(range(int(np.sum(source == k))))
  for step in range(13):
    before = np.bincount(source[: step * 1000], minlength=2)
    assert schedule.rows_before(step * 1000).tolist() == before.tolist()
  assert abs(np.mean(source[5000:9000] == 1) - 0.9) < 0.03
  assert (source[9000:] == 0).all()
  # A row's place depends on the seed and its position only.
  again = mix("web=0.7,code=0.3;5:web=0.1,code=0.9;9:web=1,code=0").schedule(1000, seed=3)
  np.testing.assert_array_equal(again.locate(np.arange(7_000, 7_100))[1], row[7_000:7_100])
  other_seed = mix("web=0.7,code=0.3").schedule(1000, seed=4).locate(np.arange(2000))[0]
  assert (other_seed != source[:2000]).any()


def test_batches_hold_the_named_sources_windows_from_any_step_and_shard_count(stores):
  tokenizer = tokenizers.load_tokenizer(os.path.join(stores["web"], "tokenizer"))
  the_mix = mix("web=0.8,code=0.2", stores)
  args = dict(batch_size=512, seq_len=8, seed=1)  # a block of 2048 rows every 4 steps
  straight = list(itertools.islice(batches.mixed_clm_batches(the_mix, tokenizer, **args), 6))
  resumed = itertools.islice(batches.mixed_clm_batches(the_mix, tokenizer, start_step=3, **args), 3)
  halves = [
      batches.mixed_clm_batches(
          the_mix, tokenizer, batch_size=256, seq_len=8, seed=1, shard=i, shard_count=2
      )
      for i in (0, 1)
  ]
  for step, batch in enumerate(resumed, start=3):
    for key in batch:
      np.testing.assert_array_equal(batch[key], straight[step][key], err_msg=key)
  for step, (first, second) in enumerate(itertools.islice(zip(*halves), 6)):
    np.testing.assert_array_equal(
        np.concatenate([first["inputs"], second["inputs"]]), straight[step]["inputs"]
    )
  # Each row's first document piece is a run of its source's tokens, of the source the
  # schedule gives its position.
  texts = {name: _train_tokens(path).tobytes() for name, path in stores.items()}
  source, _ = the_mix.schedule(512, 1).locate(np.arange(6 * 512))
  found = {name: 0 for name in stores}
  for step, batch in enumerate(straight):
    for r in range(0, 512, 37):
      first = batch["inputs"][r][batch["segment_ids"][r] == batch["segment_ids"][r][0]]
      first = first[first != tokenizer.eos_id]  # the separator after a document
      name = the_mix.names[source[step * 512 + r]]
      assert _holds(texts[name], first.astype("<u2").tobytes()), (step, r, name)
      found[name] += 1
  assert min(found.values()) > 0, found


def _train_tokens(store: str) -> np.ndarray:
  with open(os.path.join(store, "store.json"), encoding="utf-8") as f:
    shards = json.load(f)["splits"]["train"]["shards"]
  return np.concatenate(
      [np.fromfile(os.path.join(store, "train", f"{s['name']}.text.tokens"), "<u2") for s in shards]
  )


def _holds(haystack: bytes, needle: bytes) -> bool:
  """`needle` (uint16 tokens) is a run of `haystack`'s tokens, at a token boundary."""
  at = haystack.find(needle)
  while at != -1 and at % 2:
    at = haystack.find(needle, at + 1)
  return at != -1


# ---- Training on a mixture ---------------------------------------------------------------------


def config(stores, weights="web=0.8,code=0.2", steps=STEPS, **extra):
  c = tiny_configs.load("gpt", "dataset=mixture,variant=pico")
  c.tokenizer.update(mixture_stores.TOKENIZER)
  c.mixture.update(stores=mixture_stores.stores_flag(stores), weights=weights)
  c.seq_len, c.batch_size, c.total_steps = SEQ_LEN, BATCH, steps
  c.log_every, c.eval_every, c.eval_max_batches = 20, steps, 2
  c.checkpoint_every, c.keep_checkpoint_steps = SAVED, (SAVED,)
  c.optimizer.update(schedule="constant", warmup_steps=10)
  c.update(extra)
  return c


@pytest.fixture(scope="module")
def straight(stores, tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("mixture_runs") / "straight")
  train.train_and_evaluate(config(stores), workdir)
  return workdir


def records(workdir, key):
  return {r["step"]: r for r in helpers.read_metrics(workdir) if key in r}


def test_a_run_logs_tokens_per_source_at_its_weights(straight):
  logged = records(straight, "tokens/web")
  assert sorted(logged) == list(range(20, STEPS + 1, 20))
  last = logged[STEPS]
  assert last["tokens/web"] + last["tokens/code"] == STEPS * BATCH * SEQ_LEN
  assert abs(last["tokens/web"] / (STEPS * BATCH * SEQ_LEN) - 0.8) <= 0.03


def test_a_run_reports_eval_loss_per_source(stores, straight):
  last = records(straight, "eval/loss")[STEPS]
  web, code = last["eval/web/tokens"], last["eval/code/tokens"]
  assert web > 0 and code > 0 and last["eval/tokens"] == web + code
  pooled = (last["eval/web/loss"] * web + last["eval/code/loss"] * code) / (web + code)
  assert last["eval/loss"] == pytest.approx(pooled, rel=1e-6)
  assert last["eval/web/loss"] != last["eval/code/loss"]
  vocab = tokenizers.load_tokenizer(os.path.join(stores["web"], "tokenizer")).vocab_size
  assert last["eval/loss"] < np.log(vocab)  # it learned something of both


def test_a_resumed_run_equals_the_straight_one(stores, straight, tmp_path, capsys):
  """Resumed from step 100 (the straight run's files as they were then): the same parameters,
  optimizer state, per-source token counts and per-source eval losses at step 200."""
  resumed = str(tmp_path / "resumed")
  shutil.copytree(straight, resumed)
  shutil.rmtree(os.path.join(resumed, "checkpoints", str(STEPS)))
  kept = [r for r in helpers.read_metrics(resumed) if r["step"] <= SAVED]
  with open(os.path.join(resumed, "metrics.jsonl"), "w", encoding="utf-8") as f:
    f.writelines(json.dumps(r) + "\n" for r in kept)
  train.train_and_evaluate(config(stores), resumed)
  assert f"at step {SAVED}." in capsys.readouterr().out

  a, b = tiny_configs.read_state(straight, STEPS), tiny_configs.read_state(resumed, STEPS)
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  for step in range(SAVED + 20, STEPS + 1, 20):
    for name in ("tokens/web", "tokens/code", "train_loss"):
      assert records(resumed, name)[step][name] == records(straight, name)[step][name]
  got, want = records(resumed, "eval/loss")[STEPS], records(straight, "eval/loss")[STEPS]
  assert {k: v for k, v in got.items() if k.startswith("eval/")} == {
      k: v for k, v in want.items() if k.startswith("eval/")
  }


def test_a_rerun_with_other_weights_is_refused_untouched(stores, straight):
  untouched = helpers.snapshot(straight)
  with pytest.raises(errors.WorkdirError, match="mixture.weights: saved 'web=0.8,code=0.2'"):
    train.train_and_evaluate(config(stores, "web=0.5,code=0.5"), straight)
  assert helpers.snapshot(straight) == untouched


STAGED = f"web=0.8,code=0.2;{SAVED}:web=0.2,code=0.8"


@pytest.mark.default_emitters  # the parent has no cooldown, the run from scratch one
def test_a_cooldown_branch_may_read_new_weights_from_its_branch_point(stores, straight, tmp_path):
  """Recorded in its config, said when it starts, and equal to the run trained from scratch on
  the staged mixture with the same cooldown."""
  cooldown = dict(steps=SAVED + 40, optimizer=dict(cooldown_steps=40))
  branched, scratch = str(tmp_path / "branch"), str(tmp_path / "scratch")
  untouched = helpers.snapshot(straight)
  said = io.StringIO()
  with contextlib.redirect_stdout(said):
    train.train_and_evaluate(
        _with(config(stores, STAGED, branch_from=f"{straight}:{SAVED}"), **cooldown), branched
    )
  assert f"From step {SAVED} it reads the mixture web=0.2,code=0.8." in said.getvalue()
  with open(os.path.join(branched, "config.json"), encoding="utf-8") as f:
    assert json.load(f)["mixture"]["weights"] == STAGED
  train.train_and_evaluate(_with(config(stores, STAGED), **cooldown), scratch)
  a, b = tiny_configs.read_state(scratch, SAVED + 40), tiny_configs.read_state(branched, SAVED + 40)
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  # The 40 steps after the branch point read the new weights, from where each source was.
  before, after = (
      records(straight, "tokens/web")[SAVED],
      records(branched, "tokens/web")[SAVED + 40],
  )
  new_code = after["tokens/code"] - before["tokens/code"]
  assert abs(new_code / (40 * BATCH * SEQ_LEN) - 0.8) <= 0.1
  assert helpers.snapshot(straight) == untouched


def _with(c, steps, optimizer):
  c.total_steps = steps
  c.optimizer.update(optimizer)
  return c


@pytest.mark.parametrize(
    "weights, extra, message",
    [
        ("web=0.2,code=0.8", {}, f"--config.mixture.weights='{STAGED}'"),
        (f"web=0.8,code=0.2;{SAVED // 2}:web=0.2,code=0.8", {}, "changes the mixture before"),
        (STAGED, {"seed": 1}, "seed: parent 0, here 1"),
    ],
)
def test_a_branch_that_changes_anything_else_is_refused(
    stores, straight, tmp_path, weights, extra, message
):
  c = config(stores, weights, branch_from=f"{straight}:{SAVED}", **extra)
  c = _with(c, SAVED + 40, dict(cooldown_steps=40))
  with pytest.raises(errors.ConfigError, match="branch_from") as refused:
    train.train_and_evaluate(c, str(tmp_path / "refused"))
  assert message in str(refused.value)
  assert not (tmp_path / "refused").exists()


# ---- Bad input: one line, nothing written ------------------------------------------------------


@pytest.fixture(scope="module")
def other_tokenizer_store(stores, tmp_path_factory):
  """The code text in a store of a tokenizer of its own."""
  code_text = os.path.join(os.path.dirname(stores["code"]), "code.txt")
  out = str(tmp_path_factory.mktemp("other") / "code_own")
  return mixture_stores.prepare(out, f"paragraphs:{code_text}", **mixture_stores.TOKENIZER)


BAD = [
    ("weights", "web=-0.2,code=1.2", "web=-0.2 is negative"),
    ("weights", "web=0,code=0", "sum to 0"),
    ("weights", "web=0.8,books=0.2", "names 'books', which --config.mixture.stores gives no store"),
    ("weights", "web=1", "names 'code', which --config.mixture.weights gives no weight"),
    ("weights", "web:0.8,code:0.2", "is malformed: 'web:0.8' is not NAME=WEIGHT"),
    ("weights", "web=0.8,code=0.2;web=0.5,code=0.5", "is malformed: stage 2"),
    ("weights", "web=0.8,code=0.2;50:web=1,code=0;20:web=0,code=1", "is malformed: stage 3"),
    ("weights", "web=1,code=0.0001", "below the mixture's resolution"),
    ("stores", "web={web},code", "'code' is not NAME=STORE"),
    ("stores", "web={web},code={web}/missing", "code={web}/missing does not exist"),
    ("stores", "web={web},code={web}/tokenizer", "is not a token store"),
    ("stores", "web={web},code={other}", "hold ids of different tokenizers"),
]


@pytest.mark.parametrize("key, value, message", BAD)
def test_a_bad_mixture_is_one_error_before_anything_is_written(
    stores, other_tokenizer_store, tmp_path, key, value, message
):
  c = config(stores)
  paths = dict(web=stores["web"], other=other_tokenizer_store)
  c.mixture[key] = value.format(**paths)
  with pytest.raises(errors.UserError) as refused:
    train.train_and_evaluate(c, str(tmp_path / "w"))
  assert message.format(**paths) in str(refused.value) and "\n" not in str(refused.value)
  assert not (tmp_path / "w").exists()


def test_a_source_whose_eval_split_has_no_tokens_is_refused_before_anything_is_written(
    stores, tmp_path
):
  """Every source is evaluated, at weight 0 too: one whose validation split holds no tokens
  would end the run at its first eval, after all the training before it."""
  texts = ["alpha beta"] * 19 + [""]  # position 19, the validation split's, has no text
  (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
  empty = mixture_stores.prepare(
      str(tmp_path / "empty"),
      f"files:{tmp_path}/docs.jsonl",
      path=os.path.join(stores["web"], "tokenizer"),
  )
  c = config({"web": stores["web"], "empty": empty}, weights="web=1,empty=0")
  with pytest.raises(errors.DataError) as refused:
    train.train_and_evaluate(c, str(tmp_path / "w"))
  assert str(refused.value).startswith(
      f"--config.mixture.stores: empty={empty}: the 'validation' split of the token store "
      f"{empty} (files:{tmp_path}/docs.jsonl) holds 1 examples and no tokens"
  )
  assert "or leave the source out" in str(refused.value) and "\n" not in str(refused.value)
  assert not (tmp_path / "w").exists()


def test_the_command_line_says_a_bad_mixture_in_one_line_with_exit_code_2(stores, tmp_path):
  result = helpers.run(
      [
          sys.executable,
          "-m",
          "vit_jax.main",
          f"--config={helpers.ROOT}/configs/gpt.py:dataset=mixture,variant=pico",
          f"--config.mixture.stores={mixture_stores.stores_flag(stores)}",
          "--config.mixture.weights=web=-1,code=1",
          f"--workdir={tmp_path / 'w'}",
      ]
  )
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      "error: --config.mixture.weights: web=-1 is negative; weights are >= 0 (0 evaluates a "
      "source without training on it)."
  ]
  assert not (tmp_path / "w").exists()
