"""The paper recipes' train steps compile for their TPU slices and reproduce docs/pod.md's table;
two slices compile with a dcn axis; the HBM headroom counts in the fit.

libtpu compiles for a slice it does not have, so this runs on any machine where libtpu is
installed: a separate venv (scripts/test_tpu_compile.sh builds .venv-tpu), never the main
one. Elsewhere every test here is skipped. Each compile takes minutes on a small CPU machine.
"""

import functools
import importlib.util
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from tests import helpers
from vit_jax import tasks
from vit_jax.tpu_planning import aot
from vit_jax.tpu_planning import peak_buffers
from vit_jax.tpu_planning import pod_table
from vit_jax.training import flops
from vit_jax.training import setup as setup_lib

pytestmark = [
    pytest.mark.tpu_compile,
    pytest.mark.skipif(
        importlib.util.find_spec("libtpu") is None,
        reason="needs libtpu (scripts/test_tpu_compile.sh)",
    ),
]

# The rows of docs/pod.md's table whose commands CI reruns (the whole table, `python -m
# vit_jax.compile --table`, takes over an hour on 2 cores, most of it the ViT-g/14 and G/14 rows):
# the ViT-B/16 ImageNet-1k recipe, and the text recipe of the longest sequences, Llama-3.1-8B's
# 8,192 tokens: splash attention and the token loss (over 128,256 ids) as GPT-2's row has them,
# and the largest model, which fits only with its state sharded over 256 chips (FSDP), its
# layers scanned and recomputed, its batch in two microbatches. Its one compile stands in for
# GPT-2's row, which takes the same paths but these.
ROWS_IN_CI = ("ViT-B/16, ImageNet-1k", "Llama-3.1-8B")


def compile_argv(*args) -> tuple[list, dict]:
  """`python -m vit_jax.compile ARGS` as docs/pod.md writes it, and its environment."""
  env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=helpers.ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("XLA_FLAGS", None)
  return [sys.executable, "-m", "vit_jax.compile", *args], env


def compile_command(*args):
  argv, env = compile_argv(*args)
  return subprocess.run(
      argv, env=env, capture_output=True, text=True, timeout=1800, cwd=helpers.ROOT
  )


def error_lines(out) -> list[str]:
  return [line for line in out.stderr.splitlines() if line.startswith("error: ")]


@pytest.fixture(scope="module", autouse=True)
def row_compiles(tmp_path_factory):
  """Starts the commands of the rows CI reruns as the module starts, all at once: each compile is
  one core's work for minutes, so they run beside each other and beside this module's other
  tests, which come first in the file; the rows' tests, at its end, wait for them."""
  folder = tmp_path_factory.mktemp("rows")
  started = {}
  for i, name in enumerate(ROWS_IN_CI):
    argv, env = compile_argv(*dict(pod_table.ROWS)[name])
    # Files, not pipes: a pipe nobody reads yet would stall a compile that fills it.
    stdout, stderr = open(folder / f"{i}.out", "w+"), open(folder / f"{i}.err", "w+")
    process = subprocess.Popen(argv, env=env, cwd=helpers.ROOT, stdout=stdout, stderr=stderr)
    started[name] = (process, stdout, stderr)
  yield started
  for process, stdout, stderr in started.values():
    if process.poll() is None:
      process.kill()
      process.wait()
    stdout.close()
    stderr.close()


@functools.cache
def _finished(process, stdout, stderr) -> subprocess.CompletedProcess:
  process.wait(timeout=1800)
  stdout.seek(0)
  stderr.seek(0)
  return subprocess.CompletedProcess(process.args, process.returncode, stdout.read(), stderr.read())


def row_output(row_compiles, name: str) -> subprocess.CompletedProcess:
  """The output of a table row's command, run from the repository root as docs/pod.md writes it."""
  return _finished(*row_compiles[name])


def test_two_slices_compile_with_a_dcn_axis():
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:runlocal",
      "--config.num_classes=10",
      "--config.batch_size=64",
      "--topology=v5p-8",
      "--num_slices=2",
  )
  print(out.stdout)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
  assert "8 x TPU v5 in 2 slices, mesh dcn:2,data:4, global batch 64" in out.stdout
  # The gradients cross between the slices over the data-center network, and bound the step.
  between = re.search(
      r"sent by each device, ([\d.]+) (KiB|MiB|GiB) of it between slices", out.stdout
  )
  assert between and float(between.group(1)) > 0, out.stdout
  assert re.search(r"lower bound, the largest of .*, DCN [\d.]+ [mun]?s$", out.stdout, re.M)


def test_a_step_that_fits_only_without_the_headroom_is_refused():
  """The tiny runlocal ViT with a head over 9.8 million classes (0.94 G weights, with their Adam
  moments and gradients) at batch 8 needs 92% of one v5e chip's HBM (14.77 GiB): more than the
  90% the default 10% headroom leaves, less than XLA's own limit (it compiles). The memory is
  in weights, not activations: libtpu's compile time grows with the batch (ViT-S/16's one block
  at batch 5120, the same 92%, took 50 CPU-seconds to compile; this takes 10)."""
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:runlocal",
      "--config.num_classes=9800000",
      "--topology=v5e-1",
      "--config.batch_size=8",
  )
  assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
  (error,) = error_lines(out)
  assert "Traceback" not in out.stderr and "kept free (--config.hbm_headroom)" in error
  needs = float(re.search(r"needs ([\d.]+) GiB", error).group(1))
  assert 16 * 0.9 < needs <= 16, error  # fits the chip, not the headroom
  assert ": DOES NOT FIT the headroom" in out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--topology=v5p-6"], "error: Unknown TPU topology 'v5p-6'"),
        (["--config.mesh=data:3"], "error: mesh='data:3' has 3 slots but there are 4 devices"),
        (["--config.batch_size=6"], "error: --config.batch_size=6 must be divisible by the batch"),
    ],
)
def test_bad_input_for_a_slice_is_refused_in_one_line(args, message):
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:runlocal",
      "--config.num_classes=10",
      "--topology=v5p-8",  # 4 chips
      *args,
  )
  assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
  errors = error_lines(out)
  assert len(errors) == 1 and errors[0].startswith(message), out.stderr[-2000:]
  assert "Traceback" not in out.stderr and "Compiling" not in out.stdout


def test_a_step_that_does_not_fit_names_what_to_change():
  out = compile_command(
      f"--config={helpers.VIT_CONFIG}:dataset=imagenet2012,variant=B/16",
      "--topology=v5e-4",
      "--config.batch_size=4096",
  )
  assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
  # Over HBM: XLA either refuses the program, or compiles it and the report says it is too big.
  error = next(line for line in out.stderr.splitlines() if line.startswith("error: "))
  assert error.startswith("error: the train step ") and "model.remat=full" in error


def test_peak_buffers_count_the_bytes_a_tpu_layout_takes(tmp_path):
  """A TPU's tiles pad an array's minor dimension to 128 lanes: a bf16 (100, 100) array takes at
  least 100 x 128 x 2 bytes whichever layout XLA picks, and the peak lists what it takes, not its
  20,000 bytes of elements (which XLA's live-range file gives)."""
  mesh = jax.sharding.Mesh(aot.parse_topology("v5p-8").devices()[:1], ("d",))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  x = jax.ShapeDtypeStruct((100, 100), jnp.float32)
  options = {**peak_buffers.DUMP_OPTIONS, "xla_dump_to": str(tmp_path)}
  step = jax.jit(lambda x: (x * 2).astype(jnp.bfloat16), in_shardings=replicated)
  step.lower(x).compile(compiler_options=options)
  found = {(g.dtype, g.shape): g.bytes for g in peak_buffers.read(str(tmp_path)).groups}
  assert found[("bf16", (100, 100))] >= 100 * 128 * 2, found


# The rows' tests last: their compiles run while the tests above do.
@pytest.mark.parametrize("name", ROWS_IN_CI)
def test_a_table_rows_command_reproduces_its_row(row_compiles, name):
  with open(os.path.join(helpers.ROOT, "docs", "pod.md"), encoding="utf-8") as f:
    slice_chips, batch, memory, fits = pod_table.read(f.read())[name][:4]
  out = row_output(row_compiles, name)
  print(out.stdout)  # the report, shown in CI's log (scripts/test_tpu_compile.sh passes -rP)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
  chips = slice_chips.split("(")[1].rstrip(")")
  assert out.stdout.splitlines()[1].startswith(f"{chips} x TPU v5, ")  # the slice, not the CPU
  assert f"global batch {batch}" in out.stdout
  assert re.search(rf"^  total +{re.escape(memory)} of ", out.stdout, re.M), (memory, out.stdout)
  assert fits == "yes" and re.search(r"^  total .*: fits$", out.stdout, re.M)
  # The bounds, each labelled as one, from the chip's published figures.
  assert (
      "bounds from TPU v5p's published peaks (https://cloud.google.com/tpu/docs/v5p)" in out.stdout
  )
  for label in (">= .* lower bound", "<= .*% upper bound", "chip-hours +>= .* lower bound"):
    assert re.search(label, out.stdout), label


# benchmarks/step_memory.py's figures for the ViT-B/16 ImageNet-1k step on a v5p-8 at batch 1024
# (benchmarks/README.md): ours as the recipe runs it, and big_vision's own step beside it. Memory
# per chip in GiB, traffic (XLA's bytes accessed) per chip in TB.
VIT_B16_PEAK_GIB, VIT_B16_TRAFFIC_TB = 15.05, 0.154
BIG_VISION_PEAK_GIB, BIG_VISION_TRAFFIC_TB = 16.11, 0.167


def test_vit_b16_recipe_stays_under_big_visions_step(row_compiles):
  """The recipe's step may not grow back: its peak and memory traffic at most 2% over their
  measured figures and under big_vision's step at the same batch per chip. The report names what
  is live at the peak: bf16 probabilities, no fp32 logits. The figures were measured on a v5p-8
  at batch 1024; the table's row (16 chips, batch 4096) is the same data-parallel program per
  chip, 256 images each (15.06 GiB against 15.05 GiB, the same traffic), so its compile serves."""
  out = row_output(row_compiles, "ViT-B/16, ImageNet-1k")
  assert out.returncode == 0, out.stderr[-3000:]
  total = float(re.search(r"^  total +([\d.]+) GiB of ", out.stdout, re.M)[1])
  assert total <= min(1.02 * VIT_B16_PEAK_GIB, BIG_VISION_PEAK_GIB), total
  traffic = float(re.search(r"^  memory traffic per step +([\d.]+) GiB", out.stdout, re.M)[1])
  traffic_tb = traffic * 2**30 / 1e12
  assert traffic_tb <= min(1.02 * VIT_B16_TRAFFIC_TB, BIG_VISION_TRAFFIC_TB), traffic_tb
  assert "largest buffers live at the peak" in out.stdout
  assert re.search(r"12 x bf16\[256,12,197,197\] +vit_jax/models/attention.py:\d+", out.stdout)
  assert not re.search(r"f32\[256,12,197,197\]", out.stdout)  # no fp32 logits kept per layer


def test_vit_b16_sends_its_gradients_once_per_step(row_compiles):
  """The ViT-B/16 ImageNet-1k recipe is data parallel on 16 chips: each step all-reduces the
  gradients, 2 x 15/16 of their bytes from each chip (bf16 for the matmuls' weights, which XLA
  reduces before casting them to the parameters' fp32; fp32 for the rest)."""
  name = "ViT-B/16, ImageNet-1k"
  config = pod_table.config_of(dict(pod_table.ROWS)[name], helpers.ROOT)
  params = flops.count_params(
      setup_lib.prepare(config, tasks.build_task_without_data(config)).abstract_state["params"]
  )
  out = row_output(row_compiles, name)
  assert out.returncode == 0, out.stderr[-3000:]
  sent = re.search(r"^    all-reduce +\d+ ops, >= ([\d.]+) GiB$", out.stdout, re.M)
  assert sent, out.stdout
  sent_bytes = float(sent.group(1)) * 2**30
  assert 2 * 15 / 16 * 2 * params <= sent_bytes <= 2 * 15 / 16 * 4 * params, (sent_bytes, params)
