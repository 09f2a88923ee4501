"""Hostile peers of the network listener, each a crash, an unbounded queue or a held
descriptor found by review: the daemon must survive and stay bounded."""
import os
import socket
import ssl
import time

from netharness import NetServer, raw_upgrade, require_pairing, upgrade_request, ws_frame  # noqa: F401


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def tls_upgrade(port):
    """A TLS connection upgraded to a WebSocket, the raw TCP socket kept so
    bytes that are not TLS can follow."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_side=False)

    def flush():
        d = out.read()
        if d:
            raw.sendall(d)

    def fill():
        d = raw.recv(65536)
        assert d, "closed during the TLS handshake"
        inc.write(d)

    while True:
        try:
            tls.do_handshake()
            flush()
            break
        except ssl.SSLWantReadError:
            flush()
            fill()
    tls.write(upgrade_request(port))
    flush()
    head = b""
    while b"\r\n\r\n" not in head:
        fill()
        try:
            while True:
                head += tls.read(65536)
        except ssl.SSLWantReadError:
            pass
    assert head.startswith(b"HTTP/1.1 101"), head
    return raw


def test_a_forged_tls_record_after_the_upgrade_does_not_stop_the_daemon(tmp_path):
    srv = NetServer(ws=True, wss=True, state_dir=str(tmp_path / "s"))
    try:
        for _ in range(3):
            raw = tls_upgrade(srv.port("wss"))
            raw.sendall(bytes([0x17, 3, 3, 0, 64]) + os.urandom(64))  # application data, bad MAC
            raw.settimeout(3)
            try:
                while raw.recv(4096):
                    pass
            except OSError:
                pass
            raw.close()
        time.sleep(0.3)
        assert srv.alive(), srv.stderr()
        assert srv.ws(scheme="wss", ssl=_no_verify()).request("ping") == {}
    finally:
        srv.cleanup()


def _no_verify():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def test_a_flooding_client_that_never_reads_is_paused_not_queued(tmp_path):
    srv = NetServer("--slow-client-timeout", "30", state_dir=str(tmp_path / "s"))
    try:
        s, _ = raw_upgrade(srv.port())
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        chunk = ws_frame('{"jsonrpc":"2.0","id":1,"method":"ping"}') * 5000  # ~240 KB
        s.settimeout(3)
        sent = 0
        try:
            while sent < 200:  # ~48 MB of requests, ~40 MB of replies if all were read
                s.sendall(chunk)
                sent += 1
        except (socket.timeout, OSError):
            pass
        # the daemon stopped reading once ~4 MiB of replies were queued, so the
        # sender blocked long before everything went out
        assert sent < 200, "the daemon read every request of a client that never reads"
        assert srv.ws().request("ping") == {}
        s.close()
    finally:
        srv.cleanup()


def test_an_unauthenticated_client_with_full_buffers_is_dropped_at_the_deadline(tmp_path):
    srv = NetServer("--auth-timeout", "1", state_dir=str(tmp_path / "s"))
    try:
        require_pairing(srv)
        pid = srv.proc.pid
        before = open_fds(pid)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.port()))
        s.sendall(upgrade_request(srv.port()))
        s.settimeout(2)
        try:  # pings the daemon answers into buffers nobody empties
            s.sendall(ws_frame('{"jsonrpc":"2.0","id":1,"method":"ping"}') * 80000)
        except (socket.timeout, OSError):
            pass
        deadline = time.monotonic() + 10
        while open_fds(pid) > before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert open_fds(pid) <= before, "the daemon still holds the connection's descriptor"
        s.close()
    finally:
        srv.cleanup()


def test_unauthenticated_connections_per_host_are_capped(tmp_path):
    srv = NetServer(state_dir=str(tmp_path / "s"))
    held = []
    try:
        require_pairing(srv)
        for _ in range(256):
            held.append(raw_upgrade(srv.port())[0])
        extra, _ = raw_upgrade(srv.port())
        extra.settimeout(3)
        assert extra.recv(100) == b"", "the 257th unauthenticated connection from one host was kept"  # dropped, no close frame
        extra.close()
        for s in held:
            s.close()
        held = []
        time.sleep(0.3)
        c = srv.ws()
        c.initialize()
        assert c.request("ping") == {}
        assert "refused" in srv.stderr()
    finally:
        for s in held:
            s.close()
        srv.cleanup()
