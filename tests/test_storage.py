"""vit_jax/storage.py: the same calls on a local folder and in a bucket (on the emulator of
tests/gcs_emulator.py), and the workdir lock on a bucket."""

import datetime
import json
import os
import subprocess
import sys

import pytest

from tests import helpers
from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib


@pytest.fixture(params=["local", "bucket"])
def folder(request, tmp_path):
  if request.param == "local":
    return str(tmp_path / "f")
  return request.getfixturevalue("gcs").new_dir("storage")


def test_files_read_back_as_written(folder):
  path = storage.join(folder, "a", "x.txt")
  assert not storage.exists(path)
  storage.makedirs(storage.parent(path))
  storage.write_text(path, "héllo\n")
  storage.write_bytes(storage.join(folder, "b.bin"), b"\x00\x01")
  assert storage.read_text(path) == "héllo\n" and storage.isfile(path)
  assert storage.isdir(storage.join(folder, "a")) and not storage.isfile(storage.join(folder, "a"))
  assert sorted(storage.listdir(folder)) == ["a", "b.bin"]
  assert sorted(storage.name(f) for f in storage.files_under(folder)) == ["b.bin", "x.txt"]
  assert storage.size_and_mtime(path)[0] == len("héllo\n".encode())
  with storage.appender(storage.join(folder, "log")) as log:
    log.write("1\n")
    log.flush()
    assert storage.read_text(storage.join(folder, "log")) == "1\n"  # visible once flushed
    log.write("2\n")
  with storage.appender(storage.join(folder, "log")) as log:
    log.write("3\n")
  assert storage.read_text(storage.join(folder, "log")) == "1\n2\n3\n"
  with pytest.raises(FileExistsError):
    storage.open(path, "x", encoding="utf-8")


def _append_flushes(gcs, path, lines) -> list[int]:
  """Appends `lines` to bucket file `path`, one flush each; the bytes the emulator received
  for each flush."""
  sent = []
  with storage.appender(path) as log:
    for line in lines:
      before = gcs.received()
      log.write(line)
      log.flush()
      sent.append(gcs.received() - before)
  return sent


def test_a_bucket_append_sends_the_new_text_not_the_file(gcs):
  path = storage.join(gcs.new_dir("append"), "metrics.jsonl")
  lines = [json.dumps({"step": i, "pad": "x" * 1000}) + "\n" for i in range(50)]
  sent = _append_flushes(gcs, path, lines[:25])
  sent += _append_flushes(gcs, path, lines[25:])  # a resumed run appends to what is there
  assert storage.read_text(path) == "".join(lines)
  assert storage.listdir(storage.parent(path)) == ["metrics.jsonl"]  # no part left behind
  # Each flush sends its ~1 KB line and a few requests' overhead, however long the file (50 KB).
  assert max(sent) < 3 * len(lines[0]), sent


def test_a_bucket_append_cut_off_before_its_compose_leaves_no_trace(gcs, monkeypatch):
  from google.cloud import storage as gcs_client  # pylint: disable=g-import-not-at-top

  path = storage.join(gcs.new_dir("append"), "log")
  _append_flushes(gcs, path, ["1\n"])
  with monkeypatch.context() as m:  # the process dies once the part is uploaded
    m.setattr(gcs_client.Blob, "compose", lambda *a, **k: sys.exit("killed"))
    with pytest.raises(SystemExit):
      _append_flushes(gcs, path, ["2\n"])
  assert sorted(storage.listdir(storage.parent(path))) == ["log", "log.part"]
  _append_flushes(gcs, path, ["3\n"])  # the resumed run
  assert storage.read_text(path) == "1\n3\n"
  assert storage.listdir(storage.parent(path)) == ["log"]


def test_a_bucket_append_over_another_writer_s_change_is_refused(gcs):
  path = storage.join(gcs.new_dir("append"), "log")
  log = storage.appender(path)
  log.write("1\n")
  log.flush()
  storage.write_text(path, "another writer\n")
  log.write("2\n")
  with pytest.raises(errors.StorageError, match="changed while this process appended"):
    log.flush()
  assert storage.read_text(path) == "another writer\n"


def test_a_bucket_append_rewrites_the_file_before_compose_s_component_limit(gcs, monkeypatch):
  monkeypatch.setattr(storage, "COMPONENT_LIMIT", 4)
  path = storage.join(gcs.new_dir("append"), "log")
  lines = [f"{i} " + "y" * 1000 + "\n" for i in range(12)]
  sent = _append_flushes(gcs, path, lines)
  assert storage.read_text(path) == "".join(lines)
  whole = [i for i, n in enumerate(sent) if n >= len("".join(lines[: i + 1]))]
  assert whole == [0, 4, 8], sent  # the first upload, then one flush in four sends the file


def test_a_folder_moves_whole(folder):
  for name in ("s/1/a", "s/1/d/b"):
    storage.makedirs(storage.parent(storage.join(folder, name)))
    storage.write_text(storage.join(folder, name), name)
  storage.makedirs(storage.join(folder, "aside"))
  storage.move(storage.join(folder, "s", "1"), storage.join(folder, "aside", "1"))
  assert not storage.exists(storage.join(folder, "s", "1"))
  assert storage.read_text(storage.join(folder, "aside", "1", "d", "b")) == "s/1/d/b"
  assert storage.read_text(storage.join(folder, "aside", "1", "a")) == "s/1/a"


def test_output_appears_only_when_complete(folder):
  target = storage.join(folder, "out")
  with pytest.raises(RuntimeError, match="interrupted"):
    with storage.output_path(target) as staged:
      os.makedirs(staged)
      with open(os.path.join(staged, "part"), "w", encoding="utf-8") as f:
        f.write("half")
      raise RuntimeError("interrupted")
  assert not storage.exists(target)
  with storage.output_path(target) as staged:
    os.makedirs(os.path.join(staged, "sub"))
    with open(os.path.join(staged, "sub", "w"), "w", encoding="utf-8") as f:
      f.write("whole")
  assert storage.read_text(storage.join(target, "sub", "w")) == "whole"
  with pytest.raises(FileExistsError):
    with storage.output_path(target):
      pass
  with storage.local_copy(target) as local:
    with open(os.path.join(local, "sub", "w"), encoding="utf-8") as f:
      assert f.read() == "whole"


def test_names_and_containment(gcs):
  root = gcs.new_dir("names")
  assert storage.is_remote(root) and not storage.is_remote("/tmp/x") and not storage.is_remote("x")
  assert storage.absolute(root) == root  # no working directory in a bucket
  assert storage.bucket(storage.join(root, "a")) == f"gs://{gcs.bucket}"
  assert storage.parent(storage.join(root, "a")) == root
  assert storage.parent(storage.parent(root)) == f"gs://{gcs.bucket}"  # as "/" is its own
  assert storage.is_within(storage.join(root, "a", "b"), root)
  assert not storage.is_within(root, storage.join(root, "a"))
  assert not storage.is_within("/tmp", root)


def test_another_scheme_is_refused():
  with pytest.raises(errors.ConfigError, match="s3:// is not supported"):
    storage.exists("s3://bucket/w")


# ---- The workdir lock in a bucket ----------------------------------------------------------------


def _lock_in_subprocess(workdir: str, then: str = ""):
  code = f"from vit_jax import workdir; workdir.lock({workdir!r}); {then}"
  return subprocess.run(
      [sys.executable, "-c", code], env=helpers.env(), capture_output=True, text=True, timeout=120
  )


def test_a_bucket_lock_is_refused_while_held_and_released_after(gcs):
  workdir = gcs.new_dir("lock")
  workdir_lib.lock(workdir)
  try:
    held = json.loads(gcs.objects(workdir)["lock"])
    assert held["pid"] == os.getpid() and held["host"] and held["started"]
    second = _lock_in_subprocess(workdir)
    assert second.returncode != 0
    assert f"is in use by pid {os.getpid()} on host" in second.stderr
    assert json.loads(gcs.objects(workdir)["lock"]) == held  # the holder's lock is untouched
  finally:
    workdir_lib.unlock(workdir)
  assert "lock" not in gcs.objects(workdir)
  assert _lock_in_subprocess(workdir, "workdir.unlock(" + repr(workdir) + ")").returncode == 0


def test_a_bucket_lock_of_a_dead_process_is_taken_over(gcs):
  workdir = gcs.new_dir("lock")
  dead = _lock_in_subprocess(workdir, "import os; os._exit(0)")  # exits holding it
  assert dead.returncode == 0, dead.stderr[-3000:]
  left = json.loads(gcs.objects(workdir)["lock"])
  workdir_lib.lock(workdir)
  try:
    assert json.loads(gcs.objects(workdir)["lock"])["pid"] == os.getpid()
  finally:
    workdir_lib.unlock(workdir)
  assert left["pid"] != os.getpid()


def test_a_bucket_lock_from_another_host_is_stale_only_when_old(gcs, monkeypatch, capsys):
  workdir = gcs.new_dir("lock")
  other = {"pid": 1, "host": "another-host", "started": "2026-01-01T00:00:00+00:00"}
  assert storage.create_object(workdir_lib.lock_path(workdir), json.dumps(other)) is not None
  with pytest.raises(errors.WorkdirError, match="in use by pid 1 on host another-host"):
    workdir_lib.lock(workdir)
  # Its holder renews it every LOCK_RENEW_S; one not renewed for LOCK_STALE_S is taken over.
  monkeypatch.setattr(workdir_lib, "LOCK_STALE_S", -1)
  workdir_lib.lock(workdir)
  workdir_lib.unlock(workdir)
  warning = capsys.readouterr().err
  assert "took over the lock of pid 1 on host another-host" in warning and "renewed" in warning


def test_a_held_bucket_lock_is_renewed(gcs, monkeypatch):
  workdir = gcs.new_dir("lock")
  monkeypatch.setattr(workdir_lib, "LOCK_RENEW_S", 0.2)
  workdir_lib.lock(workdir)
  try:
    first = workdir_lib._held_locks[workdir].generation  # pylint: disable=protected-access
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=30)
    # A read can miss the object while it is rewritten (None): read again.
    while (found := storage.read_object(workdir_lib.lock_path(workdir))) is None or (
        found[1] == first
    ):
      assert datetime.datetime.now() < deadline, "the lock was not renewed"
  finally:
    workdir_lib.unlock(workdir)
  assert "lock" not in gcs.objects(workdir)


def test_a_workdir_in_a_missing_bucket_is_refused(gcs):
  del gcs  # the API that answers "no such bucket"
  with pytest.raises(errors.WorkdirError, match="bucket gs://no-such-bucket does not exist"):
    workdir_lib.check_workdir("gs://no-such-bucket/w")
