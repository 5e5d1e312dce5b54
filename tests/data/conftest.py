"""Shared fixtures: one sklearn_digits build per test session (~1-3 s)."""

import pytest

from vit_jax.data.image import pipeline


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  pipeline.dataset_info("sklearn_digits", data_dir=data_dir)  # Builds it offline.
  return data_dir
