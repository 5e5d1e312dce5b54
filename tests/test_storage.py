"""vit_jax/storage: the same calls on a local folder and in a bucket (on the emulator of
tests/gcs_emulator.py), the retry policy of outages.py, and the workdir lock on a bucket."""

import datetime
import json
import os
import subprocess
import sys
import time

import pytest

from tests import faults
from tests import gcs_emulator
from tests import helpers
from vit_jax import errors
from vit_jax import storage
from vit_jax import workdir as workdir_lib
from vit_jax.storage import objects
from vit_jax.storage import outages


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


def test_a_glob_matches_files_in_a_folder_and_below_it(folder):
  for relative in ("a/x.jsonl", "a/b/y.jsonl", "a/z.txt", "c/w.jsonl"):
    path = storage.join(folder, *relative.split("/"))
    storage.makedirs(storage.parent(path))
    storage.write_text(path, "{}")
  relative = lambda pattern: storage.glob(storage.join(folder, pattern))
  names = lambda pattern: [p[len(folder) + 1 :] for p in relative(pattern)]
  assert names("a/*.jsonl") == ["a/x.jsonl"]
  assert names("a/**/*.jsonl") == ["a/b/y.jsonl", "a/x.jsonl"]
  assert names("*/*.jsonl") == ["a/x.jsonl", "c/w.jsonl"]
  assert names("a/nothing*") == [] and names("a") == []  # a folder is not a file


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


# Another writer's file: longer than ours would be, or as long with other bytes at the end.
@pytest.mark.parametrize("theirs", ["another writer\n", "1\nX\n"])
def test_a_bucket_append_over_another_writer_s_change_is_refused(gcs, theirs):
  path = storage.join(gcs.new_dir("append"), "log")
  log = storage.appender(path)
  log.write("1\n")
  log.flush()
  storage.write_text(path, theirs)
  log.write("2\n")
  with pytest.raises(errors.StorageError, match="changed while this process appended"):
    log.flush()
  assert storage.read_text(path) == theirs


def test_a_delete_is_done_once_even_if_its_answer_is_lost(gcs, monkeypatch):
  monkeypatch.setattr(outages, "FIRST_WAIT_S", 0.01)
  path = storage.join(gcs.new_dir("delete"), "x")
  with pytest.raises(FileNotFoundError):  # nothing there: the first try says so
    storage.remove(path)
  storage.write_text(path, "x")
  lost = faults.inject(gcs, path.split("//", 1)[1], "lost", only=["DELETE"])
  storage.remove(path)  # deleted, its answer lost: the next try finds it gone, which is done
  assert lost.failed() == 1 and not storage.exists(path)


def test_a_bucket_append_rewrites_the_file_before_compose_s_component_limit(gcs, monkeypatch):
  monkeypatch.setattr(objects, "COMPONENT_LIMIT", 4)
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
  assert objects.create_object(workdir_lib.lock_path(workdir), json.dumps(other)) is not None
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
    while (found := objects.read_object(workdir_lib.lock_path(workdir))) is None or (
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


# ---- A bucket's bad minutes: one retry policy (the trainer's runs: survival/test_bucket_outage) --


class FakeClock:
  """time.time and time.sleep for `outages`: sleeping advances the clock at once."""

  def __init__(self):
    self.now, self.waits = 1000.0, []

  def time(self):
    return self.now

  def sleep(self, seconds):
    self.waits.append(seconds)
    self.now += seconds


@pytest.fixture
def clock(monkeypatch):
  """A budget of 100 s (the clients' own retries: 25 s), on a fake clock; outages of this test's
  buckets alone."""
  fake = FakeClock()
  monkeypatch.setattr(outages, "time", fake)
  monkeypatch.setattr(outages, "_pause", lambda where, seconds: fake.sleep(seconds))
  monkeypatch.setattr(outages, "_budget_s", 100.0)
  monkeypatch.setattr(outages, "_away", {})
  return fake


def failing(times: int, error=ConnectionRefusedError(111, "Connection refused"), then="done"):
  """An operation that raises `error` its first `times` calls, then returns `then`."""
  calls = []

  def operation():
    calls.append(1)
    if len(calls) <= times:
      raise error
    return then

  operation.calls = calls
  return operation


def test_an_outage_is_tried_again_after_waits_that_double_with_jitter(clock, monkeypatch, capsys):
  monkeypatch.setattr(outages, "_probe", lambda path: None)  # the bucket answers a listing
  operation = failing(4)
  assert outages.ride_out(operation, "gs://b/w/x", "writing gs://b/w/x") == "done"
  assert len(operation.calls) == 5
  for n, wait in enumerate(clock.waits):  # 1, 2, 4, 8 s, each plus up to 1 s of jitter
    assert 2**n <= wait < 2**n + 1, clock.waits
  assert outages.outage("gs://b/w") is None  # it answers again
  err = capsys.readouterr().err
  assert err.count("warning: gs://b does not answer (ConnectionRefusedError") == 1  # one line
  assert "while writing gs://b/w/x; trying again for up to 100 s" in err


def test_the_longest_wait_is_an_eighth_of_the_budget(clock, monkeypatch):
  monkeypatch.setattr(outages, "_probe", lambda path: None)
  assert outages.ride_out(failing(8), "gs://b/x", "reading gs://b/x") == "done"
  longest = outages.outage_budget() / 8  # 12.5 s of the 100 s: under LONGEST_WAIT_S
  assert all(wait < longest + 1 for wait in clock.waits) and clock.waits[-1] >= longest


def test_a_bucket_answers_or_not_in_one_request(gcs, tmp_path):
  folder = gcs.new_dir("answers")
  assert outages.answers(str(tmp_path)) and outages.answers(folder)  # a local path always does
  faults.inject(gcs, folder.split("//", 1)[1], 503, only=["GET"])
  assert not outages.answers(folder)
  seconds, cause = outages.outage(folder)
  assert seconds >= 0 and "503" in cause
  assert outages.answers(folder) and outages.outage(folder) is None  # it answers again
  faults.inject(gcs, folder.split("//", 1)[1], 403, only=["GET"])
  with pytest.raises(Exception, match="403|Forbidden"):  # a refusal is no outage
    outages.answers(folder)
  assert outages.outage(folder) is None


def test_a_request_tried_once_notes_the_bucket_s_outage(gcs, monkeypatch):
  monkeypatch.setattr(outages, "_budget_s", 8.0)  # the client's own retries: 2 s
  path = storage.join(gcs.new_dir("once"), "lock")
  generation = objects.create_object(path, "1")
  faults.inject(gcs, path.split("//", 1)[1], 503, times=100, only=["POST"])
  with pytest.raises(Exception):
    objects.replace_object(path, "2", generation, wait=False)
  assert outages.outage(path) is not None  # the next request starts with a cheap probe
  gcs.heal()
  assert objects.replace_object(path, "2", generation, wait=False) is not None
  assert outages.outage(path) is None


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_each_transient_status_is_ridden_out(clock, monkeypatch, status):
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

  monkeypatch.setattr(outages, "_probe", lambda path: None)
  error = exceptions.from_http_status(status, "try later")
  assert outages.ride_out(failing(1, error), "gs://b/x", "reading gs://b/x") == "done"


def test_a_connection_that_drops_is_ridden_out(clock, monkeypatch):
  import aiohttp  # pylint: disable=g-import-not-at-top  (gcsfs's client)
  import requests  # pylint: disable=g-import-not-at-top

  monkeypatch.setattr(outages, "_probe", lambda path: None)
  for error in (
      aiohttp.ServerDisconnectedError(),
      requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead"),
  ):
    assert outages.ride_out(failing(1, error), "gs://b/x", "reading gs://b/x") == "done"


@pytest.mark.parametrize("status", [403, 404, 412])
def test_a_refusal_is_raised_at_once(clock, status):
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

  error = exceptions.from_http_status(status, "no")
  with pytest.raises(type(error)):
    outages.ride_out(failing(1, error), "gs://b/x", "reading gs://b/x")
  assert clock.waits == [] and outages.outage("gs://b/x") is None


def test_an_outage_past_the_budget_is_one_line_and_then_fails_at_once(clock, monkeypatch):
  stays_away = failing(10**6)
  monkeypatch.setattr(outages, "_probe", lambda path: stays_away())  # the bucket stays away
  with pytest.raises(errors.StorageUnavailableError) as raised:
    outages.ride_out(failing(10**6), "gs://b/w/metrics.jsonl", "writing gs://b/w/metrics.jsonl")
  message = str(raised.value)
  assert message.startswith(
      "gs://b did not answer for 100 s (ConnectionRefusedError: [Errno 111] Connection refused) "
      "while writing gs://b/w/metrics.jsonl: the outage outlasted --config.storage_outage_s=100."
  )
  assert "\n" not in message and "Nothing saved was lost" in message
  assert sum(clock.waits) == pytest.approx(100)
  seconds, cause = outages.outage("gs://b/w")
  assert seconds == pytest.approx(100) and cause.startswith("ConnectionRefusedError")
  # Every operation on that bucket now fails after one cheap request, without waiting...
  clock.waits.clear()
  never = failing(0)
  with pytest.raises(errors.StorageUnavailableError, match="did not answer for 100 s"):
    outages.ride_out(never, "gs://b/w/lock", "deleting gs://b/w/lock")
  assert clock.waits == [] and never.calls == []
  # ...but another bucket's do not.
  assert outages.ride_out(failing(0), "gs://other/x", "reading gs://other/x") == "done"


def test_an_operation_that_keeps_failing_ends_at_its_budget_while_others_are_answered(
    clock, monkeypatch
):
  monkeypatch.setattr(outages, "_probe", lambda path: None)

  def another_request_answered(where, seconds):  # a lock renewal, a metrics flush
    clock.sleep(seconds)
    outages._answered(where)  # pylint: disable=protected-access

  monkeypatch.setattr(outages, "_pause", another_request_answered)
  times_out = failing(10**6, TimeoutError("The write operation timed out"))
  with pytest.raises(errors.StorageUnavailableError, match="did not answer for 100 s"):
    outages.ride_out(times_out, "gs://b/w/x", "writing gs://b/w/x")
  assert sum(clock.waits) == pytest.approx(100) and len(times_out.calls) < 20


def test_a_bucket_that_answers_between_two_outages_is_budgeted_from_the_second(clock, monkeypatch):
  monkeypatch.setattr(outages, "_probe", lambda path: None)  # each probe is answered
  outages._unanswered("gs://b", clock.now, "ConnectionRefusedError")  # pylint: disable=protected-access
  clock.now += 80  # the first outage, 80 s of the 100 s budget, met by another request
  operation = failing(6)  # then about 40 s of the second, met by this one
  assert outages.ride_out(operation, "gs://b/w/x", "writing gs://b/w/x") == "done"
  assert 30 < sum(clock.waits) < 100 - 80 + 30


def test_an_operation_failing_forever_beside_a_renewed_lock_ends_at_its_budget(gcs, monkeypatch):
  workdir = gcs.new_dir("lock")
  monkeypatch.setattr(workdir_lib, "LOCK_RENEW_S", 0.2)  # a renewal answered every 0.2 s
  monkeypatch.setattr(outages, "_budget_s", 2.0)
  workdir_lib.lock(workdir)
  try:
    started = time.time()
    with pytest.raises(errors.StorageUnavailableError, match="storage_outage_s=2"):
      outages.ride_out(
          failing(10**6, TimeoutError("timed out")), storage.join(workdir, "x"), "writing x"
      )
    assert 2 <= time.time() - started < 6
    workdir_lib.check_lock(workdir)  # renewed all along
  finally:
    workdir_lib.unlock(workdir)


def test_the_clients_retry_a_request_for_a_quarter_of_the_budget():
  # pylint: disable=g-import-not-at-top  (orbax)
  from orbax.checkpoint._src.serialization import tensorstore_utils

  from vit_jax import checkpoint

  for budget, client_s, tensorstore_tries in [(300, 30, 5), (8, 2, 2), (4, 1, 1)]:
    outages.set_outage_budget(budget)
    try:
      assert outages.client_deadline_s() == client_s
      assert outages.client_retry()._timeout == client_s  # pylint: disable=protected-access
      checkpoint.tensorstore_retries()  # 1 + 2 + 4 + ... s of waits cover the deadline
      spec = tensorstore_utils.get_ts_context().spec.to_json()
      assert spec["gcs_request_retries"]["max_retries"] == tensorstore_tries, spec
    finally:
      outages.set_outage_budget(outages.OUTAGE_S)
      checkpoint.tensorstore_retries()


def test_a_flush_whose_answer_was_lost_is_appended_once(gcs, monkeypatch):
  monkeypatch.setattr(outages, "FIRST_WAIT_S", 0.01)
  path = storage.join(gcs.new_dir("append"), "log")
  _append_flushes(gcs, path, ["1\n"])
  # The next flush's uploads: its part (the 1st), then the compose (the 2nd), done but its
  # answer lost; the client tries it again, which the object's precondition refuses.
  lost = faults.inject(gcs, path.split("//", 1)[1], "lost", nth=2, only=["POST"])
  _append_flushes(gcs, path, ["2\n", "3\n"])
  assert lost.failed() == 1 and storage.read_text(path) == "1\n2\n3\n"


def test_a_held_lock_taken_over_stops_its_holder_and_is_left_to_the_new_one(gcs, monkeypatch):
  workdir = gcs.new_dir("lock")
  monkeypatch.setattr(workdir_lib, "LOCK_RENEW_S", 0.1)
  workdir_lib.lock(workdir)
  other = json.dumps({"pid": 1, "host": "another-host", "started": "2026-01-01T00:00:00+00:00"})
  storage.write_text(workdir_lib.lock_path(workdir), other)  # as a takeover writes it
  deadline = datetime.datetime.now() + datetime.timedelta(seconds=30)
  with pytest.raises(errors.WorkdirError) as raised:
    while datetime.datetime.now() < deadline:  # its next renewal finds it
      workdir_lib.check_lock(workdir)
  assert "was taken over by pid 1 on host another-host" in str(raised.value)
  workdir_lib.unlock(workdir)
  assert gcs.objects(workdir)["lock"] == other.encode()  # not deleted: it is not ours


_HOLD_UNTIL_LOST = """
import sys, time
from vit_jax import errors, workdir
from vit_jax.storage import outages
workdir.LOCK_RENEW_S, workdir.LOCK_STALE_S, workdir.LOCK_SAFE_S = 0.2, 1.5, 1.0
outages.set_outage_budget(2)  # a renewal's request is retried for 0.5 s
with errors.exit_on_user_error():
  workdir.lock(sys.argv[1])
  print("locked", flush=True)
  while True:
    workdir.check_lock(sys.argv[1])
    time.sleep(0.05)
"""


def test_a_lock_that_cannot_be_renewed_in_time_stops_its_holder_in_one_line(tmp_path):
  with gcs_emulator.outage(tmp_path / "bucket") as bucket:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_UNTIL_LOST, bucket.new_dir("lock")],
        env={**helpers.env(), **bucket.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline() == "locked\n", holder.stderr.read()
    bucket.down()
    _, stderr = holder.communicate(timeout=60)
  assert holder.returncode == errors.EXIT_STORAGE_UNAVAILABLE, stderr
  assert "Traceback" not in stderr and stderr.count("error:") == 1
  assert "could not be renewed for 1 s (ConnectionRefusedError" in stderr
  assert "another run may take" in stderr
