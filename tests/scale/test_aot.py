"""The compile command on local CPU devices: its figures, its bad-input lines, and the trainer's
`check_memory`. (Compiling for TPU slices needs libtpu: tests/scale/test_aot_tpu.py.)"""

import importlib.util
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from tests import helpers
from vit_jax import errors
from vit_jax import startup
from vit_jax import tasks
from vit_jax.tpu_planning import aot
from vit_jax.tpu_planning import chips
from vit_jax.tpu_planning import collectives
from vit_jax.tpu_planning import peak_buffers
from vit_jax.tpu_planning import pod_table
from vit_jax.training import flops
from vit_jax.training import setup as setup_lib
from vit_jax.training import train

GIB = 2**30


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


# A compiled module's HLO as XLA prints it: result shapes before each op, operands by name only.
HLO = """HloModule jit_update_step, num_partitions=4

%add (a: f32[], b: f32[]) -> f32[] {
  ROOT %add.1 = f32[] add(%a, %b)
}

%all-reduce-scatter.1 (input: f32[64]) -> f32[16] {
  %all-reduce.2 = f32[64]{0} all-reduce(%input), replica_groups={{0,1,2,3}}, to_apply=%add
  ROOT %ds = f32[16]{0} dynamic-slice(%all-reduce.2, %i), dynamic_slice_sizes={16}
}

%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %ar.3 = f32[8]{0} all-reduce(%x), replica_groups=[2,2]<=[4], to_apply=%add
}

%cheap (p: f32[]) -> f32[] {
  %ar.4 = f32[]{:T(128)} all-reduce(%p), replica_groups={}, to_apply=%add
}

%costly (p: f32[]) -> f32[] {
  %ag.5 = f32[1024]{0} all-gather(%p), replica_groups={}, dimensions={0}
}

ENTRY %main (p0: f32[64]) -> f32[16] {
  %ar.1 = (f32[4]{0}, bf16[8]{0}) all-reduce(%a, %b), replica_groups={{0,1},{2,3}}, to_apply=%add
  %ags = (bf16[2]{0}, bf16[8]{0}) all-gather-start(%q), replica_groups={{0,1,2,3}}, dimensions={0}
  %agd = bf16[8]{0} all-gather-done(%ags)
  %rs = f32[4,8] reduce-scatter(%r), replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_0','axis_1'}
  %cps = (f32[6], f32[6], u32[], u32[]) collective-permute-start(%s), source_target_pairs={{0,1}}
  %cpd = f32[6]{0} collective-permute-done(%cps)
  %fusion = f32[16]{0} fusion(%p0), kind=kCustom, calls=%all-reduce-scatter.1
  %while = (s32[], f32[8]) while(%t), body=%body, backend_config={"known_trip_count":{"n":"5"}}
  %cond.1 = f32[] conditional(%pred, %x, %x), branch_computations={%cheap, %costly}
  %s1 = (f32[16], token[]) send(%g), frontend_attributes={_xla_megascale_transfer_type="ALL_REDUCE"}
  %s1-done = token[] send-done(%s1), channel_id=3, is_host_transfer=true
}
"""


def test_collective_traffic_counts_the_bytes_each_device_sends():
  traffic = collectives.collective_traffic(HLO, num_slices=3)
  sent = {kind: (t.ops, t.ici_bytes, t.dcn_bytes) for kind, t in traffic.items()}
  assert sent == {
      # (16 + 16 bytes) over groups of 2: 2 (n-1)/n x 32; 5 loop iterations of 32 bytes over 2;
      # the conditional's cheaper branch (4 bytes over all 4 partitions); 64 bytes over 3 slices.
      "all-reduce": (1 + 5 + 1 + 1, 32 + 5 * 32 + 2 * 3 / 4 * 4, 2 * 2 / 3 * 64),
      "all-gather": (1, 3 / 4 * 16, 0.0),  # the gathered bf16[8] of the start's (in, out)
      # a 128-byte shard of a 512-byte operand over 4; the fusion's 256 bytes over 4
      "reduce-scatter": (2, 3 / 4 * 512 + 3 / 4 * 256, 0.0),
      "all-to-all": (0, 0.0, 0.0),
      "collective-permute": (1, 24.0, 0.0),  # the sent f32[6]
  }


@pytest.fixture(scope="module")
def local():
  """(setup, report) of the ViT runlocal step compiled for this process's one CPU device."""
  config = helpers.vit_config("runlocal", num_classes=10, batch_size=8)
  setup = setup_lib.prepare(config, tasks.build_task_without_data(config))
  return setup, aot.compile_report(setup, train.jit_update_step(config, setup), config.batch_size)


def test_report_of_local_compile(local):
  """State bytes are exactly params + Adam's two moments; XLA's FLOPs are near the model's."""
  setup, report = local
  params = flops.count_params(setup.abstract_state["params"])
  assert abs(report.state_bytes - 3 * 4 * params) < 64  # + the step counter and Adam's count
  assert report.batch_bytes == 8 * (16 * 16 * 3 + 1 + 10) * 4
  assert report.temp_bytes > 0 and report.total_bytes > report.state_bytes
  assert 0.8 < report.xla_flops / report.model_flops < 2.0
  assert report.xla_bytes_accessed > report.state_bytes  # the step reads every parameter
  assert sum(t.ops for t in report.collectives.values()) == 0  # one device
  assert report.fits and report.hbm_headroom == 0.1  # a CPU has no HBM limit
  assert report.roofline() is None  # and no published peaks
  text = report.text()
  assert "params + optimizer state" in text and "temporaries" in text and ": fits" in text
  assert "no bounds on step time" in text
  small = aot.Report(**{**report.__dict__, "hbm_bytes": report.total_bytes // 2})
  with pytest.raises(aot.DoesNotFitError, match="model.remat=full.*bfloat16.*grad_accum_steps=2"):
    aot.require_fit(small)


def test_the_report_names_what_is_live_at_the_peak(local):
  """The trainer's step: its params are inputs, its activations come from the model's lines."""
  _, report = local
  sources = {group.source for group in report.peak.groups}
  assert "an input of the step" in sources
  assert any(source.startswith("vit_jax/models/") for source in sources), sources
  assert sum(group.bytes for group in report.peak.groups) <= report.peak.total_bytes
  assert "largest buffers live at the peak" in report.text()


def test_the_report_names_the_peak_of_a_step_already_in_the_compilation_cache(local, tmp_path):
  """XLA writes its memory files only when it compiles: the report compiles its step unless
  told it may load it."""
  setup, _ = local
  config = helpers.vit_config("runlocal", num_classes=10, batch_size=8)
  train_step = train.jit_update_step(config, setup)
  previous = jax.config.jax_compilation_cache_dir
  startup.use_compilation_cache(str(tmp_path))
  try:
    with jax.set_mesh(setup.mesh):
      train_step.lower(*setup.abstract_inputs(8)).compile()
    assert os.listdir(tmp_path)  # the step is in the cache
    assert aot.compile_report(setup, train_step, 8).peak is not None
    # The trainer's check loads it (its step is compiled again to run): no peak, said so.
    loaded = aot.compile_report(setup, train_step, 8, list_peak_buffers=False)
    assert loaded.peak is None and "not listed (the step came from the compilation cache)" in (
        loaded.text()
    )
  finally:
    startup.use_compilation_cache(previous)


def _two_outputs(x):  # f32[1024, 1024]
  half = x.astype(jnp.bfloat16) * 2  # bf16[1024, 1024], an output: live at the end
  return half, jnp.sin(x)  # f32[1024, 1024]


def test_peak_buffers_read_shapes_dtypes_and_source_lines(tmp_path):
  """XLA's own files, read back: each output with its dtype, shape and the line that made it."""
  x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)
  options = {**peak_buffers.DUMP_OPTIONS, "xla_dump_to": str(tmp_path)}
  jax.jit(_two_outputs).lower(x).compile(compiler_options=options)
  peak = peak_buffers.read(str(tmp_path))
  line = _two_outputs.__code__.co_firstlineno
  found = {(g.dtype, g.shape, g.source.rpartition("/")[2]): g.bytes for g in peak.groups}
  assert found[("f32", (1024, 1024), "an input of the step")] == 4 * 2**20
  assert found[("bf16", (1024, 1024), f"test_aot.py:{line + 1}")] == 2 * 2**20
  assert found[("f32", (1024, 1024), f"test_aot.py:{line + 2}")] == 4 * 2**20
  assert peak.bytes_by_dtype == {"f32": 8 * 2**20, "bf16": 2 * 2**20}
  assert peak_buffers.read(str(tmp_path / "nothing")) is None  # e.g. a cached compile


def test_headroom_counts_in_the_fit(local):
  _, report = local
  tight = aot.Report(**{**report.__dict__, "hbm_bytes": int(report.total_bytes / 0.95)})
  assert not tight.fits  # 95% of the device: over the default 10% headroom
  assert "DOES NOT FIT the headroom" in tight.text()
  with pytest.raises(aot.DoesNotFitError, match=r"10% of it is kept free \(--config.hbm_headroom"):
    aot.require_fit(tight)
  aot.require_fit(aot.Report(**{**tight.__dict__, "hbm_headroom": 0.0}))


def test_roofline_bounds_from_the_chip_figures():
  """The step takes at least its slowest part; MFU and chip-hours follow from that bound."""
  v5p = chips.BY_GENERATION["v5p"]
  traffic = {
      "all-reduce": collectives.Traffic(ops=3, ici_bytes=1.2e9, dcn_bytes=0.25e9),
      "all-gather": collectives.Traffic(ops=1, ici_bytes=0.6e9),
  }
  report = aot.Report(
      device_kind="TPU v5",
      num_devices=32,
      num_slices=2,
      mesh={"dcn": 2, "data": 16},
      batch_size=4096,
      total_steps=10_000,
      state_bytes=GIB,
      batch_bytes=GIB,
      temp_bytes=GIB,
      total_bytes=3 * GIB,
      hbm_bytes=95 * GIB,
      hbm_headroom=0.1,
      xla_flops=45.9e12,  # 0.1 s at 459 TFLOP/s
      xla_bytes_accessed=2765e9 * 0.05,  # 0.05 s
      model_flops=36.72e12,
      collectives=traffic,
      kernels=0,
      advice=[],
  )
  roofline = report.roofline()
  assert roofline.compute == pytest.approx(0.1) and roofline.hbm == pytest.approx(0.05)
  assert roofline.ici == pytest.approx(1.8e9 / v5p.ici_send)  # 3 ms at 600 GB/s
  assert roofline.dcn == pytest.approx(0.25e9 / v5p.dcn_send)  # 40 ms at 50 Gbps
  assert roofline.lower_bound == pytest.approx(0.1)
  assert roofline.without_overlap == pytest.approx(0.1 + 0.003 + 0.04)
  assert report.mfu_bound() == pytest.approx(0.8)  # 36.72 TFLOP in 0.1 s of 459 TFLOP/s
  assert report.chip_hours_bound() == pytest.approx(32 * 10_000 * 0.1 / 3600)
  text = report.text()
  assert "not measurements" in text and v5p.source in text
  assert ">= 100 ms lower bound" in text and "<= 80% upper bound" in text
  assert "chip-hours                >= 8.89 lower bound, 10,000 steps on 32 chips" in text
  assert ">= 1.91 GiB sent by each device, 0.23 GiB of it between slices" in text
  assert "DCN 40 ms" in text


def test_compile_command_local_devices():
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:runlocal", "--config.num_classes=10", devices=2
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert "2 x cpu, mesh data:2, global batch 8" in out.stdout
  # The fp32 gradients averaged over the data axis: an all-reduce over 2 devices sends
  # 2 (n-1)/n = 1x the gradients' bytes from each (and a few bytes of metrics).
  config = helpers.vit_config("runlocal", num_classes=10)
  params = flops.count_params(
      setup_lib.prepare(config, tasks.build_task_without_data(config)).abstract_state["params"]
  )
  sent = re.search(r"all-reduce +\d+ ops, >= ([\d.]+) MiB", out.stdout)
  assert sent and float(sent.group(1)) == pytest.approx(4 * params / 2**20, abs=0.05), out.stdout
  assert "no bounds on step time: no published peak figures for a cpu" in out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--topology=v5p-63"], "Unknown TPU topology 'v5p-63'"),
        (["--config.mesh=data:3"], "mesh='data:3' has 3 slots but there are 2 devices"),
        (["--config.batch_size=5"], "batch_size=5 must be divisible by the batch shards"),
        (["--config.hbm_headroom=1.5"], "--config.hbm_headroom=1.5 must be in [0, 1)"),
        (["--num_slices=2"], "--num_slices=2: give 1, or 2 or more with a TPU slice"),
        (["--num_slices=0", "--topology=v5p-8"], "--num_slices=0: give 1"),
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


def test_an_unknown_table_row_is_refused_naming_the_rows():
  out = compile_command("--table", "--table_row=ViT-g/14")
  assert out.returncode == 2, out.stderr[-3000:]
  lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
  assert len(lines) == 1 and "Traceback" not in out.stderr
  assert "--table_row='ViT-g/14' is not a row of the table" in lines[0]
  assert "'ViT-g/14, ImageNet-21k'" in lines[0]
  assert "Compiling" not in out.stdout


def test_pod_table_rows_are_the_recipes_as_their_configs_define_them():
  """docs/pod.md's table has one row per recipe that `vit_jax.compile --table` compiles, with
  the config's own slice and batch, and lists the rows' commands as `--table` prints them.
  (tests/scale/test_aot_tpu.py reruns rows' commands against their memory and fit.)"""
  with open(os.path.join(helpers.ROOT, "docs", "pod.md"), encoding="utf-8") as f:
    text = f.read()
  rows = pod_table.read(text)
  assert list(rows) == [name for name, _ in pod_table.ROWS]
  assert pod_table.commands() in text
  for name, args in pod_table.ROWS:
    # Nothing changes the recipe: the flags give only the vocabulary, which data would give.
    assert all(a.startswith(("--config=", "--config.tokenizer.")) for a in args), args
    config = pod_table.config_of(args, helpers.ROOT)
    slice_chips, batch = rows[name][:2]
    chips_in_slice = aot.parse_topology(config.target_topology).chips
    assert slice_chips == f"{config.target_topology} ({chips_in_slice})", name
    assert batch == str(config.batch_size), name


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
