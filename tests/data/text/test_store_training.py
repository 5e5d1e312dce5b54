"""Training on a token store prepared in this process (the runs read only the store): a killed
run on a store of parquet files resumes bit for bit, and on a store of a TFDS dataset (mock c4)
the same input_shards give the same batches on another mesh and number of processes, with the
store in a bucket."""

import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import helpers
from tests import tiny_configs as configs_lib
from tests.data.text import corpora
from vit_jax.data.text import store_writer


@pytest.fixture(scope="module")
def c4_store(tmp_path_factory):
  """A token store of mock c4 (random letters), char-level."""
  out = str(tmp_path_factory.mktemp("c4") / "store")
  with tfds.testing.mock_data(num_examples=200):
    config = configs_lib.load("gpt", "dataset=c4,variant=pico")
    store_writer.prepare(config, out, workers=1, report=lambda _: None)
  return out


@pytest.fixture(scope="module")
def parquet_store(tmp_path_factory):
  """(dataset, its token store): 300 documents in 3 parquet files of row groups of 7 rows."""
  root = tmp_path_factory.mktemp("parquet")
  dataset = f"files:{root}/docs/*.parquet"
  corpora.write(dataset.split(":", 1)[1], corpora.documents(300))
  config = configs_lib.load("gpt", f"dataset={dataset},variant=pico")
  store_writer.prepare(config, str(root / "store"), workers=1, report=lambda _: None)
  return dataset, str(root / "store")


def gpt_command(workdir, store, *extra, steps=30, dataset="c4"):
  return [
      sys.executable,
      "-m",
      "vit_jax.main",
      f"--config={helpers.ROOT}/configs/gpt.py:dataset={dataset},variant=pico",
      f"--config.token_store={store}",
      f"--workdir={workdir}",
      f"--config.total_steps={steps}",
      "--config.batch_size=8",
      "--config.seq_len=32",
      "--config.checkpoint_every=10",
      f"--config.eval_every={steps}",
      "--config.eval_max_batches=2",
      "--config.log_every=1",
      "--config.progress=lines",
      "--config.optimizer.warmup_steps=2",
      *extra,
  ]


def train_losses(workdir):
  return [r["train_loss"] for r in helpers.read_metrics(workdir) if "train_loss" in r]


def test_a_killed_run_on_a_store_resumes_bit_for_bit(parquet_store, tmp_path):
  """Each run ends with an eval on the store's validation split. The store is one made from
  parquet files: a run reads any store alike, whatever it was made from."""
  dataset, store = parquet_store
  command = lambda workdir: gpt_command(workdir, store, dataset=dataset)
  straight = helpers.run(command(tmp_path / "straight"))
  assert straight.returncode == 0, straight.stderr[-3000:]
  workdir = tmp_path / "killed"
  proc = subprocess.Popen(
      command(workdir),
      env=helpers.env(),
      cwd=helpers.ROOT,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
  )
  deadline = time.time() + 600
  while not (workdir / "metrics.jsonl").exists() or len(train_losses(workdir)) < 14:
    assert proc.poll() is None and time.time() < deadline
    time.sleep(0.01)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  resumed = helpers.run(command(workdir))
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "Resumed from" in resumed.stdout and "at step 10." in resumed.stdout
  evals = [
      [r for r in helpers.read_metrics(w) if "eval/loss" in r]
      for w in (tmp_path / "straight", workdir)
  ]
  assert evals[0][-1]["step"] == 30 and evals[0][-1]["eval/loss"] == evals[1][-1]["eval/loss"]
  a = configs_lib.read_state(tmp_path / "straight", 30)
  b = configs_lib.read_state(workdir, 30)
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.multiprocess
def test_a_run_resumes_on_another_mesh_with_the_same_batches(c4_store, tmp_path, gcs):
  """The store in a bucket, input_shards=2: 2 processes on data:2 train the one-device run's
  steps; their checkpoint at step 6, resumed by 4 processes on data:2,model:2, trains its
  steps 7-12 too."""
  bucket_store = gcs.new_dir("c4")
  gcs.upload(c4_store, bucket_store)
  common = ("--config.input_shards=2", "--config.checkpoint_every=6")
  one = helpers.run(gpt_command(tmp_path / "one", c4_store, *common, steps=12), timeout=900)
  assert one.returncode == 0, one.stderr[-3000:]
  expected = train_losses(tmp_path / "one")
  assert len(expected) == 12

  def launch(processes, mesh, workdir):
    command = gpt_command(workdir, bucket_store, *common, f"--config.mesh={mesh}", steps=12)
    logs = tmp_path / f"logs{processes}"
    out = helpers.run(helpers.launch_local(processes, 1, logs, command), timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return out

  launch(2, "data:2", tmp_path / "two")
  np.testing.assert_allclose(train_losses(tmp_path / "two"), expected, rtol=2e-5)
  shutil.copytree(tmp_path / "two", tmp_path / "moved")
  shutil.rmtree(tmp_path / "moved" / "checkpoints" / "12")  # as if stopped after step 6
  resumed = launch(4, "data:2,model:2", tmp_path / "moved")
  assert "at step 6." in resumed.stdout
  rows = [r for r in helpers.read_metrics(tmp_path / "moved") if "train_loss" in r]
  after = [r["train_loss"] for r in rows[12:]]  # the resumed run's records follow the first's
  assert [r["step"] for r in rows[12:]] == list(range(7, 13))
  np.testing.assert_allclose(after, expected[6:], rtol=2e-5)
  evals = [r for r in helpers.read_metrics(tmp_path / "moved") if "eval/loss" in r]
  one_evals = [r for r in helpers.read_metrics(tmp_path / "one") if "eval/loss" in r]
  np.testing.assert_allclose(evals[-1]["eval/loss"], one_evals[-1]["eval/loss"], rtol=2e-5)
  assert evals[-1]["eval/tokens"] == one_evals[-1]["eval/tokens"]
