"""Ways to reach the server, each a pair of blocking calls: send(text) writes
one message, recv() returns the next one (None once the peer closed).

stdio and unix sockets use newline-delimited JSON (the server detects the
framing from the first byte); a WebSocket carries one message per text frame.
"""
import os
import hashlib
import socket
import ssl as _ssl
import subprocess


def default_socket(state_dir=None):
    """The socket `serve --listen unix` and `codingbridge hook` agree on."""
    if state_dir is None:
        xdg = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
        state_dir = os.path.join(xdg, "codingbridge")
    return os.path.join(state_dir, "codingbridge.sock")


class _Lines:
    """NDJSON over a binary file pair."""

    def __init__(self, rfile, wfile):
        self._r, self._w = rfile, wfile

    def send(self, text):
        self._w.write(text.encode("utf-8") + b"\n")
        self._w.flush()

    def recv(self):
        while True:
            line = self._r.readline()
            if not line:
                return None
            if line.strip():
                return line.decode("utf-8")


class Stdio(_Lines):
    """A server of our own: `command serve ARGS` with its stdin/stdout as the
    connection; its logs go to our stderr unless `stderr` says otherwise."""

    def __init__(self, command="codingbridge", args=("--ephemeral",), stderr=None):
        self.proc = subprocess.Popen([command, "serve", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=stderr, bufsize=0)
        super().__init__(self.proc.stdout, self.proc.stdin)

    def close(self):
        # EOF on stdin ends the server cleanly (exit 0).
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=10)


class Unix(_Lines):
    """A daemon's unix socket (`serve --listen unix`)."""

    def __init__(self, path=None, state_dir=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path or default_socket(state_dir))
        super().__init__(self.sock.makefile("rb"), self.sock.makefile("wb"))

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class _Pinned(_ssl.SSLContext):
    """The daemon's self-signed certificate has no authority behind it: trust
    exactly the one whose SHA-256 `devices pair` printed. Checked right after
    the TLS handshake, before a byte of the upgrade (and its token) is sent."""

    def __new__(cls, sha256_hex):
        ctx = super().__new__(cls, _ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = _ssl.CERT_NONE
        ctx.pin = sha256_hex.replace(":", "").lower()
        return ctx

    def wrap_socket(self, *args, **kwargs):
        sock = super().wrap_socket(*args, **kwargs)
        if hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest() != self.pin:
            sock.close()
            raise _ssl.SSLError("the server's certificate is not the pinned one")
        return sock


class WebSocket:
    """`/rpc` of a `serve --listen ws://|wss://` listener, through the
    `websockets` package (imported only here). token: a paired device's token
    (sent as Authorization: Bearer); cert_sha256: pin a self-signed wss
    certificate; ssl: an SSLContext of your own instead."""

    def __init__(self, url, token=None, cert_sha256=None, ssl=None, open_timeout=10):
        from websockets.sync.client import connect  # only WebSocket users need the package
        if cert_sha256 and ssl is None:
            ssl = _Pinned(cert_sha256)
        headers = {"Authorization": "Bearer " + token} if token else None
        kw = {"ssl": ssl} if ssl is not None else {}
        # (entered as a context manager, as websockets 14+ wants; left by close())
        self.ws = connect(url, additional_headers=headers, open_timeout=open_timeout,
                          max_size=None, compression=None, **kw).__enter__()

    def send(self, text):
        self.ws.send(text)

    def recv(self):
        from websockets.exceptions import ConnectionClosed
        try:
            return self.ws.recv()
        except ConnectionClosed:
            return None

    def close(self):
        self.ws.close()
