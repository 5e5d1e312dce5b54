"""The errors a user can cause and fix (bad config, missing data, wrong checkpoint or workdir).

Every command-line entry point prints a `UserError` as one line (`error: ...`) and exits with
code 2, with nothing written; a storage that did not answer (`StorageUnavailableError`) exits with
EXIT_STORAGE_UNAVAILABLE instead, so that a job's wrapper can tell "rerun later" from "fix it".
Only these classes are dressed that way: a bare `ValueError` or `KeyError` from inside our code is
a bug and keeps its traceback.

The classes also derive from the builtin they replace (`ValueError`, `FileNotFoundError`), so
library callers that catch those keep working. This module imports nothing of ours, so every
module can raise from it.
"""

import contextlib
import errno
import os
import re
import sys


class UserError(Exception):
  """Something the user gave us is wrong; the message names it and says how to fix it."""


class ConfigError(UserError, ValueError):
  """A config value is out of range, of an unknown choice, or inconsistent with another."""


class DataError(UserError, ValueError):
  """A dataset, split or data file is missing, empty, unreadable or too small."""


class MissingFileError(UserError, FileNotFoundError):
  """A file or directory the user named does not exist."""


class DatasetNotPreparedError(UserError, FileNotFoundError):
  """A dataset is not in data_dir (and nothing may be downloaded now); the message says how to
  prepare it (the image and text pipelines both raise it)."""


class DownloadFailedError(DatasetNotPreparedError):
  """A dataset's download did not get through (no network, a proxy or server that does not
  answer): it is not prepared, and an optional evaluator of it is left out; the message names
  the URL and how to prepare the dataset elsewhere."""


class WorkdirError(UserError):
  """The workdir (or a convert destination) cannot be used without losing or mixing up work."""


class CheckpointError(UserError, ValueError):
  """No readable checkpoint: every step is damaged, or none was ever written."""


class ConversionError(UserError, ValueError):
  """Pretrained parameters do not fit a model, or a checkpoint cannot be converted: missing,
  unexpected or wrongly shaped keys, another architecture, or an option the target format cannot
  express."""


class MissingExtraError(UserError, ImportError):
  """A path or option needs packages of an optional extra that is not installed (gs:// paths:
  the `gcs` extra); the message gives the install command."""


class StorageError(UserError, OSError):
  """The file system refused a write: it is full, over quota, read-only or not ours to write."""


class StorageUnavailableError(UserError, OSError):
  """Storage did not answer (a timeout, a refused or dropped connection, HTTP 408, 429 or 5xx)
  for longer than the outage budget (vit_jax/storage/outages.py ride_out); nothing saved was lost,
  and the same command can be rerun once it answers."""


USER_ERRORS = (UserError,)
# The exit code of a StorageUnavailableError: sysexits.h's EX_TEMPFAIL, "a temporary failure; the
# user is invited to retry".
EXIT_STORAGE_UNAVAILABLE = 75

# What each refusal says about the file system holding the file; anything else is not the user's.
_STORAGE_CAUSES = {
    errno.ENOSPC: "is full",
    errno.EDQUOT: "is over its quota",
    errno.EROFS: "is read-only",
    errno.EACCES: "does not let this user write there",
    errno.ENOENT: "no longer holds it (the bucket or the folder was deleted)",
}
_FIXES = {
    errno.ENOSPC: "free some space",
    errno.EDQUOT: "free some space or raise the quota",
    errno.EROFS: "use a writable location",
    errno.EACCES: "fix the permissions or use a writable location",
    errno.ENOENT: "restore it or use another location",
}
# A bucket's refusals, as the errno of the same refusal on a disk: no access (401, 403), or no
# such bucket (404). Only HTTP answers map to ENOENT: a local file that is missing is no refusal.
_HTTP_REFUSALS = {401: errno.EACCES, 403: errno.EACCES, 404: errno.ENOENT}
# TensorStore (orbax's writer) wraps the OS error in a message: ... [os_error_code='28'].
_TENSORSTORE_ERRNO = re.compile(r"os_error_code='?(\d+)")
_TENSORSTORE_FILE = re.compile(r'(?:local )?file "([^"]+)"')


def storage_cause(exc: BaseException) -> tuple[int, str | None] | None:
  """(errno, path or None) when `exc` or an exception it was raised from or during is a refused
  write (ENOSPC, EDQUOT, EROFS, EACCES), as an OSError or TensorStore's message, or a bucket's
  refusal (HTTP 401, 403: EACCES; 404: ENOENT); else None."""
  found, seen = [], set()
  while exc is not None and id(exc) not in seen:
    seen.add(id(exc))
    if isinstance(exc, OSError) and exc.errno in _STORAGE_CAUSES and exc.errno != errno.ENOENT:
      found.append((exc.errno, exc.filename))
    status = _http_status(exc)
    if status in _HTTP_REFUSALS:
      found.append((_HTTP_REFUSALS[status], None))
    code = _TENSORSTORE_ERRNO.search(str(exc))
    if code and int(code.group(1)) in _STORAGE_CAUSES:
      path = _TENSORSTORE_FILE.search(str(exc))
      found.append((int(code.group(1)), path.group(1) if path else None))
    exc = exc.__cause__ or exc.__context__
  if not found:
    return None
  # The first refusal is the cause; a later one (e.g. while closing files) may name the file.
  return found[0][0], next((path for _, path in found if path), None)


# Errors of a storage that may answer if asked again: a network failure, or a bucket's HTTP 408
# (request timeout), 429 (rate limit) and 5xx. A file that is missing or malformed is not one of
# them, nor a refusal (403), a missing object or bucket (404) or a failed precondition (412).
_TRANSIENT_ERRNOS = {
    errno.ETIMEDOUT,
    errno.ECONNRESET,
    errno.ECONNREFUSED,
    errno.ECONNABORTED,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.ENETDOWN,
    errno.EPIPE,
}
# The clients' own words for a connection that dropped or broke mid-transfer, by class name (this
# module imports no client): aiohttp's (gcsfs), requests' and urllib3's (Google's client).
_TRANSIENT_CLASSES = {
    "ClientConnectionError",
    "ClientPayloadError",
    "ChunkedEncodingError",
    "ProtocolError",
    "IncompleteRead",
}
# TensorStore's status codes for a storage that did not answer, and the HTTP code it quotes.
_TENSORSTORE_TRANSIENT = re.compile(r"(UNAVAILABLE|DEADLINE_EXCEEDED): ")
# An HTTP status in a message: Google's and gcsfs's wording, and TensorStore's (which wraps a
# request's last answer as [http_response_code='503'] in an error of another code, e.g. ABORTED).
_HTTP_STATUS = re.compile(r"(?:HTTP (?:response code|status)[: ]+|http_response_code='?)(\d{3})")


def _http_status(exc: BaseException) -> int | None:
  """The HTTP status of a request's error (google.api_core's and gcsfs's `code`, or in its
  message), or None."""
  code = getattr(exc, "code", None)
  if isinstance(code, int) and 100 <= code <= 599:
    return code
  text = str(exc)
  if isinstance(exc, OSError) and text.startswith("Forbidden: http"):  # gcsfs's 403
    return 403
  if isinstance(exc, FileNotFoundError) and text.startswith("http") and "/b/" in text:
    return 404  # gcsfs's: the request's URL as the missing file
  found = _HTTP_STATUS.search(text)
  return int(found.group(1)) if found else None


def _retryable_status(code) -> bool:
  return isinstance(code, int) and (code in (408, 429) or 500 <= code <= 599)


def transient_cause(exc: BaseException) -> str | None:
  """A short description when `exc` or an exception it was raised from or during is a storage
  that did not answer (ConnectionError, TimeoutError, a network errno, a connection the clients
  saw drop, HTTP 408, 429 or 5xx from google.api_core or gcsfs, TensorStore's UNAVAILABLE /
  DEADLINE_EXCEEDED); else None."""
  seen = set()
  while exc is not None and id(exc) not in seen:
    seen.add(id(exc))
    text = str(exc).strip().splitlines()
    first = f"{type(exc).__name__}: {text[0][:160] if text else ''}".rstrip(": ")
    if isinstance(exc, (ConnectionError, TimeoutError)) or (
        isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS
    ):
      return first
    if _TRANSIENT_CLASSES & {cls.__name__ for cls in type(exc).__mro__}:
      return first
    if _TENSORSTORE_TRANSIENT.match(str(exc)) or _retryable_status(_http_status(exc)):
      return first
    exc = exc.__cause__ or exc.__context__
  return None


def storage_error(
    exc: BaseException, where: str | None = None, then: str = "rerun the same command"
) -> StorageError | None:
  """`exc` as one line naming the path, the cause and the fix; None if it is no refused write.

  `where` names the file or folder when the error itself does not (a failed write() has no
  file name); `then` is what to do once the cause is fixed.
  """
  cause = storage_cause(exc)
  if cause is None:
    return None
  code, path = cause
  path = path or where or "the output"
  return StorageError(
      f"cannot write {path}: the file system holding it {_STORAGE_CAUSES[code]} "
      f"({os.strerror(code)}); {_FIXES[code]} and {then}."
  )


def user_problem(exc: BaseException, where: str | None = None) -> BaseException | None:
  """What a command reports of `exc` in one line: a UserError, or a refused write as a
  StorageError; None for anything else (a bug of ours, which keeps its traceback)."""
  return exc if isinstance(exc, UserError) else storage_error(exc, where)


@contextlib.contextmanager
def exit_on_user_error(code: int = 2, where: str | None = None, end=None):
  """Inside a command: a `user_problem` ends the process with one `error:` line and exit `code`
  (EXIT_STORAGE_UNAVAILABLE for a storage that did not answer); any other exception keeps its
  traceback. `end(line, code)`, if given, ends the process in place of printing and exiting
  (the trainer's: training/job_end.py, which ends a job's other processes the same way)."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except
    problem = user_problem(e, where)
    if problem is None:
      raise
    if end is not None:
      end(str(problem).strip(), exit_code(problem, code))
    print(f"error: {str(problem).strip()}", file=sys.stderr, flush=True)
    sys.exit(exit_code(problem, code))


def exit_code(problem: BaseException, code: int = 2) -> int:
  """The exit code of a command ended by user problem `problem`: `code`, or
  EXIT_STORAGE_UNAVAILABLE for a storage that did not answer."""
  return EXIT_STORAGE_UNAVAILABLE if isinstance(problem, StorageUnavailableError) else code


def without_traceback(message: str) -> str:
  """A message that embeds a traceback (ml_collections does that) reduced to its last line,
  without the exception's module path: `vit_jax.errors.ConfigError: X` -> `X`."""
  if "Traceback (most recent call last)" not in message:
    return message
  last = [line for line in message.splitlines() if line.strip()][-1]
  return re.sub(r"^[\w.]+(Error|Exception): ", "", last.strip())


def first_line(e: BaseException) -> str:
  """The first line of `e`'s message (its type's name where it has none), at most 200
  characters: a library's error quoted inside one line of ours."""
  return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
