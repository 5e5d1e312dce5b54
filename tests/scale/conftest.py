import pytest

from vit_jax.data.image import pipeline


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
  """A TFDS data_dir with the embedded digits dataset built in it (offline)."""
  data_dir = str(tmp_path_factory.mktemp("tfds_digits"))
  pipeline.dataset_info("sklearn_digits", data_dir=data_dir)
  return data_dir
