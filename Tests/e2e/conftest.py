"""End-to-end test harness: spawn the real `codingbridge serve` and talk to it.

Binary: $CODINGBRIDGE_BIN, else .build/release/codingbridge, else .build/debug/codingbridge.

Fixtures
--------
spawn        factory: ``spawn(*args, framing="ndjson"|"lsp", initialize=True,
             stdin=..., env=...)`` -> Client. Default args: ``--ephemeral``
             (pass your own args to replace them, e.g. ``spawn("--manual-clock",
             "--ephemeral")``). Every client is killed at teardown.
server       an initialized NDJSON client on ``serve --ephemeral --manual-clock``.
lsp_server   the same over LSP (Content-Length) framing.
raw_server   an NDJSON client that has NOT sent initialize.

Client (one server process)
---------------------------
request(method, params=None, timeout=5, validate=True) -> result
    Sends a request, waits for its response, raises RPCFailure(code, message,
    data) on an error response. With validate=True (default) the result is
    checked against the method's result schema in rpc-spec/openrpc.json
    (a method missing from the spec fails the test).
call(method, params=None, id=<auto>, timeout=5) -> the whole response dict
    (id may be any JSON id, including None).
notify(method, params=None)              send a notification.
send(obj)                                send any JSON value as one message.
send_raw(bytes)                          write bytes as-is (no framing added).
recv(timeout=5) -> next non-notification message (response or batch reply);
    raises TimeoutError.
expect_silence(seconds=0.3)              assert no reply arrives.
notifications                            list of server->client notifications so far.
wait_notification(method, timeout=5, predicate=None) -> params of the first
    matching notification (already-received ones count; each is returned once).
initialize(**params) -> result            (spawn does this unless initialize=False)
close_stdin(); wait(timeout=10) -> exit code; stderr() -> text so far;
kill(); framing ("ndjson"/"lsp"); frames: the framing each received message
used (the server must answer in the client's framing).

validate_result(method, result)  jsonschema check against the spec (refs under
    #/components/schemas resolved). validate_error(err) checks an error object.
spec()  the parsed rpc-spec/openrpc.json.
"""
import json
import os
import queue
import subprocess
import threading
import time

import jsonschema
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC_PATH = os.path.join(ROOT, "rpc-spec", "openrpc.json")


def binary():
    env = os.environ.get("CODINGBRIDGE_BIN")
    if env:
        return env
    for cfg in ("release", "debug"):
        p = os.path.join(ROOT, ".build", cfg, "codingbridge")
        if os.path.exists(p):
            return p
    pytest.fail("codingbridge binary not found: build it or set CODINGBRIDGE_BIN")


_spec = None


def spec():
    global _spec
    if _spec is None:
        with open(SPEC_PATH, encoding="utf-8") as f:
            _spec = json.load(f)
    return _spec


def _method(name):
    for m in spec()["methods"]:
        if m["name"] == name:
            return m
    return None


def _schema_with_components(schema):
    # Refs in the spec point at #/components/...; give the schema that root.
    s = dict(schema)
    s["components"] = spec().get("components", {})
    return s


# Server->client notifications and the spec schema of their params.
NOTIFICATION_SCHEMAS = {
    "notification.post": "NotificationPostParams",
    "notification.clear": "NotificationClearParams",
    "banner.show": "BannerShowParams",
    "activity.start": "ActivityContent",
    "activity.update": "ActivityContent",
    "activity.end": "ActivityContent",
    "badge.update": "BadgeUpdateParams",
    "approval.resolved": "ApprovalResolvedParams",
    "question.answered": "QuestionAnsweredParams",
    "session.changed": "SessionChangedParams",
    "connection.retry": "ConnectionRetryParams",
    "background.end": "BackgroundEndParams",
    "outbox.deliver": "OutboxDeliverParams",
    "outbox.undeliverable": "OutboxUndeliverableParams",
}


def validate_notification(method, params):
    """Checks a notification's params against its schema (the method must be in
    NOTIFICATION_SCHEMAS); returns the params."""
    name = NOTIFICATION_SCHEMAS[method]
    try:
        jsonschema.validate(params, _schema_with_components({"$ref": f"#/components/schemas/{name}"}))
    except jsonschema.ValidationError as e:
        pytest.fail(f"{method} params do not match {name}: {e.message}\n{params}")
    return params


class Steps:
    """A client plus a cursor over its notifications: each step returns the
    notifications it caused, each checked against the spec."""

    def __init__(self, client):
        self.c = client
        self.mark = len(client.notifications)

    def since(self):
        notes = self.c.notifications[self.mark:]
        self.mark = len(self.c.notifications)
        for n in notes:
            if n["method"] in NOTIFICATION_SCHEMAS:
                validate_notification(n["method"], n["params"])
        return notes

    def req(self, method, params=None):
        r = self.c.request(method, params)
        return r, self.since()

    def ev(self, sid, type_, **kw):
        p = {"sessionId": sid, "type": type_, "projectName": kw.pop("projectName", "MyApp"),
             "projectPath": kw.pop("projectPath", "~/code/MyApp")}
        p.update(kw)
        return self.req("agent.event", p)

    def advance(self, ms):
        return self.req("debug.advanceClock", {"ms": ms})

    def app(self, **kw):
        return self.req("app.update", kw)

    def respond(self, rid, decision, **kw):
        return self.req("approval.respond", dict(requestId=rid, decision=decision, **kw))


def only(notes, method):
    """The params of the notifications of one method."""
    return [n["params"] for n in notes if n["method"] == method]


def validate_result(method, result):
    """Fails the test if `result` does not match `method`'s result schema."""
    m = _method(method)
    assert m is not None, f"method {method!r} is not in rpc-spec/openrpc.json"
    assert "result" in m, f"method {method!r} has no result in the spec"
    schema = m["result"].get("schema", {})
    try:
        jsonschema.validate(result, _schema_with_components(schema))
    except jsonschema.ValidationError as e:
        pytest.fail(f"{method} result does not match the spec: {e.message}\nresult: {json.dumps(result)[:2000]}")


def validate_error(err):
    assert isinstance(err, dict), err
    assert isinstance(err.get("code"), int), err
    assert isinstance(err.get("message"), str) and err["message"], err
    assert set(err) <= {"code", "message", "data"}, err


def validate_response(msg):
    """A JSON-RPC 2.0 response object: exactly one of result/error, an id."""
    assert isinstance(msg, dict), msg
    assert msg.get("jsonrpc") == "2.0", msg
    assert "id" in msg, msg
    assert ("result" in msg) != ("error" in msg), msg
    assert set(msg) <= {"jsonrpc", "id", "result", "error"}, msg
    if "error" in msg:
        validate_error(msg["error"])


class RPCFailure(Exception):
    def __init__(self, error):
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")
        super().__init__(f"{self.code} {self.message} {json.dumps(self.data)}")


_AUTO = object()


class Client:
    def __init__(self, args, framing="ndjson", stdin=subprocess.PIPE, env=None):
        self.framing = framing
        self.proc = subprocess.Popen(
            [binary(), "serve", *args], stdin=stdin, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, bufsize=0)
        self._msgs = queue.Queue()
        self.notifications = []
        self._taken = set()
        self.frames = []  # framing of each message received: "lsp" or "ndjson"
        self._note_cv = threading.Condition()
        self._err = bytearray()
        self._next_id = 1
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        threading.Thread(target=self._err_loop, daemon=True).start()

    # -- reading ---------------------------------------------------------
    def _read_loop(self):
        out = self.proc.stdout
        buf = b""
        try:
            while True:
                try:
                    chunk = os.read(out.fileno(), 65536)
                except (ValueError, OSError):  # the test closed our end
                    break
                if not chunk:
                    break
                buf += chunk
                while True:
                    body, buf = self._split(buf)
                    if body is None:
                        break
                    self._deliver(body)
        finally:
            self._msgs.put(EOFError("server closed stdout"))

    def _split(self, buf):
        # The server answers in the peer's framing; accept either to detect mistakes.
        if buf.startswith(b"Content-Length:"):
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return None, buf
            n = None
            for line in buf[:end].split(b"\r\n"):
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    n = int(v.strip())
            assert n is not None, buf[:end]
            if len(buf) < end + 4 + n:
                return None, buf
            self.frames.append("lsp")
            return buf[end + 4:end + 4 + n], buf[end + 4 + n:]
        nl = buf.find(b"\n")
        if nl < 0:
            return None, buf
        self.frames.append("ndjson")
        return buf[:nl], buf[nl + 1:]

    def _deliver(self, body):
        try:
            msg = json.loads(body)
        except ValueError as e:
            self._msgs.put(AssertionError(f"server wrote invalid JSON: {body[:200]!r}: {e}"))
            return
        if isinstance(msg, dict) and "method" in msg and "id" not in msg:
            with self._note_cv:
                self.notifications.append(msg)
                self._note_cv.notify_all()
        else:
            self._msgs.put(msg)

    def _err_loop(self):
        while True:
            try:
                chunk = os.read(self.proc.stderr.fileno(), 65536)
            except (ValueError, OSError):
                return
            if not chunk:
                return
            self._err += chunk

    def stderr(self):
        return self._err.decode("utf-8", "replace")

    def recv(self, timeout=5):
        try:
            m = self._msgs.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no message from the server within {timeout}s; stderr:\n{self.stderr()}")
        if isinstance(m, Exception):
            self._msgs.put(m)  # sticky: later reads see it too
            raise m
        return m

    def expect_silence(self, seconds=0.3):
        try:
            m = self._msgs.get(timeout=seconds)
        except queue.Empty:
            return
        if isinstance(m, EOFError):
            self._msgs.put(m)
            return
        pytest.fail(f"expected no reply, got {m!r}")

    def wait_notification(self, method, timeout=5, predicate=None):
        deadline = time.monotonic() + timeout
        with self._note_cv:
            while True:
                for i, n in enumerate(self.notifications):
                    if i in self._taken:
                        continue
                    if n["method"] == method and (predicate is None or predicate(n.get("params"))):
                        self._taken.add(i)
                        return n.get("params")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {method} notification within {timeout}s; got "
                                       f"{[n['method'] for n in self.notifications]}")
                self._note_cv.wait(left)

    # -- writing ---------------------------------------------------------
    def frame(self, body: bytes) -> bytes:
        if self.framing == "lsp":
            return b"Content-Length: %d\r\n\r\n" % len(body) + body
        return body + b"\n"

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        self.send_raw(self.frame(json.dumps(obj).encode()))

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def call(self, method, params=None, id=_AUTO, timeout=5):
        if id is _AUTO:
            id = self._next_id
            self._next_id += 1
        msg = {"jsonrpc": "2.0", "method": method, "id": id}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            r = self.recv(timeout)
            if isinstance(r, dict) and r.get("id") == id:
                validate_response(r)
                return r
            pytest.fail(f"unexpected message while waiting for id {id}: {r!r}")

    def request(self, method, params=None, timeout=5, validate=True):
        r = self.call(method, params, timeout=timeout)
        if "error" in r:
            raise RPCFailure(r["error"])
        if validate:
            validate_result(method, r["result"])
        return r["result"]

    def initialize(self, **params):
        p = {"clientInfo": {"name": "pytest", "version": "1"}, "capabilities": {}}
        p.update(params)
        result = self.request("initialize", p)
        self.notify("initialized", {})
        return result

    # -- lifecycle -------------------------------------------------------
    def close_stdin(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def wait(self, timeout=10):
        return self.proc.wait(timeout=timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def spawn():
    clients = []

    def make(*args, framing="ndjson", initialize=True, stdin=subprocess.PIPE, env=None):
        c = Client(list(args) if args else ["--ephemeral"], framing=framing, stdin=stdin, env=env)
        clients.append(c)
        if initialize:
            c.initialize()
        return c

    yield make
    for c in clients:
        c.kill()


@pytest.fixture
def server(spawn):
    return spawn("--ephemeral", "--manual-clock")


@pytest.fixture
def lsp_server(spawn):
    return spawn("--ephemeral", "--manual-clock", framing="lsp")


@pytest.fixture
def raw_server(spawn):
    return spawn("--ephemeral", initialize=False)
