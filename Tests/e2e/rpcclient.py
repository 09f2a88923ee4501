"""The JSON-RPC client side of the e2e tests, whatever carries the messages.

Spec checks (re-exported by conftest)
-------------------------------------
spec()  the parsed rpc-spec/openrpc.json.
validate_result(method, result)  jsonschema check against the spec (refs under
    #/components/schemas resolved). validate_error(err) checks an error object,
    validate_response(msg) a whole response, validate_notification(method,
    params) a server->client notification (NOTIFICATION_SCHEMAS).
RPCFailure(error)  raised by request() on an error response: code, message, data.

RPCClient (mixin)
-----------------
call_async/reply/call/request/notify/initialize/wait_notification, built on two
primitives each transport implements:

    send(obj)        write one message.
    _next(timeout)   the next incoming message (parsed) within `timeout`
                     seconds; raises TimeoutError when none came, EOFError (or
                     the transport's own error) once the peer closed.

`_take(timeout)` files what `_next` returns: a notification is kept aside in
`notifications`, a reply (checked by validate_response) in `replies` under its
id, a batch reply under ("batch", n). A class sets `client_name` (initialize's
clientInfo.name), `timeout` (the default wait, seconds), `check_notifications`
(wait_notification validates params against the spec) and `strict` (while
waiting for a reply, any other message fails the test).

SocketClient  an RPCClient on a unix socket, NDJSON or LSP framing; `eof` once
the server closed it, `frames` the framing of each message received.
"""
import json
import os
import socket
import time

import jsonschema
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC_PATH = os.path.join(ROOT, "rpc-spec", "openrpc.json")

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
    "push.unregistered": "PushUnregisteredParams",
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


# ---- framing ---------------------------------------------------------------


def frame(body: bytes, framing="ndjson") -> bytes:
    """One message body framed as NDJSON or LSP (Content-Length)."""
    if framing == "lsp":
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    return body + b"\n"


def split_frame(buf: bytes):
    """The first complete message in `buf`, in either framing (the server answers
    in the peer's framing; accepting both detects mistakes) -> (framing, body,
    rest), or (None, None, buf) while it is incomplete."""
    if buf.startswith(b"Content-Length:"):
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return None, None, buf
        n = None
        for line in buf[:end].split(b"\r\n"):
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v.strip())
        assert n is not None, buf[:end]
        if len(buf) < end + 4 + n:
            return None, None, buf
        return "lsp", buf[end + 4:end + 4 + n], buf[end + 4 + n:]
    nl = buf.find(b"\n")
    if nl < 0:
        return None, None, buf
    return "ndjson", buf[:nl], buf[nl + 1:]


def is_notification(m):
    return isinstance(m, dict) and "method" in m and "id" not in m


# ---- the calls -------------------------------------------------------------

_AUTO = object()


class RPCClient:
    client_name = "pytest"
    timeout = 5
    check_notifications = True
    strict = False

    def _init_rpc(self):
        self.notifications = []
        self.replies = {}
        self.next_id = 1

    def _take(self, timeout):
        """Takes the next incoming message and files it; returns it."""
        m = self._next(timeout)
        if is_notification(m):
            self.notifications.append(m)
        elif isinstance(m, dict):
            validate_response(m)
            self.replies[m["id"]] = m
        else:  # a batch reply
            self.replies[("batch", len(self.replies))] = m
        return m

    def call_async(self, method, params=None, id=_AUTO):
        """Sends a request (id: any JSON id, else the next number); -> its id."""
        if id is _AUTO:
            id = self.next_id
            self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return id

    def reply(self, id, timeout=None):
        """Waits for the whole response to `id`."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while id not in self.replies:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to {id!r} within {timeout}s")
            m = self._take(left)
            if self.strict and id not in self.replies:
                pytest.fail(f"unexpected message while waiting for id {id}: {m!r}")
        return self.replies.pop(id)

    def call(self, method, params=None, timeout=None, id=_AUTO):
        return self.reply(self.call_async(method, params, id=id), timeout)

    def request(self, method, params=None, timeout=None, validate=True):
        """The result of a request; raises RPCFailure on an error response. With
        validate=True the result is checked against the method's result schema."""
        r = self.call(method, params, timeout)
        if "error" in r:
            raise RPCFailure(r["error"])
        if validate:
            validate_result(method, r["result"])
        return r["result"]

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def initialize(self, **params):
        p = {"clientInfo": {"name": self.client_name, "version": "1"}, "capabilities": {}}
        p.update(params)
        result = self.request("initialize", p)
        self.notify("initialized", {})
        return result

    def wait_notification(self, method, predicate=None, timeout=None):
        """The params of the first kept notification of `method` (matching
        `predicate`), reading on until it comes; it is taken off the list."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            for i, n in enumerate(self.notifications):
                if n["method"] == method and (predicate is None or predicate(n.get("params"))):
                    params = self.notifications.pop(i).get("params")
                    if self.check_notifications and method in NOTIFICATION_SCHEMAS:
                        validate_notification(method, params)
                    return params
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method}; got {[n['method'] for n in self.notifications]}")
            try:
                self._take(left)
            except TimeoutError:
                pass


class SocketClient(RPCClient):
    """JSON-RPC on a unix socket: NDJSON or LSP framing."""

    def __init__(self, path, framing="ndjson"):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.framing = framing
        self.buf = b""
        self.frames = []
        self.eof = False
        self._init_rpc()

    def send(self, obj):
        self.s.sendall(frame(json.dumps(obj).encode(), self.framing))

    def _next(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            framing, body, self.buf = split_frame(self.buf)
            if body is not None:
                self.frames.append(framing)
                return json.loads(body)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no message within {timeout}s")
            self.s.settimeout(left)
            try:
                chunk = self.s.recv(1 << 20)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
                raise EOFError("server closed the connection")
            self.buf += chunk

    def drain(self, seconds=0.2):
        """Files what arrives within `seconds`; stops early at EOF."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                self._take(max(0.01, end - time.monotonic()))
            except (TimeoutError, EOFError):
                return

    def close(self):
        self.s.close()
