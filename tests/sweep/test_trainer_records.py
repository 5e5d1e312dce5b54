"""What the trainer records for sweeps: run_info.json, MFU beside throughput, and a wall time that
adds up over resumes."""

import json
import os

import jax
import jax.numpy as jnp

from tests import helpers
from tests import tiny_configs as configs
from vit_jax import workdir as workdir_lib
from vit_jax.data.image import pipeline
from vit_jax.models import build_model
from vit_jax.training import flops
from vit_jax.training import train


def test_run_info_elapsed_time_and_mfu_over_a_resume(tmp_path, digits_dir):
  config = configs.tiny_vit(digits_dir, steps=2)
  config.train_split = "train[:25%]"
  config.log_every = 1
  train.train_and_evaluate(config, str(tmp_path))
  info = json.loads((tmp_path / workdir_lib.RUN_INFO_FILE).read_text())
  assert info["train_examples"] == pipeline.split_size(
      "sklearn_digits", "train[:25%]", data_dir=digits_dir
  )
  assert info["train_examples"] < pipeline.split_size("sklearn_digits", data_dir=digits_dir) / 3
  model = build_model({**config.model.to_dict(), "num_classes": 10})
  params = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, 16, 16, 3)))["params"]
  assert info["num_params"] == flops.count_params(params)
  # 3 x forward; a ViT's forward is at least 2 FLOPs per parameter per token it touches.
  assert info["train_flops_per_example"] > 3 * 2 * info["num_params"]
  assert (info["batch_size"], info["total_steps"]) == (16, 2)
  first = helpers.read_metrics(tmp_path)
  assert all(r["elapsed_s"] > 0 for r in first)
  assert [r["elapsed_s"] for r in first] == sorted(r["elapsed_s"] for r in first)
  logged = [r for r in first if "examples_per_sec" in r]  # MFU beside the throughput
  assert logged and all(0 < r["mfu"] < 1 for r in logged)

  config.total_steps = 3  # resume for one more step
  train.train_and_evaluate(config, str(tmp_path))
  later = helpers.read_metrics(tmp_path)[len(first) :]
  assert later and all(r["elapsed_s"] > max(x["elapsed_s"] for x in first) for r in later)


def test_run_info_is_rewritten_with_checkpoints_not_log_lines(tmp_path, digits_dir, monkeypatch):
  replace, writes = os.replace, []

  def counting(src, dst, *args, **kwargs):
    if str(dst).endswith(workdir_lib.RUN_INFO_FILE):
      writes.append(dst)
    return replace(src, dst, *args, **kwargs)

  monkeypatch.setattr(os, "replace", counting)
  config = configs.tiny_vit(digits_dir, steps=6)
  config.train_split = "train[:25%]"
  config.log_every, config.checkpoint_every, config.eval_every = 1, 3, 6
  train.train_and_evaluate(config, str(tmp_path))
  assert len(writes) <= 4, writes  # the start, checkpoints 3 and 6, the end; not 6 log lines
  info = json.loads((tmp_path / workdir_lib.RUN_INFO_FILE).read_text())
  assert info["goodput"]["step"] == 6
