"""The GPU benchmark's batches look like data: token ids spread over the vocabulary, rows packed
with documents whose positions count from 0, images and labels that vary. A constant batch times
another program (every token's embedding gradient added into one row: a contended scatter)."""

import numpy as np
import pytest

from benchmarks import gpu_steps
from benchmarks import step_timing
from vit_jax import tasks
from vit_jax.tpu_planning import pod_table


def _batch(flags):
  config = pod_table.config_of(flags, gpu_steps.ROOT)
  task = tasks.build_task_without_data(config)
  model_config = {**config.model.to_dict(), **task.model_overrides()}
  spec = task.batch_spec(config.batch_size)
  return step_timing.data_like_batch(spec, model_config), model_config


def _varies(array):
  return np.unique(np.asarray(array)).size > 1


def test_gpt2_batch_has_real_looking_tokens_documents_and_positions():
  _, _, flags, _ = gpu_steps.workloads(quick=False)["gpt2"]
  batch, model_config = _batch(flags)
  assert batch["inputs"].shape == (16, 1024)
  for key in ("inputs", "targets", "positions"):
    assert all(_varies(row) for row in batch[key]), key
  assert _varies(batch["segment_ids"])  # several documents (a row may hold one)
  tokens = np.asarray(batch["inputs"])
  assert tokens.min() >= 0 and tokens.max() < model_config["vocab_size"]
  assert np.unique(tokens).size > 0.2 * tokens.size  # spread over 50,257 ids
  segments, positions = np.asarray(batch["segment_ids"]), np.asarray(batch["positions"])
  starts = np.concatenate([np.ones((16, 1), bool), segments[:, 1:] != segments[:, :-1]], axis=1)
  np.testing.assert_array_equal(positions == 0, starts)  # each document counts from 0
  np.testing.assert_array_equal(
      positions[:, 1:][~starts[:, 1:]], positions[:, :-1][~starts[:, 1:]] + 1
  )


def test_vit_batch_has_varied_images_and_labels():
  _, _, flags, _ = gpu_steps.workloads(quick=False)["vit_b16"]
  batch, model_config = _batch(flags)
  assert _varies(batch["image"]) and _varies(batch["label"])
  np.testing.assert_array_equal(np.argmax(batch["labels"], -1), batch["label"])
  assert np.asarray(batch["label"]).max() < model_config["num_classes"]


def test_an_unknown_batch_key_is_an_error():
  import jax  # pylint: disable=g-import-not-at-top

  with pytest.raises(ValueError, match="no rule for batch key 'nsp_label'"):
    step_timing.data_like_batch({"nsp_label": jax.ShapeDtypeStruct((2,), np.int32)}, {})


def test_the_pytorch_peers_batches_vary():
  torch_gpu_peers = pytest.importorskip("benchmarks.torch_gpu_peers")
  inputs, targets = torch_gpu_peers.nanogpt_batch(16, 1024)
  assert inputs.shape == (16, 1024) and np.unique(inputs.numpy()).size > 0.2 * inputs.numel()
  np.testing.assert_array_equal(inputs[:, 1:].numpy(), targets[:, :-1].numpy())
  assert targets.max() < torch_gpu_peers.GPT2_VOCAB
  images, labels = torch_gpu_peers.vit_batch(8)
  assert images.shape == (8, 3, 224, 224) and _varies(images.numpy()) and _varies(labels.numpy())
