"""A damaged latest checkpoint: readers fall back to the newest intact step (4 of 2, 4 and 6, not
the oldest), and a resumed run moves the damaged step to checkpoints/damaged/STEP and ends
bit-identical to a straight run."""

import asyncio
import gc
import os
import sys
import warnings

import jax
import numpy as np
import pytest

from tests import faults
from tests import helpers
from tests.survival import conftest
from vit_jax import checkpoint
from vit_jax import errors
from vit_jax import interop
from vit_jax.storage import outages


@pytest.mark.parametrize("how", ["truncated", "zero_length", "no_manifest"])
def test_reader_falls_back_to_the_intact_step(trained_copy, trained, how, capsys):
  conftest.damage(str(trained_copy / "checkpoints" / "6"), how)
  before = conftest.snapshot(trained_copy)
  params = interop.read_params(str(trained_copy))
  expected = interop.read_params(str(trained / "checkpoints" / "4"))
  oldest = interop.read_params(str(trained / "checkpoints" / "2"))
  assert params.keys() == expected.keys()
  for key in params:
    np.testing.assert_array_equal(params[key], expected[key], err_msg=key)
  assert any(not np.array_equal(params[k], oldest[k]) for k in params)  # 4, not merely intact
  warning = capsys.readouterr().err
  assert "checkpoints/6 is unreadable" in warning and "using step 4" in warning
  assert warning.count("\n") == 1, warning[-3000:]  # one line
  assert conftest.snapshot(trained_copy) == before  # readers move nothing


def test_convert_falls_back_past_a_missing_model_record(trained_copy, tmp_path):
  conftest.damage(str(trained_copy / "checkpoints" / "6"), "no_model_record")
  from vit_jax import convert  # pylint: disable=g-import-not-at-top

  assert convert.main([str(trained_copy), str(tmp_path / "out.npz"), "--to", "npz"]) == 0
  assert (tmp_path / "out.npz").is_file()


def test_resume_past_a_damaged_step_is_bit_identical(trained_copy, trained, digits_dir):
  conftest.damage(str(trained_copy / "checkpoints" / "6"), "truncated")
  result = helpers.run(conftest.tiny_command(trained_copy, digits_dir))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "checkpoints/6 is unreadable" in result.stderr and "using step 4" in result.stderr
  assert "at step 4" in result.stdout  # the newest intact step, not the oldest
  assert (trained_copy / "checkpoints" / "damaged" / "6" / "state").is_dir()  # kept, not deleted
  straight = interop.read_params(str(trained / "checkpoints" / "6"))
  resumed = interop.read_params(str(trained_copy / "checkpoints" / "6"))
  for key in straight:
    np.testing.assert_array_equal(straight[key], resumed[key], err_msg=key)


@pytest.mark.parametrize("how", ["zero_length", "no_manifest"])
def test_a_damaged_step_leaves_one_line_and_no_tracebacks(
    tmp_path, how, monkeypatch, caplog, capsys
):
  """Orbax abandons a damaged step's other array reads; they must not print tracebacks."""
  reports = []
  monkeypatch.setattr(sys, "unraisablehook", lambda u: reports.append(repr(u.exc_value)))
  rng = np.random.default_rng(0)  # incompressible, so every array lives in the data files
  state = {f"w{i}": rng.standard_normal((64, 64), np.float32) for i in range(64)}  # many reads
  record = {"model": {}, "param_shapes": {}}
  ckpt = checkpoint.Checkpointer(str(tmp_path), 2, 3, record)
  ckpt.save(2, state)
  ckpt.save(4, state)
  ckpt.close()
  conftest.damage(str(tmp_path / "checkpoints" / "4"), how)
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
  ckpt = checkpoint.Checkpointer(str(tmp_path), 2, 3, record)
  read = lambda d: ckpt.restore(int(os.path.basename(d)), abstract)
  for _ in range(5):
    step_dir, restored = checkpoint.first_intact(checkpoint.step_dirs(str(tmp_path)), read)
    assert step_dir.endswith("/2")
    np.testing.assert_array_equal(restored["w7"], state["w7"])
  ckpt.close()
  gc.collect()
  assert capsys.readouterr().err.count("is unreadable") == 5
  reports += [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()]
  assert not reports, reports[:3]


class Raises:

  def __init__(self, error):
    self.error = error

  def __del__(self):
    raise self.error


def test_only_abandoned_read_reports_are_dropped(monkeypatch, caplog):
  printed = []
  monkeypatch.setattr(sys, "unraisablehook", lambda u: printed.append(str(u.exc_value)))
  checkpoint.quiet_abandoned_reads()
  checkpoint.quiet_abandoned_reads()  # idempotent: one hook, one filter
  Raises(RuntimeError("Event loop is closed"))  # TensorStore calling into orbax's closed loop
  Raises(RuntimeError("a bug of ours"))
  loop = asyncio.new_event_loop()
  for message in ["OUT_OF_RANGE: Error reading x in OCDBT database", "another failure"]:
    loop.create_future().set_exception(ValueError(message))  # never retrieved
    gc.collect()
  loop.close()
  assert printed == ["a bug of ours"]
  logged = "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records)
  assert "OUT_OF_RANGE" not in logged and "another failure" in logged


async def _read_array_index_and_device_put():  # named as orbax's array read
  pass


async def another_coroutine():
  pass


def test_only_orbax_reads_never_started_are_quiet():
  """A read orbax abandoned before starting it warns 'never awaited' when collected (at exit in
  generate); that warning is dropped, the same warning for any other coroutine is not."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    checkpoint.quiet_abandoned_reads()
    _read_array_index_and_device_put()
    another_coroutine()
    gc.collect()
  messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
  assert messages == ["coroutine 'another_coroutine' was never awaited"]


@pytest.mark.multiprocess
@pytest.mark.slow
def test_two_processes_set_a_damaged_step_aside_once(trained_copy, digits_dir, tmp_path):
  """Both processes find step 6 damaged; process 0 alone moves it (a second move would find it
  gone, or keep a copy as damaged/6.1) and process 1 waits for it, then both resume from 4."""
  conftest.damage(str(trained_copy / "checkpoints" / "6"), "no_manifest")
  logs = tmp_path / "logs"
  launch = [sys.executable, os.path.join(helpers.ROOT, "scripts", "launch_local.py"), "-n", "2"]
  result = helpers.run(
      [*launch, "--log_dir", str(logs), "--", *conftest.tiny_command(trained_copy, digits_dir)]
  )
  other = (logs / "process_1.log").read_text()
  assert result.returncode == 0, result.stderr[-3000:] + other[-3000:]
  assert os.listdir(trained_copy / "checkpoints" / "damaged") == ["6"]
  assert "moved to" in result.stderr and "at step 4" in result.stdout
  assert "checkpoints/6 is unreadable" in other and "set aside" in other
  assert "Traceback" not in other
  assert (trained_copy / "checkpoints" / "6" / "state").is_dir()  # trained again to the end


def test_a_step_damaged_twice_is_set_aside_twice(tmp_path):
  for _ in range(2):  # the same step saved again after it was set aside, and damaged again
    os.makedirs(tmp_path / "checkpoints" / "6" / "state")
    checkpoint.set_aside(str(tmp_path / "checkpoints" / "6"))
  assert sorted(os.listdir(tmp_path / "checkpoints" / "damaged")) == ["6", "6.1"]


def _two_steps(tmp_path):
  """A Checkpointer over steps 2 and 4 of a small state, and its reader for `first_intact`."""
  state = {"w": np.arange(12, dtype=np.float32).reshape(3, 4)}
  record = {"model": {}, "param_shapes": {}}
  ckpt = checkpoint.Checkpointer(str(tmp_path), 2, 3, record)
  ckpt.save(2, state)
  ckpt.save(4, jax.tree.map(lambda x: x + 1, state))
  ckpt.close()
  ckpt = checkpoint.Checkpointer(str(tmp_path), 2, 3, record)
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
  return ckpt, lambda d: ckpt.restore(int(os.path.basename(d)), abstract)


def _storage_fails(monkeypatch, step, times, error):
  """Orbax's reads of `step` raise `error` the first `times` times (a bucket's timeouts), tried
  again at once, for a second."""
  monkeypatch.setattr(outages, "FIRST_WAIT_S", 0.01)
  monkeypatch.setattr(outages, "_budget_s", 1.0)
  monkeypatch.setattr(outages, "_away", {})
  return faults.inject(monkeypatch, f"checkpoints/{step}", error, times=times, only=["restore"])


def _api_exceptions():
  return pytest.importorskip("google.api_core.exceptions")  # the gcs extra


@pytest.mark.parametrize("error", ["timeout", "http_503"])
def test_a_storage_that_recovers_restores_the_newest_step(tmp_path, monkeypatch, capsys, error):
  if error == "timeout":
    error = TimeoutError("read timed out")
  else:
    error = _api_exceptions().ServiceUnavailable("backend error")
  ckpt, read = _two_steps(tmp_path)
  fault = _storage_fails(monkeypatch, 4, 2, error)
  step_dir, restored = checkpoint.first_intact(
      checkpoint.step_dirs(str(tmp_path)), read, move_damaged=True
  )
  ckpt.close()
  assert fault.failed() == 2
  assert step_dir.endswith("/4") and restored["w"][0, 0] == 1
  assert not (tmp_path / "checkpoints" / "damaged").exists()
  err = capsys.readouterr().err
  assert err.count("does not answer") == 1 and "unreadable" not in err  # one line an outage


def test_a_storage_that_stays_down_fails_loudly_and_sets_nothing_aside(tmp_path, monkeypatch):
  ckpt, read = _two_steps(tmp_path)
  _storage_fails(monkeypatch, 4, 100, ConnectionResetError("connection reset by peer"))
  with pytest.raises(errors.StorageUnavailableError, match="did not answer for 1 s .* checkpoint"):
    checkpoint.first_intact(checkpoint.step_dirs(str(tmp_path)), read, move_damaged=True)
  ckpt.close()
  assert not (tmp_path / "checkpoints" / "damaged").exists()
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["2", "4"]


def test_only_a_storage_that_did_not_answer_is_transient():
  api_exceptions = _api_exceptions()
  assert errors.transient_cause(api_exceptions.TooManyRequests("slow down"))
  assert errors.transient_cause(ValueError("UNAVAILABLE: HTTP response code: 503"))
  # TensorStore's error once its own retries are spent: another code, the status in brackets.
  spent = "ABORTED: Error writing x: All 6 retry attempts failed [http_response_code='503']"
  assert errors.transient_cause(ValueError(spent))
  try:
    raise ValueError("orbax wrapper") from TimeoutError("deadline")
  except ValueError as e:
    assert errors.transient_cause(e) == "TimeoutError: deadline"
  for damage in [
      FileNotFoundError("no manifest.ocdbt"),
      api_exceptions.NotFound("no such object"),
      ValueError("OUT_OF_RANGE: Error reading x in OCDBT database"),
      ValueError("DATA_LOSS: HTTP response code: 200"),
  ]:
    assert errors.transient_cause(damage) is None, damage
