"""Fine-tuning (`interop.finetune_params`): per-layer and scanned checkpoints fit both kinds of
model, heads are re-initialized on request, and a workdir saved at step 0 converts."""

import jax
import numpy as np
import optax
import pytest

from tests.interop import helpers
from vit_jax import checkpoint
from vit_jax import interop

TINY = dict(name="vit", variant="Ti/8", width=32, depth=2, num_heads=4, mlp_dim=64, num_classes=5)
IMAGES = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype(np.float32)


def fresh_params(config: dict, seed: int = 1):
  return interop.Checkpoint({}, config).module().init(jax.random.PRNGKey(seed), IMAGES)["params"]


def run(config: dict, params):
  return np.asarray(interop.Checkpoint({}, config).module().apply({"params": params}, IMAGES))


@pytest.mark.parametrize("source_scanned,target_scanned", [(False, True), (True, False)])
@pytest.mark.parametrize("fmt", ["orbax", "npz"])
def test_scanned_and_per_layer_fit_each_other(tmp_path, source_scanned, target_scanned, fmt):
  source = dict(TINY, scan_layers=source_scanned)
  ckpt, _ = helpers.init_ours(source, IMAGES)
  path = str(tmp_path / ("workdir" if fmt == "orbax" else "vit.npz"))
  interop.save(ckpt, path, to=fmt)
  if fmt == "orbax":  # the workdir holds the params as the model had them
    saved = interop.read_params(path)
    assert ("Transformer/encoderblock/layers/block/LayerNorm_0/scale" in saved) == source_scanned

  target = dict(TINY, scan_layers=target_scanned)
  init = fresh_params(target)
  params, notes = interop.finetune_params(init, path)
  assert not [n for n in notes if "initialized fresh" in n or "re-initialized" in n], notes
  assert jax.tree.structure(params) == jax.tree.structure(init)
  for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(init)):
    assert got.shape == want.shape and got.dtype == want.dtype
  # A scanned stack compiles differently from an unrolled one: equal up to fp32 rounding.
  assert helpers.max_diff(run(target, params), run(source, ckpt.tree())) <= helpers.TOL


def test_head_rules(tmp_path):
  ckpt, _ = helpers.init_ours(dict(TINY, representation_size=16), IMAGES)
  interop.save(ckpt, str(tmp_path / "vit.npz"), to="npz")
  init = fresh_params(dict(TINY, num_classes=3))
  params, notes = interop.finetune_params(init, str(tmp_path / "vit.npz"))
  assert "head/kernel: checkpoint (16, 5) -> model (32, 3), re-initialized" in notes
  assert "pre_logits/kernel: dropped (the model has no such layer)" in notes
  np.testing.assert_array_equal(params["head"]["kernel"], init["head"]["kernel"])
  np.testing.assert_array_equal(params["cls"], ckpt.params["cls"])
  with pytest.raises(interop.ConversionError, match="shape mismatch: head/kernel"):
    interop.finetune_params(
        init, str(tmp_path / "vit.npz"), reinit_head=False, droppable_prefixes=("pre_logits/",)
    )
  with pytest.raises(interop.ConversionError, match="unexpected in checkpoint: pre_logits/bias"):
    interop.finetune_params(init, str(tmp_path / "vit.npz"), droppable_prefixes=())
  with pytest.raises(FileNotFoundError, match="does not exist"):
    interop.finetune_params(init, str(tmp_path / "missing.npz"))


def test_workdir_saved_at_step_0_converts(tmp_path):
  """A trainer's checkpoint of the fresh model (params, optimizer state, step 0) exports."""
  params = fresh_params(TINY)
  state = {
      "params": params,
      "opt_state": optax.adamw(1e-3).init(params),
      "step": np.zeros((), np.int32),
  }
  saver = checkpoint.Checkpointer(
      str(tmp_path / "workdir"), 10, 2, checkpoint.model_record(TINY, params)
  )
  saver.save(0, state, force=True)
  saver.close()
  ckpt = interop.convert(str(tmp_path / "workdir"), str(tmp_path / "vit.npz"), to="npz")
  assert ckpt.model == TINY
  again = interop.load(str(tmp_path / "vit.npz"))
  np.testing.assert_array_equal(run(TINY, again.tree()), run(TINY, params))
  with pytest.raises(interop.ConversionError, match="no finished checkpoint"):
    interop.read_params(str(tmp_path / "vit.npz.missing"))
