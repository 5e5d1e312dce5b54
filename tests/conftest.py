"""Test setup: quiet TF, keep it off accelerators, and register the `slow` marker."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_configure(config):
  config.addinivalue_line("markers", "slow: takes more than ~20 s on 2 CPU cores")
