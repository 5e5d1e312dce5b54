"""Test setup for every test process: quiet TF logging, and the peers' imports in a safe order."""

import importlib.util
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# torchvision (which timm imports) segfaults when it loads after TensorFlow in one process, and a
# test module may import TF (through our data pipeline) before the timm tests run.
if importlib.util.find_spec("torchvision") is not None:
  import torchvision  # pylint: disable=unused-import
