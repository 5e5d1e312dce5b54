"""The compile command on local CPU devices: its figures, its bad-input lines, and the trainer's
`check_memory`. (Compiling for TPU slices needs libtpu: tests/scale/test_aot_tpu.py.)"""

import importlib.util
import subprocess
import sys

import jax
import pytest

from tests import helpers
from vit_jax import errors
from vit_jax import tasks
from vit_jax.training import aot
from vit_jax.training import flops
from vit_jax.training import train


def compile_command(*args, devices=1):
  cmd = [sys.executable, "-m", "vit_jax.compile", *args]
  env = dict(helpers.env(devices), JAX_PLATFORMS="cpu")
  return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=helpers.ROOT)


def test_topology_names():
  assert aot.parse_topology("v5p-64").shape == "2x4x4"  # 64 cores = 32 chips
  assert aot.parse_topology("v5p-64").chips == 32
  assert aot.parse_topology("v4-32").shape == "2x2x4"
  assert aot.parse_topology("v5e-16").shape == "4x4"  # v5e counts chips
  assert aot.parse_topology("v6e-256").shape == "16x16"
  assert aot.parse_topology("v5p:2x2x1").chips == 4
  for bad in ("v5p-63", "v7-8", "tpu", "v5e-2", "v5p:2xx2"):
    with pytest.raises(errors.ConfigError, match="Unknown TPU topology"):
      aot.parse_topology(bad)


def test_count_collectives_reads_sync_and_async_ops():
  hlo = """
  %all-reduce.1 = f32[4]{0} all-reduce(f32[4]{0} %p), replica_groups={{0,1}}, to_apply=%add
  %ag-start = (f32[2], f32[4]) all-gather-start(f32[2]{0} %q), dimensions={0}
  %ag-done = f32[4]{0} all-gather-done((f32[2], f32[4]) %ag-start)
  %cp = f32[4]{0} collective-permute(f32[4]{0} %r), source_target_pairs={{0,1}}
  """
  assert aot.count_collectives(hlo) == {
      "all-reduce": 1,
      "all-gather": 1,
      "reduce-scatter": 0,
      "all-to-all": 0,
      "collective-permute": 1,
  }


def test_report_of_local_compile():
  """State bytes are exactly params + Adam's two moments; XLA's FLOPs are near the model's."""
  config = helpers.vit_config("runlocal", num_classes=10, batch_size=8)
  setup = train.prepare(config, tasks.build_task_without_data(config))
  report = aot.compile_report(setup, train.jit_update_step(config, setup), config.batch_size)
  params = flops.count_params(setup.abstract_state["params"])
  assert abs(report.state_bytes - 3 * 4 * params) < 64  # + the step counter and Adam's count
  assert report.batch_bytes == 8 * (16 * 16 * 3 + 1 + 10) * 4
  assert report.temp_bytes > 0 and report.total_bytes > report.state_bytes
  assert 0.8 < report.xla_flops / report.model_flops < 2.0
  assert sum(report.collectives.values()) == 0  # one device
  assert report.fits  # a CPU has no HBM limit
  text = report.text()
  assert "params + optimizer state" in text and "temporaries" in text and ": fits" in text
  small = aot.Report(**{**report.__dict__, "hbm_bytes": report.total_bytes // 2})
  with pytest.raises(aot.DoesNotFitError, match="model.remat=full.*bfloat16.*grad_accum_steps=2"):
    aot.require_fit(small)


def test_compile_command_local_devices():
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:runlocal", "--config.num_classes=10", devices=2
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert "2 x cpu, mesh data:2, global batch 8" in out.stdout
  assert "all-reduce" in out.stdout  # gradients averaged over the data axis


@pytest.mark.parametrize(
    "args, message",
    [
        (["--topology=v5p-63"], "Unknown TPU topology 'v5p-63'"),
        (["--config.mesh=data:3"], "mesh='data:3' has 3 slots but there are 2 devices"),
        (["--config.batch_size=5"], "batch_size=5 must be divisible by the batch shards"),
        ([], None),  # no class count without data
    ],
)
def test_compile_command_bad_input(args, message):
  extra = [] if message is None else ["--config.num_classes=10"]
  out = compile_command(f"--config={helpers.VIT_CONFIG}:runlocal", *extra, *args, devices=2)
  assert out.returncode == 2, out.stderr[-3000:]
  lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
  assert len(lines) == 1 and "Traceback" not in out.stderr
  assert (message or "set --config.num_classes") in lines[0]
  assert "Compiling" not in out.stdout  # refused before any compile


def test_check_memory_before_step_one(tmp_path, capsys):
  config = helpers.vit_config("runlocal", check_memory=True, total_steps=1, eval_every=1)
  train.train_and_evaluate(config, str(tmp_path))
  assert "params + optimizer state" in capsys.readouterr().out


def test_target_topology_is_validated(tmp_path):
  config = helpers.vit_config("runlocal", target_topology="v5p-7")
  with pytest.raises(errors.ConfigError, match="target_topology.*Unknown TPU topology"):
    train.train_and_evaluate(config, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


def test_build_task_without_data_needs_the_vocabulary():
  config = _config("gpt", "runlocal")
  with pytest.raises(errors.ConfigError, match="tokenizer.vocab_size"):
    tasks.build_task_without_data(config)
  config.tokenizer.vocab_size = 300
  task = tasks.build_task_without_data(config)
  assert task.model_overrides() == {"vocab_size": 300} and task.tokenizer is None
  assert jax.tree.map(lambda s: s.shape, task.batch_spec(4))["inputs"] == (4, config.seq_len)


def _config(name, arg):
  return helpers.repo_file(f"configs/{name}.py").get_config(arg)


@pytest.mark.parametrize(
    "name, arg",
    [
        ("vit", "runlocal"),
        ("gpt", "runlocal"),
        ("bert", "runlocal"),
        ("bert", "runlocal,nsp"),
        ("seq2seq", "runlocal"),
    ],
)
def test_batch_spec_is_what_the_data_gives(tmp_path, name, arg):
  """The abstract batch the compile command uses has the real batches' keys, shapes, dtypes."""
  config = _config(name, arg)
  task = tasks.build_task(config, str(tmp_path))
  real = next(iter(task.train_batches(0, 0, 1)))
  spec = task.batch_spec(config.batch_size)
  assert {k: (tuple(v.shape), str(v.dtype)) for k, v in real.items()} == {
      k: (v.shape, str(v.dtype)) for k, v in spec.items()
  }


@pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is not None, reason="libtpu is installed here"
)
def test_topology_without_libtpu_says_how_to_get_it():
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:runlocal", "--config.num_classes=10", "--topology=v5p-8"
  )
  assert out.returncode == 2
  assert "needs libtpu" in out.stderr and "Traceback" not in out.stderr
