"""Converting bfloat16 Llama shards holds one copy of the weights in host memory: reading them
(a tensor at a time), writing our workdir (a few arrays at a time, uncopied) and exporting it
back to safetensors (restored and written a tensor at a time); the round trip is exact."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests import peers
from vit_jax.interop import orbax_format
from vit_jax.interop import safetensors_files

torch = peers.require("torch")
transformers = peers.require("transformers")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPE = dict(
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
)

# Each measure runs in a process of its own: what every conversion pays once (imports, JAX's
# start, orbax's threads) is paid by a tiny checkpoint's first; freed memory goes back to the
# system (malloc_trim), so that reusing it cannot hide an allocation; then Linux's peak RSS
# restarts from the current RSS (clear_refs 5) and the peak above it counts every page touched:
# numpy's, safetensors', TensorStore's and XLA's alike, and a memory map's (tracemalloc would
# see numpy's alone).
_PEAK = """
import ctypes, json, sys

def status(key):
  with open("/proc/self/status") as f:
    return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

def peak(run):
  ctypes.CDLL("libc.so.6").malloc_trim(0)
  with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
  base = status("VmRSS")
  value = run()
  return status("VmHWM") - base, value
"""
_PEAK_OF_A_READ = _PEAK + """
from vit_jax import interop
interop.load(sys.argv[1])
read, ckpt = peak(lambda: interop.load(sys.argv[2]))
print(json.dumps({"peak": read, "held": sum(value.nbytes for value in ckpt.params.values())}))
"""
_PEAKS_OF_CONVERSIONS = _PEAK + """
from vit_jax import convert
tiny, big, out = sys.argv[1:]
peaks = {}
for name, src in (("tiny", tiny), ("big", big)):
  for to, source, target in (("orbax", src, "workdir"), ("hf", "workdir", "hf")):
    args = [source if to == "orbax" else f"{out}/{name}_{source}", f"{out}/{name}_{target}"]
    peaks[f"{name}_{to}"], code = peak(lambda: convert.main(args + ["--to", to]))
    assert code == 0, (name, to)
print(json.dumps(peaks))
"""


def save_llama(path, dtype=torch.bfloat16, max_shard_size="8MB", **shape) -> int:
  """A random Llama saved as save_pretrained shards it; returns its weights' bytes."""
  torch.manual_seed(0)
  config = transformers.LlamaConfig(**SHAPE, **shape)
  model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
  model.save_pretrained(path, max_shard_size=max_shard_size)
  return sum(p.numel() * p.element_size() for p in model.parameters())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
  path = tmp_path_factory.mktemp("tiny") / "hub"
  save_llama(
      path,
      max_shard_size="100KB",
      vocab_size=320,
      hidden_size=64,
      num_hidden_layers=2,
      intermediate_size=96,
  )
  return str(path)


def peaks(script: str, *args) -> dict:
  if not os.access("/proc/self/clear_refs", os.W_OK):
    pytest.skip("the peak RSS is reset through Linux's /proc/self/clear_refs")
  run = subprocess.run(
      [sys.executable, "-c", script, *map(str, args)],
      capture_output=True,
      text=True,
      cwd=ROOT,
      timeout=300,
      env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"),
  )
  assert run.returncode == 0, run.stderr[-3000:]
  return json.loads(run.stdout.splitlines()[-1])


def test_reading_bf16_shards_holds_one_copy_of_the_weights(tiny, tmp_path):
  weights = save_llama(
      tmp_path / "big",
      vocab_size=8192,
      hidden_size=256,
      num_hidden_layers=16,
      intermediate_size=768,
  )  # 33 MB
  assert len(list((tmp_path / "big").glob("*.safetensors"))) > 3
  measured = peaks(_PEAK_OF_A_READ, tiny, tmp_path / "big")
  assert measured["held"] == weights  # kept in bfloat16: one copy is the weights' size
  # One copy, the largest tensor read beside it (the 4 MB embedding) and some slack; reading
  # the files whole and then converting held at least two.
  assert measured["peak"] < 1.3 * weights, (measured, weights)


def test_converting_bf16_shards_both_ways_holds_one_copy_of_the_weights(tiny, tmp_path):
  big = tmp_path / "big"
  weights = save_llama(
      big,
      max_shard_size="50MB",
      vocab_size=4096,
      hidden_size=1024,
      num_hidden_layers=12,
      intermediate_size=2816,
  )  # 297 MB
  measured = peaks(_PEAKS_OF_CONVERSIONS, tiny, big, tmp_path)
  # One copy (the converted tree, or the restored params), one array's buffers and some
  # slack; orbax's own writer held about three copies (it copies the tree, then encodes it
  # all at once) and its reader about one and a half.
  assert measured["big_orbax"] < 1.3 * weights, (measured, weights)
  assert measured["big_hf"] < 1.3 * weights, (measured, weights)
  # The round trip is exact, and orbax's own reader (the trainer's) reads the workdir.
  as_bits = lambda value: np.asarray(value).view(np.uint16)
  with safetensors_files.Tensors(str(big)) as theirs:
    with safetensors_files.Tensors(str(tmp_path / "big_hf")) as back:
      assert set(back) == set(theirs)
      for name in theirs:
        np.testing.assert_array_equal(as_bits(back[name]), as_bits(theirs[name]), name)
    state = orbax_format.read_state_dir(str(tmp_path / "big_workdir/checkpoints/0/state"))
    embedding = state["params"]["wte"]["embedding"]
    np.testing.assert_array_equal(as_bits(embedding), as_bits(theirs["model.embed_tokens.weight"]))
