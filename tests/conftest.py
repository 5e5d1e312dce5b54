"""Test setup for every test process: quiet TF logging, the peers' imports in a safe order, and
the fixtures that tests in several folders share."""

import atexit
import importlib.util
import os
import shutil
import tempfile

import pytest

from tests import gcs_emulator
from tests import helpers
from vit_jax import startup  # no JAX yet: it reads the variables below when imported

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Read when JAX's backend starts, after this (tests/helpers.py says why).
os.environ["XLA_FLAGS"] = f"{helpers.TEST_XLA_FLAGS} {os.environ.get('XLA_FLAGS', '')}".strip()
# One persistent compilation cache for the whole session, every worker and every process a test
# starts (read at JAX's import; CI's own, shared by all its stages, when it set one), keeping every
# program however quickly it compiled: the tests compile the same small steps many times over.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jax_compilation_cache_")
  atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
os.environ.setdefault(startup.MIN_COMPILE_SECS_VARIABLE, "0")
# Hugging Face's `datasets` and hub client never reach the network, and the datasets cache (what
# hf: datasets convert into when no data_dir is given) is the session's own; read at their import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
if "HF_DATASETS_CACHE" not in os.environ:
  os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="hf_datasets_cache_")
  atexit.register(shutil.rmtree, os.environ["HF_DATASETS_CACHE"], ignore_errors=True)
# gs:// paths go to the emulator of the `gcs` fixture (below); these settings are read once.
os.environ.update(gcs_emulator.PROCESS_SETTINGS)

# torchvision (which timm imports) segfaults when it loads after TensorFlow in one process, and a
# test module may import TF (through our data pipeline) before the timm tests run.
if importlib.util.find_spec("torchvision") is not None:
  import torchvision  # pylint: disable=unused-import  # noqa: F401


def pytest_collection_modifyitems(items):
  """A `default_emitters` test needs a session of XLA's default emitters (tests/helpers.py)."""
  if helpers.DEFAULT_EMITTERS:
    return
  skip = pytest.mark.skip(
      reason=f"compares programs under XLA's default emitters: {helpers.DEFAULT_EMITTERS_VARIABLE}"
      "=1 (scripts/test_multiprocess.sh runs it)"
  )
  for item in items:
    if "default_emitters" in item.keywords:
      item.add_marker(skip)


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
  """A TFDS data_dir with the embedded digits dataset built in it (offline, ~1-3 s)."""
  # Imported here so that test processes that need no images never load TensorFlow.
  from vit_jax.data.image import pipeline  # pylint: disable=g-import-not-at-top

  data_dir = str(tmp_path_factory.mktemp("tfds_digits"))
  pipeline.dataset_info("sklearn_digits", data_dir=data_dir)
  return data_dir


@pytest.fixture(scope="session")
def gcs():
  """A Cloud Storage API on localhost (tests/gcs_emulator.py), shared by the session; this process
  and the commands it starts reach it through the environment. Each test takes its own folder:
  `gcs.new_dir()`."""
  with gcs_emulator.running() as emulator:
    yield emulator
