"""The one error for a dataset that is not on disk, shared by the image and text pipelines."""

from vit_jax import errors


class DatasetNotPreparedError(errors.UserError, FileNotFoundError):
  """A dataset is not in data_dir (and nothing may be downloaded now); the message says how to
  prepare it."""
