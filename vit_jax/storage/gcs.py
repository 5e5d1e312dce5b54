"""The clients a gs:// path goes through, loaded at the first one (a local run never imports this).

etils `epath` is the layer orbax saves checkpoints through (on a real bucket it uses TensorFlow's
GCS client, or gcsfs where EPATH_USE_TF=false); fsspec's GCS file system (gcsfs) lists and reads
byte ranges; Google's client reads, writes and deletes whole objects, with generation
preconditions. Their packages come in the `gcs` extra: a gs:// path without them is one error
line naming the install command (`as_epath`), before anything is read or written.
"""

import functools
import importlib
import logging
import os
import urllib.parse

from vit_jax import errors

INSTALL_GCS = "pip install -e .[gcs]"
_SCHEMES = ("gs",)
# What the `gcs` extra installs and a gs:// path needs: fsspec's GCS file system (epath uses it
# with EPATH_USE_TF=false) and Google's client (generation preconditions, TensorBoard's writer).
_CLIENT_MODULES = ("gcsfs", "google.cloud.storage")
_checked_clients = False


def as_epath(path):
  """`path` as an epath.Path, the client packages checked (a UserError without them)."""
  global _checked_clients
  scheme = urllib.parse.urlsplit(os.fspath(path)).scheme
  if scheme not in _SCHEMES:
    raise errors.ConfigError(
        f"{path}: {scheme}:// is not supported; use a local path or gs://BUCKET/..."
    )
  if not _checked_clients:
    for module in _CLIENT_MODULES:
      try:
        importlib.import_module(module)
      except ImportError as e:
        raise errors.MissingExtraError(
            f"{path} is in Cloud Storage, which needs the gcs extra ({module} is not installed): "
            f"{INSTALL_GCS}"
        ) from e
    _quiet_client_retries()
    _checked_clients = True
  from etils import epath  # pylint: disable=g-import-not-at-top  (orbax imports it anyway)

  return epath.Path(path)


class _ClientRetryLogFilter(logging.Filter):
  """Drops gcsfs's log of a request out of retries (with its traceback) when the error is an
  outage: `outages.ride_out` reports it in one line."""

  def filter(self, record):
    error = record.exc_info[1] if record.exc_info else None
    return error is None or errors.transient_cause(error) is None


def _quiet_client_retries() -> None:
  gcsfs_log = logging.getLogger("gcsfs")
  if not any(isinstance(f, _ClientRetryLogFilter) for f in gcsfs_log.filters):
    gcsfs_log.addFilter(_ClientRetryLogFilter())


@functools.cache
def client():
  """Google's client, one per process."""
  from google.cloud import storage as gcs  # pylint: disable=g-import-not-at-top

  return gcs.Client()


def blob(path):
  """Google's handle on object `path` (no request yet)."""
  as_epath(path)  # the client check
  parts = urllib.parse.urlsplit(os.fspath(path))
  return client().bucket(parts.netloc).blob(parts.path.lstrip("/"))


def refused():
  """The errors of a write whose precondition failed, or of an object that is gone."""
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

  return exceptions.PreconditionFailed, exceptions.NotFound


def filesystem(path):
  """fsspec's file system for a bucket path (gcsfs: what epath uses where EPATH_USE_TF=false)."""
  as_epath(path)  # the client check
  import fsspec  # pylint: disable=g-import-not-at-top  (the gcs extra brings it)

  return fsspec.filesystem(urllib.parse.urlsplit(os.fspath(path)).scheme)


def forget_listings(path) -> None:
  """Drops gcsfs's cached listings of `path` and the folders above it (they hold each object's
  size), which miss what was written since by other processes or through Google's client: in its
  instance here and in epath's, which passes finalize_on_close (etils/epath/backend.py)."""
  import fsspec  # pylint: disable=g-import-not-at-top

  for options in ({}, {"finalize_on_close": True}):
    fsspec.filesystem(urllib.parse.urlsplit(path).scheme, **options).invalidate_cache(path)
