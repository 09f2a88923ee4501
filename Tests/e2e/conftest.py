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
sockdir      a fresh short directory under /tmp (unix socket paths are limited
             to ~107 bytes), removed after the test.

start_daemon(state_dir) -> Popen: `serve --state-dir D --listen unix --no-stdio`,
             once it listens on D/codingbridge.sock.

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

The spec checks, RPCFailure and the calls (call/request/notify/initialize, the
RPCClient mixin) live in rpcclient.py, shared with the network and socket
clients; they are re-exported here.
"""
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from rpcclient import (  # noqa: F401  (re-exported: the tests import these from conftest)
    NOTIFICATION_SCHEMAS, ROOT, SPEC_PATH, RPCClient, RPCFailure, _schema_with_components, frame,
    is_notification, spec, split_frame, validate_error, validate_notification, validate_response, validate_result)

def binary():
    env = os.environ.get("CODINGBRIDGE_BIN")
    if env:
        return env
    for cfg in ("release", "debug"):
        p = os.path.join(ROOT, ".build", cfg, "codingbridge")
        if os.path.exists(p):
            return p
    pytest.fail("codingbridge binary not found: build it or set CODINGBRIDGE_BIN")


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


class Client(RPCClient):
    strict = True  # the first reply while waiting must be the one awaited

    def __init__(self, args, framing="ndjson", stdin=subprocess.PIPE, env=None):
        self.framing = framing
        self.proc = subprocess.Popen(
            [binary(), "serve", *args], stdin=stdin, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, bufsize=0)
        self._msgs = queue.Queue()
        self._init_rpc()  # notifications: filed by the reader thread
        self._taken = set()
        self.frames = []  # framing of each message received: "lsp" or "ndjson"
        self._note_cv = threading.Condition()
        self._err = bytearray()
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
                    framing, body, buf = split_frame(buf)
                    if body is None:
                        break
                    self.frames.append(framing)
                    self._deliver(body)
        finally:
            self._msgs.put(EOFError("server closed stdout"))

    def _deliver(self, body):
        try:
            msg = json.loads(body)
        except ValueError as e:
            self._msgs.put(AssertionError(f"server wrote invalid JSON: {body[:200]!r}: {e}"))
            return
        if is_notification(msg):
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

    _next = recv  # the RPCClient primitive: notifications never reach it

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
        return frame(body, self.framing)

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        self.send_raw(self.frame(json.dumps(obj).encode()))

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


def flood_unread(s, data, reset_ok=False, stuck_for=0.5):
    """Sends `data` again and again on the non-blocking socket `s`, never reading,
    until the peer has taken nothing for `stuck_for` seconds -> (bytes sent,
    reset). reset: the peer dropped the connection first (with reset_ok; else
    the error is raised). Fails if the peer takes a gigabyte."""
    sent, stuck_since = 0, None
    while True:
        try:
            sent += s.send(data)
            stuck_since = None
        except BlockingIOError:
            # the server stopped reading it (its replies are not taken)
            stuck_since = stuck_since or time.monotonic()
            if time.monotonic() - stuck_since > stuck_for:
                return sent, False
            time.sleep(0.01)
        except (ConnectionResetError, BrokenPipeError):
            if not reset_ok:
                raise
            return sent, True
        assert sent < 1 << 30, "the server kept reading a client that never reads"


def start_daemon(state_dir, *args, log=None):
    """`serve --state-dir D --listen unix --no-stdio ARGS`, returned once it
    logged that it listens on <D>/codingbridge.sock. Terminate it when done.
    With `log` (a list) its later stderr lines are kept there (for failure
    messages); else they go nowhere rather than fill a pipe."""
    d = subprocess.Popen([binary(), "serve", "--state-dir", state_dir, "--listen", "unix", "--no-stdio", *args],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in d.stderr:
        if "listening on" in line:
            keep = log.extend if log is not None else (lambda lines: None)
            threading.Thread(target=lambda: keep(d.stderr), daemon=True).start()
            return d
    pytest.fail(f"the daemon exited with {d.wait()} before listening")


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
def sockdir():
    """A fresh directory under /tmp, removed after the test: unix socket paths
    are limited to ~107 bytes and pytest's tmp_path can be longer."""
    d = tempfile.mkdtemp(prefix="cb-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def server(spawn):
    return spawn("--ephemeral", "--manual-clock")


@pytest.fixture
def lsp_server(spawn):
    return spawn("--ephemeral", "--manual-clock", framing="lsp")


@pytest.fixture
def raw_server(spawn):
    return spawn("--ephemeral", initialize=False)
