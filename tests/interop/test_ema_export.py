"""`convert --ema`: a workdir's EMA of the params exported instead of its params; one line and exit
code 2 where there is none."""

import jax
import numpy as np
import pytest

from tests.interop import helpers
from vit_jax import checkpoint
from vit_jax import convert
from vit_jax import interop

VIT = dict(name="vit", variant="Ti/8", width=32, depth=1, num_heads=2, mlp_dim=64, num_classes=5)
IMAGES = np.zeros((1, 32, 32, 3), np.float32)


def write_workdir(path, with_ema: bool) -> dict:
  """A workdir whose one step holds params and, `with_ema`, an EMA unlike them; returns the
  saved EMA, flat."""
  ckpt, _ = helpers.init_ours(VIT, IMAGES)
  params = ckpt.tree()
  state = {"params": params, "step": np.zeros((), np.int32)}
  if with_ema:
    state[checkpoint.EMA_PARAMS] = jax.tree.map(lambda p: p * 0.5 + 1.0, params)
  saver = checkpoint.Checkpointer(str(path), 1, 1, checkpoint.model_record(VIT, params))
  try:
    saver.save(1, state, force=True)
  finally:
    saver.close()
  return interop.flatten(state.get(checkpoint.EMA_PARAMS, {}))


def test_convert_ema_writes_the_ema_not_the_params(tmp_path):
  saved_ema = write_workdir(tmp_path / "w", with_ema=True)
  argv = [str(tmp_path / "w"), str(tmp_path / "ema.npz"), "--to", "npz", "--ema"]
  assert convert.main(argv) == 0
  assert convert.main([str(tmp_path / "w"), str(tmp_path / "raw.npz"), "--to", "npz"]) == 0
  ema, raw = interop.load(str(tmp_path / "ema.npz")), interop.load(str(tmp_path / "raw.npz"))
  assert set(ema.params) == set(saved_ema) == set(raw.params)
  for key, value in saved_ema.items():
    np.testing.assert_array_equal(ema.params[key], value, err_msg=key)
    assert not np.array_equal(raw.params[key], value), key


@pytest.mark.parametrize("source", ["workdir", "npz"])
def test_convert_ema_without_an_ema_is_one_line_exit_2(tmp_path, capsys, source):
  write_workdir(tmp_path / "w", with_ema=False)
  src = str(tmp_path / "w")
  if source == "npz":
    assert convert.main([src, str(tmp_path / "raw.npz"), "--to", "npz"]) == 0
    src = str(tmp_path / "raw.npz")
  capsys.readouterr()
  assert convert.main([src, str(tmp_path / "out.npz"), "--to", "npz", "--ema"]) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("error: ") and "EMA of the params" in err and "\n" not in err, err
  assert not (tmp_path / "out.npz").exists()
