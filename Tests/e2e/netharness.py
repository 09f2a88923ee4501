"""Harness for the network listener tests (test_network*.py).

NetServer     `codingbridge serve --listen ws://127.0.0.1:0 --listen unix --no-stdio
              --state-dir D` (plus wss, other listens or flags); waits for
              listen.json; `stop()` sends SIGTERM and, if the process is still
              there after a short grace, SIGKILL.
WS            a JSON-RPC client over a real WebSocket (websockets' sync client):
              call/request/initialize/wait_notification (rpcclient.RPCClient).
Unix          a JSON-RPC client on the daemon's unix socket (the trusted side;
              rpcclient.SocketClient).
raw_http()    one raw HTTP/1.1 exchange on a TCP socket: status, headers, body and
              whether the server closed the connection.
ws_frame()    a masked client frame built by hand (for clients that misbehave).

Pairing (branch `devices`): when `device.pair` is in rpc.discover's methods,
NetServer.pairing is True and `NetServer.ws()` pairs a device (code from
`device.pairingCode` over the unix socket) and connects with its token as
`Authorization: Bearer`, so tests written for an open network listener keep
meaning the same thing once network clients must authenticate.
"""
import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest
from websockets.sync.client import connect

from conftest import binary
from rpcclient import RPCClient, SocketClient

STOP_GRACE_S = 0.5


class NetServer:
    def __init__(self, *extra, ws=True, wss=False, unix=True, state_dir=None, wait=True):
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="cbn-", dir="/tmp")
        self.own_dir = state_dir is None
        args = ["serve", "--no-stdio", "--state-dir", self.state_dir]
        if ws:
            args += ["--listen", "ws://127.0.0.1:0"]
        if wss:
            args += ["--listen", "wss://127.0.0.1:0"]
        if unix:
            args += ["--listen", "unix"]
        args += list(extra)
        self.args = args
        self.errf = tempfile.TemporaryFile()
        try:
            os.unlink(self.listen_json_path)  # a restart on the same state dir
        except FileNotFoundError:
            pass
        self.proc = subprocess.Popen([binary(), *args], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.errf)
        self.listen = []
        self._pairing = None
        if wait:
            self.wait_ready(unix=unix)

    @property
    def listen_json_path(self):
        return os.path.join(self.state_dir, "listen.json")

    @property
    def sock_path(self):
        return os.path.join(self.state_dir, "codingbridge.sock")

    def wait_ready(self, unix=True, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"server exited {self.proc.returncode}: {self.stderr()}"
            assert time.monotonic() < deadline, "listen.json never appeared: " + self.stderr()
            if os.path.exists(self.listen_json_path) and (not unix or os.path.exists(self.sock_path)):
                with open(self.listen_json_path, encoding="utf-8") as f:
                    self.listen = json.load(f)["listen"]
                return
            time.sleep(0.02)

    def stderr(self):
        self.errf.seek(0)
        return self.errf.read().decode("utf-8", "replace")

    def entry(self, scheme="ws"):
        for e in self.listen:
            if e["url"].startswith(scheme + "://"):
                return e
        raise AssertionError(f"no {scheme} listener in {self.listen}")

    def url(self, scheme="ws"):
        return self.entry(scheme)["url"]

    def port(self, scheme="ws"):
        return int(self.url(scheme).rsplit(":", 1)[1])

    def alive(self):
        return self.proc.poll() is None

    def unix(self, initialize=True):
        u = Unix(self.sock_path)
        if initialize:
            u.initialize()
        return u

    # -- pairing (once the devices branch is merged) ------------------------
    @property
    def pairing(self):
        if self._pairing is None:
            u = self.unix(initialize=False)
            try:
                names = [m["name"] for m in u.request("rpc.discover", validate=False)["methods"]]
            finally:
                u.close()
            self._pairing = "device.pair" in names
        return self._pairing

    def pairing_code(self):
        u = self.unix()
        try:
            return u.request("device.pairingCode", {"name": "pytest"})["code"]
        finally:
            u.close()

    def pair(self, name="pytest-device", scheme="ws", **kw):
        """Pairs a device over the network: -> {deviceId, name, token}."""
        c = WS(self.url(scheme) + "/rpc", **kw)
        try:
            return c.request("device.pair", {"code": self.pairing_code(), "name": name})
        finally:
            c.close()

    def ws(self, scheme="ws", path="/rpc", auth=True, **kw):
        """A WebSocket client; paired and carrying its token when the daemon
        requires it (auth=False: never)."""
        headers = dict(kw.pop("additional_headers", {}) or {})
        if auth and self.pairing:
            headers["Authorization"] = "Bearer " + self.pair(scheme=scheme, ssl=kw.get("ssl"))["token"]
        return WS(self.url(scheme) + path, additional_headers=headers or None, **kw)

    def stop(self, grace=STOP_GRACE_S):
        """SIGTERM, then SIGKILL if it is still there after `grace`. Returns the
        exit status (negative: the signal that ended it)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def cleanup(self):
        self.stop()
        if self.own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)


# ---- clients ---------------------------------------------------------------


class WS(RPCClient):
    """JSON-RPC over one WebSocket (text frames, one message per frame)."""
    client_name = "test_network"

    def __init__(self, url, **kw):
        kw.setdefault("open_timeout", 5)
        kw.setdefault("compression", None)
        kw.setdefault("max_size", None)
        if kw.get("ssl") is None:
            kw.pop("ssl", None)
        # entered as a context manager (websockets 17 warns otherwise); closed by close()
        self.ws = connect(url, **kw).__enter__()
        self._init_rpc()

    def send(self, obj):
        self.ws.send(json.dumps(obj))

    def _next(self, timeout):
        return json.loads(self.ws.recv(timeout=timeout))

    def recv(self, timeout=5):
        """Next response or batch reply (notifications are kept aside)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.replies:
                k = next(iter(self.replies))
                return self.replies.pop(k)
            self._take(max(0.001, deadline - time.monotonic()))

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass


class Unix(SocketClient):
    """NDJSON JSON-RPC on the daemon's unix socket."""
    client_name = "test_network-unix"


# ---- raw HTTP and frames -----------------------------------------------------


def raw_http(port, data, timeout=3.0, host="127.0.0.1"):
    """Sends `data` (bytes) on a fresh TCP connection and reads until the server
    closes or `timeout` passes. -> dict(status, reason, headers, body, closed, raw)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    buf = b""
    closed = False
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        buf += chunk
        head, sep, body = buf.partition(b"\r\n\r\n")
        if sep:
            # a complete response with Content-Length: stop there unless closing
            hdrs = _headers(head)
            n = hdrs.get("content-length")
            if n is not None and len(body) >= int(n) and hdrs.get("connection", "").lower() != "close":
                break
    s.close()
    return _parse(buf, closed)


def _headers(head):
    out = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        out[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    return out


def _parse(buf, closed):
    head, _, body = buf.partition(b"\r\n\r\n")
    status, reason = None, ""
    first = head.split(b"\r\n", 1)[0]
    if first.startswith(b"HTTP/1."):
        parts = first.split(b" ", 2)
        status = int(parts[1])
        reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
    return {"status": status, "reason": reason, "headers": _headers(head) if status else {},
            "body": body, "closed": closed, "raw": buf}


def upgrade_request(port, path="/rpc", extra=b""):
    key = base64.b64encode(os.urandom(16))
    return (b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: " % port + key +
            b"\r\nSec-WebSocket-Version: 13\r\n" + extra + b"\r\n")


def raw_upgrade(port, path="/rpc", extra=b"", timeout=5):
    """A raw TCP socket upgraded to a WebSocket (the 101 head consumed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(upgrade_request(port, path, extra))
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        assert chunk, f"closed during the upgrade: {buf!r}"
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    return s, rest


def ws_frame(payload, opcode=0x1, fin=True):
    """A masked client frame."""
    if isinstance(payload, str):
        payload = payload.encode()
    b0 = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", b0, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", b0, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", b0, 0x80 | 127, n)
    mask = os.urandom(4)
    body = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
    return head + mask + body


def read_frame(s, buf=b""):
    """Reads one (unmasked) server frame -> (opcode, payload, rest)."""
    def need(k):
        nonlocal buf
        while len(buf) < k:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError("closed")
            buf += chunk
    need(2)
    op, n = buf[0] & 0x0F, buf[1] & 0x7F
    off = 2
    if n == 126:
        need(4)
        n = struct.unpack("!H", buf[2:4])[0]
        off = 4
    elif n == 127:
        need(10)
        n = struct.unpack("!Q", buf[2:10])[0]
        off = 10
    need(off + n)
    return op, buf[off:off + n], buf[off + n:]


def cert_sha256(der):
    return hashlib.sha256(der).hexdigest()


def run_serve(*args, timeout=10):
    """`codingbridge serve ARGS` expected to exit on its own: -> (rc, stderr)."""
    p = subprocess.run([binary(), "serve", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stderr.decode("utf-8", "replace")


@pytest.fixture
def net():
    """Factory: net(*extra_args, ws=True, wss=False, unix=True, state_dir=None)."""
    made = []

    def make(*extra, **kw):
        s = NetServer(*extra, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.cleanup()


@pytest.fixture
def srv(net):
    """One daemon: ws://127.0.0.1:0 and the unix socket."""
    return net()


def require_pairing(server):
    if not server.pairing:
        pytest.skip("device.pair is not in rpc.discover: network authentication (branch devices) not merged yet")
