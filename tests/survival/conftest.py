"""One tiny trained ViT workdir shared by the survival battery, and snapshot helpers."""

import hashlib
import os
import shutil

import pytest

from tests import helpers
from vit_jax.data.image import pipeline

# The tiny run the battery trains once; the same settings as flags and as an in-process config.
TINY_SETTINGS = {
    "total_steps": 6,
    "batch_size": 16,
    "checkpoint_every": 2,
    "keep_checkpoints": 3,
    "eval_every": 6,
    "eval_max_batches": 1,
    "log_every": 1,
    "progress": "lines",
    "model.depth": 1,
    "optimizer.warmup_steps": 1,
}
TINY = [f"--config.{key}={value}" for key, value in TINY_SETTINGS.items()]


def tiny_config(data_dir, **overrides):
  """configs/vit.py with TINY_SETTINGS, what `tiny_command` trains with."""
  config = helpers.vit_config("", data_dir=data_dir)
  for key, value in {**TINY_SETTINGS, **overrides}.items():
    *parents, last = key.split(".")
    node = config
    for parent in parents:
      node = node[parent]
    node[last] = value
  return config


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("tfds_digits"))
  pipeline.dataset_info("sklearn_digits", data_dir=data_dir)
  return data_dir


def tiny_command(workdir, data_dir, *extra):
  return helpers.main_command(workdir, "", f"--config.data_dir={data_dir}", *TINY, *extra)


@pytest.fixture(scope="session")
def trained(tmp_path_factory, digits_dir):
  """A finished 6-step run with checkpoints at steps 2, 4 and 6 (never modified: copy it first).

  Three steps, so that a fallback past the damaged newest one must pick the newest intact step
  (4), not merely an intact one."""
  workdir = tmp_path_factory.mktemp("trained") / "w"
  result = helpers.run(tiny_command(workdir, digits_dir))
  assert result.returncode == 0, result.stderr[-3000:]
  return workdir


@pytest.fixture
def trained_copy(trained, tmp_path):
  copy = tmp_path / "w"
  shutil.copytree(trained, copy)
  return copy


def snapshot(path) -> dict:
  """{relative path: (size, sha256)} of every file under `path` (or of the file itself)."""
  path = str(path)
  if os.path.isfile(path):
    with open(path, "rb") as f:
      return {"": (os.path.getsize(path), hashlib.sha256(f.read()).hexdigest())}
  out = {}
  for root, _, files in os.walk(path):
    for name in files:
      full = os.path.join(root, name)
      with open(full, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
      out[os.path.relpath(full, path)] = (os.path.getsize(full), digest)
  return out


def assert_one_line_error(stderr: str, *names):
  """A user error: one `error:` line naming each of `names`, and no traceback."""
  assert "Traceback" not in stderr, stderr[-3000:]
  lines = [line for line in stderr.splitlines() if line.startswith("error:")]
  assert len(lines) == 1, stderr[-3000:]
  for name in names:
    assert name in lines[0], (name, lines[0])


def damage(step_dir, how):
  """Damages checkpoint step `step_dir` as a crash or a bad disk would."""
  state = os.path.join(step_dir, "state")
  if how == "no_model_record":
    shutil.rmtree(os.path.join(step_dir, "model"))
    return
  if how == "no_manifest":
    os.remove(os.path.join(state, "manifest.ocdbt"))
    return
  # Every data file: orbax spreads a step's arrays over as many files as its writes were
  # batched into (that varies with timing), and damage to one holding only optimizer state would
  # leave the params readable.
  files = [os.path.join(r, f) for r, _, fs in os.walk(state) for f in fs if "/d/" in r + "/"]
  assert files, state
  for path in files:
    with open(path, "r+b") as f:
      f.truncate(0 if how == "zero_length" else os.path.getsize(path) // 2)
