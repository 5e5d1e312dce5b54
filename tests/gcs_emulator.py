"""A Cloud Storage API on localhost for the tests: gcp-storage-emulator (from the package index),
started once per test session, with every client pointed at it through the environment.

    python -m tests.gcs_emulator PORT BUCKET [DATA_DIR [DIE_ON]]   # what `running` starts

`Outage` runs one of its own that a test takes down and brings back (the bucket's bad minutes):
its objects kept on disk in DATA_DIR, killed between two requests (as a real bucket answers a
request whole or not at all), or at the first request naming DIE_ON (in the middle of a
checkpoint's write, say).

The emulator speaks GCS's JSON API but ignores generation preconditions, which the workdir lock
and TensorStore's OCDBT manifests (orbax's arrays) rely on; `serve` adds them to its object
handlers as Cloud Storage documents them (see `_with_preconditions`). `GET /received` answers the
request body bytes it has received, for tests of how much a client sends. `POST /faults` makes
chosen requests fail (`Emulator.fail`, through tests/faults.py), whichever process sends them.
"""

import contextlib
import http
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid

BUCKET = "vit-jax-test"


# Read once per process, at first use (epath on any path; gcsfs on import): tests/conftest.py
# sets them before any test runs.
PROCESS_SETTINGS = {
    "EPATH_USE_TF": "false",  # epath through gcsfs: TensorFlow's GCS client has no endpoint flag
    # gcsfs asks Cloud Storage's control API (gRPC, which the emulator lacks) for the bucket type.
    "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
}


def environment(port: int) -> dict:
  """What points each client at the emulator (none of it is needed on a real bucket)."""
  url = f"http://localhost:{port}"
  return {
      **PROCESS_SETTINGS,
      "STORAGE_EMULATOR_HOST": url,  # google-cloud-storage and gcsfs
      "TENSORSTORE_GCS_HTTP_URL": url,  # TensorStore, which writes orbax's arrays
      "GOOGLE_AUTH_TOKEN_FOR_TESTING": "test",  # TensorStore: no credentials lookup
  }


def _with_preconditions(handler, name_of):
  """`handler` that first checks the request's generation preconditions, as Cloud Storage does:
  412 if ifGenerationMatch is not the object's generation (0: the object must not exist), 304
  Not Modified for a read whose ifGenerationNotMatch is; a read also returns the generation in
  its x-goog-generation header (TensorStore reads it there)."""
  from gcp_storage_emulator.exceptions import NotFound  # pylint: disable=g-import-not-at-top

  def checked(request, response, storage, *args, **kwargs):
    try:
      generation = str(
          storage.get_file_obj(request.params["bucket_name"], name_of(request))["generation"]
      )
    except NotFound:
      generation = "0"
    match = request.query.get("ifGenerationMatch")
    if match and match[0] != generation:
      response.status = http.HTTPStatus.PRECONDITION_FAILED
      response.json({"error": {"code": 412, "message": "Precondition Failed"}})
      return None
    not_match = request.query.get("ifGenerationNotMatch")
    if not_match and not_match[0] == generation and request.method == "GET":
      response.status = http.HTTPStatus.NOT_MODIFIED
      return None
    if request.method == "GET" and generation != "0":
      response["x-goog-generation"] = generation
    return handler(request, response, storage, *args, **kwargs)

  return checked


def _upload_name(request):
  if "name" in request.query:
    return request.query["name"][0]
  data = request.data if isinstance(request.data, dict) else {}  # multipart: metadata + content
  return (data.get("meta") or {}).get("name") or data.get("name")


def _counting_received(server):
  """Makes `server` tally the body bytes of every request and answer the sum at GET /received."""
  received = [0]
  handle = server.Router.handle

  def counted(router, method):
    headers = router._request_handler.headers  # pylint: disable=protected-access
    received[0] += int(headers.get("Content-Length") or 0)
    return handle(router, method)

  server.Router.handle = counted
  answer = lambda request, response, storage: response.write_file(str(received[0]), "text/plain")
  server.HANDLERS = ((r"^/received$", {"GET": answer}), *server.HANDLERS)


def _request_object(request) -> str:
  """BUCKET/NAME of the object a request names (an upload's name, or a listing's prefix)."""
  params = request.params or {}
  name = params.get("object_id") or request.query.get("prefix", [""])[0]
  if request.method in ("POST", "PUT") and not name:
    name = _upload_name(request) or ""
  return f"{params.get('bucket_name', '')}/{name}"


def _faulty(server):
  """Makes `server` fail the requests its fault rules pick: `POST /faults` with a JSON rule
  {path, nth, times, status, methods} answers the nth to (nth + times - 1)th request whose
  BUCKET/NAME contains `path` (and whose method is in `methods`, if given) with HTTP `status`,
  with a dropped connection for status "reset", or for "lost" handles the request and then drops
  the connection (done, its answer lost); `GET /faults` answers how many each rule
  failed, `DELETE /faults` ends them all (their counts stay). Batch requests are never failed."""
  rules, rules_lock = [], threading.Lock()

  def picked(request) -> dict | None:
    with rules_lock:
      if not rules:
        return None
      target = _request_object(request)
      for rule in rules:
        if rule["healed"]:
          continue
        if rule["path"] in target and request.method in rule.get("methods", [request.method]):
          rule["seen"] += 1
          if rule["nth"] <= rule["seen"] < rule["nth"] + rule["times"]:
            rule["failed"] += 1
            return rule
    return None

  def with_faults(handler):
    def checked(request, response, storage, *args, **kwargs):
      rule = picked(request)
      if rule is None:
        return handler(request, response, storage, *args, **kwargs)
      if request.method in ("POST", "PUT", "PATCH"):
        request.data  # pylint: disable=pointless-statement  (the body read, as a server does)
      if rule["status"] == "lost":  # done, and its answer lost on the way back
        handler(request, response, storage, *args, **kwargs)
      if rule["status"] in ("reset", "lost"):
        connection = request._request_handler.connection  # pylint: disable=protected-access
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
        raise ConnectionAbortedError("fault injected: connection dropped")
      response.status = http.HTTPStatus(rule["status"])
      response.json({"error": {"code": rule["status"], "message": "fault injected"}})
      return None

    return checked

  def control(request, response, storage):
    del storage
    with rules_lock:
      if request.method == "POST":
        rule = {"nth": 1, "times": 1, **json.loads(request.data)}
        rules.append({**rule, "seen": 0, "failed": 0, "healed": False})
      elif request.method == "DELETE":
        for rule in rules:
          rule["healed"] = True
      response.json([rule["failed"] for rule in rules])

  for _, methods in server.HANDLERS:
    for method, handler in methods.items():
      methods[method] = with_faults(handler)
  faults = {"GET": control, "POST": control, "DELETE": control}
  server.HANDLERS = ((r"^/faults$", faults), *server.HANDLERS)
  return with_faults


def _dying(server, die_on: str | None):
  """Makes `server` answer one request at a time, exit between two at SIGTERM, and exit at once
  (before answering) at a request whose decoded path names `die_on`."""
  one_at_a_time = threading.Lock()
  handle = server.Router.handle

  def handled(router, method):
    if die_on and die_on in urllib.parse.unquote(router._request_handler.path):  # pylint: disable=protected-access
      os._exit(1)
    with one_at_a_time:
      return handle(router, method)

  def stop(signum, frame):
    del signum, frame
    one_at_a_time.acquire()  # pylint: disable=consider-using-with  (held until the exit)
    os._exit(0)

  server.Router.handle = handled
  signal.signal(signal.SIGTERM, stop)


def serve(port: int, bucket: str, data_dir: str | None = None, die_on: str | None = None) -> None:
  from gcp_storage_emulator import server  # pylint: disable=g-import-not-at-top
  from gcp_storage_emulator.handlers import objects  # pylint: disable=g-import-not-at-top

  _counting_received(server)
  _dying(server, die_on)
  object_id = lambda request: request.params["object_id"]
  patched = {
      objects.insert: _with_preconditions(objects.insert, _upload_name),
      objects.delete: _with_preconditions(objects.delete, object_id),
      objects.get: _with_preconditions(objects.get, object_id),
      objects.download: _with_preconditions(objects.download, object_id),
      objects.compose: _with_preconditions(objects.compose, object_id),  # of the destination
  }
  for _, methods in server.HANDLERS:
    for method, handler in methods.items():
      methods[method] = patched.get(handler, handler)
  with_faults = _faulty(server)
  # The router's fallback for uploads looks it up here.
  objects.insert = with_faults(patched[objects.insert])
  in_memory = data_dir is None
  server.create_server(
      "localhost", port, in_memory=in_memory, data_dir=data_dir, default_bucket=bucket
  ).run()


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


class Emulator:
  """A running emulator: `new_dir()` gives each test its own folder in the one bucket."""

  def __init__(self, port: int, bucket: str):
    self.port, self.bucket = port, bucket
    self.env = environment(port)

  def new_dir(self, label: str = "t") -> str:
    return f"gs://{self.bucket}/{label}-{uuid.uuid4().hex[:8]}"

  def fail(self, path: str, status=503, nth: int = 1, times: int = 1, methods=None) -> None:
    """From now on, the `nth` to (`nth` + `times` - 1)th request naming an object whose
    BUCKET/NAME contains `path` (of `methods`, e.g. ["POST"], if given) fails with HTTP `status`,
    a dropped connection ("reset"), or is done and its answer lost ("lost"); tests/faults.py is
    the way in."""
    rule = {"path": path, "status": status, "nth": nth, "times": times}
    if methods:
      rule["methods"] = list(methods)
    self._faults("POST", json.dumps(rule).encode())

  def failed(self) -> list[int]:
    """How many requests each rule of `fail` has failed so far."""
    return self._faults("GET")

  def heal(self) -> None:
    """Ends every rule of `fail`: the requests after it are answered."""
    self._faults("DELETE")

  def _faults(self, method: str, body: bytes | None = None) -> list[int]:
    request = urllib.request.Request(
        f"http://localhost:{self.port}/faults", data=body, method=method
    )
    with urllib.request.urlopen(request) as answer:
      return json.loads(answer.read())

  def received(self) -> int:
    """The request body bytes the emulator has received so far."""
    with urllib.request.urlopen(f"http://localhost:{self.port}/received") as answer:
      return int(answer.read())

  def _client(self):
    from google.auth import credentials  # pylint: disable=g-import-not-at-top
    from google.cloud import storage  # pylint: disable=g-import-not-at-top

    return storage.Client(
        project="test",
        credentials=credentials.AnonymousCredentials(),
        client_options={"api_endpoint": f"http://localhost:{self.port}"},
    )

  def objects(self, folder: str) -> dict:
    """{path relative to `folder`: content} of every object under gs:// `folder`; one deleted
    between the listing and its read (a running writer's temporary object) is left out."""
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top

    prefix = folder.removeprefix(f"gs://{self.bucket}/").rstrip("/") + "/"
    found = {}
    for blob in self._client().list_blobs(self.bucket, prefix=prefix):
      try:
        found[blob.name[len(prefix) :]] = blob.download_as_bytes()
      except exceptions.NotFound:
        pass
    return found

  def upload(self, local_folder, folder: str) -> None:
    """Copies a local folder's files under gs:// `folder`."""
    bucket = self._client().bucket(self.bucket)
    prefix = folder.removeprefix(f"gs://{self.bucket}/").rstrip("/")
    for root, _, files in os.walk(local_folder):
      for name in files:
        path = os.path.join(root, name)
        relative = os.path.relpath(path, local_folder)
        bucket.blob(f"{prefix}/{relative}").upload_from_filename(path)


def _start(port: int, *args) -> subprocess.Popen:
  """The emulator serving on `port` (args: DATA_DIR, DIE_ON), once it accepts connections."""
  process = subprocess.Popen(
      [sys.executable, "-m", "tests.gcs_emulator", str(port), BUCKET, *map(str, args)],
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
  )
  deadline = time.time() + 60
  while True:
    try:
      socket.create_connection(("localhost", port), timeout=1).close()
      return process
    except OSError:
      if process.poll() is not None or time.time() > deadline:
        raise RuntimeError("gcp-storage-emulator did not start") from None
      time.sleep(0.05)


@contextlib.contextmanager
def running():
  """Starts the emulator on a free port and points this process's environment (which the
  commands the tests start inherit) at it; restores the environment after."""
  port = _free_port()
  process = _start(port)
  saved = {k: os.environ.get(k) for k in environment(port)}
  try:
    os.environ.update(environment(port))
    yield Emulator(port, BUCKET)
  finally:
    for key, value in saved.items():
      if value is None:
        os.environ.pop(key, None)
      else:
        os.environ[key] = value
    process.terminate()
    process.wait(timeout=30)


class Outage(Emulator):
  """An emulator of its own that a test takes down (`down`: refused connections, as a bucket
  whose front end is gone) and brings back (`up`) with its objects, on the same port. The
  commands a test starts reach it through `env` (this process's clients stay on the session's
  emulator); `objects` reads it while it is up."""

  def __init__(self, data_dir):
    super().__init__(_free_port(), BUCKET)
    self.data_dir = str(data_dir)
    self.process = None

  def up(self, die_on: str | None = None) -> None:
    """Starts serving (again); with `die_on`, it dies at the first request naming it."""
    self.process = _start(self.port, self.data_dir, *([die_on] if die_on else []))

  def down(self) -> None:
    """Stops serving, between two requests; nothing answers on the port until `up`."""
    if self.process.poll() is None:
      self.process.terminate()
    self.process.wait(timeout=30)

  def is_down(self) -> bool:
    return self.process.poll() is not None

  def first_knock(self, timeout: float = 300) -> float:
    """While down: waits for the first client to try the port, resets that connection (as a
    host that lost its server does), and returns when it came; the port is free again after."""
    with socket.socket() as door:
      door.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
      door.bind(("localhost", self.port))
      door.listen(1)
      door.settimeout(timeout)
      knock, _ = door.accept()
      knocked = time.time()
      knock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
      knock.close()
    return knocked


@contextlib.contextmanager
def outage(data_dir):
  """An `Outage` emulator, up, keeping its objects in `data_dir`; stopped at the end."""
  emulator = Outage(data_dir)
  emulator.up()
  try:
    yield emulator
  finally:
    emulator.down()


if __name__ == "__main__":
  serve(int(sys.argv[1]), sys.argv[2], *sys.argv[3:5])
