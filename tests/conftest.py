"""Test setup: quiet TF logging for every test process."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


