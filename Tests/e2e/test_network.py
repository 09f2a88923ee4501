"""The network listener: `serve --listen ws://127.0.0.1:0 [--listen wss://...]`.

JSON-RPC 2.0 over WebSocket text frames at /rpc, with real clients: Python's
`websockets` (sync client), raw sockets for malformed HTTP and misbehaving
WebSocket peers, `ssl` for TLS. Results are validated against
rpc-spec/openrpc.json. The browser Origin rule is in test_network_browser.py.

Sections: transport, listen rules, TLS, malformed HTTP, Origin (non-browser),
authentication (skipped until `device.pair` is in rpc.discover).
"""
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import tempfile
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from conftest import RPCFailure, flood_unread, validate_result
from netharness import (NetServer, WS, cert_sha256, net, raw_http, raw_upgrade, read_frame,  # noqa: F401
                        require_pairing, run_serve, srv, upgrade_request, ws_frame)


def no_verify():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def still_serving(s, scheme="ws", **kw):
    """The daemon is up and answers a fresh WebSocket client."""
    assert s.alive(), s.stderr()
    c = s.ws(scheme, **kw)
    try:
        assert c.request("ping") == {}
    finally:
        c.close()


def close_code(c, timeout=3):
    """Reads until the server closes the WebSocket -> its close code."""
    deadline = time.monotonic() + timeout
    with pytest.raises(ConnectionClosed) as e:
        while time.monotonic() < deadline:
            c.ws.recv(timeout=max(0.01, deadline - time.monotonic()))
        raise AssertionError("the server did not close the WebSocket")
    assert e.value.rcvd is not None, f"no close frame from the server: {e.value!r}"
    return e.value.rcvd.code


# ---- transport -----------------------------------------------------------------


def test_ping_initialize_and_batch_over_websocket(srv):
    c = srv.ws()
    assert c.request("ping") == {}
    r = c.initialize(deviceId="ws-laptop") if not srv.pairing else c.initialize()
    assert r["capabilities"]["framing"] == "webSocket"
    validate_result("session.list", c.request("session.list"))
    # a batch is one text message; its reply is one text message (an array)
    c.ws.send(json.dumps([
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "method": "ping"},  # a notification: no entry in the reply
        {"jsonrpc": "2.0", "id": "b", "method": "session.list"},
        {"jsonrpc": "2.0", "id": "c", "method": "no.such.method"},
    ]))
    reply = json.loads(c.ws.recv(timeout=5))
    assert isinstance(reply, list) and len(reply) == 3
    by_id = {m["id"]: m for m in reply}
    assert by_id["a"]["result"] == {}
    validate_result("session.list", by_id["b"]["result"])
    assert by_id["c"]["error"]["code"] == -32601
    # an empty batch and unparsable text are answered, not dropped
    c.ws.send("[]")
    assert json.loads(c.ws.recv(timeout=5))["error"]["code"] == -32600
    c.ws.send("{not json")
    assert json.loads(c.ws.recv(timeout=5))["error"]["code"] == -32700
    assert c.request("ping") == {}


def test_methods_before_initialize_get_32002_and_ping_is_served(srv):
    c = srv.ws()
    assert c.request("ping") == {}
    r = c.call("session.list")
    # with device authentication the gate answers first (the Bearer token is taken at initialize)
    assert r["error"]["code"] == (-32001 if srv.pairing else -32002), r
    c.initialize()
    validate_result("session.list", c.request("session.list"))
    assert c.call("initialize", {})["error"]["code"] == -32600  # only once


def test_shutdown_and_exit_close_only_that_websocket_client(srv):
    a, b = srv.ws(), srv.ws()
    a.initialize()
    b.initialize()
    u = srv.unix()
    assert b.call("shutdown")["result"] is None
    assert b.call("session.list")["error"]["code"] == -32600
    b.notify("exit")
    assert close_code(b) == 1000
    # a, the unix client and new clients carry on
    validate_result("session.list", a.request("session.list"))
    validate_result("session.list", u.request("session.list"))
    still_serving(srv)
    assert srv.alive()


def test_notifications_from_a_unix_client_reach_websocket_clients(srv):
    phone = srv.ws()
    phone.initialize()
    watcher = srv.ws()  # connected, not initialized: gets nothing
    u = srv.unix()
    u.request("agent.event", {"sessionId": "s1", "type": "task_started", "prompt": "fix the tests",
                              "projectName": "MyApp", "projectPath": "~/code/MyApp"})
    n = phone.wait_notification("session.changed", lambda p: p["session"]["id"] == "s1")
    assert n["session"]["id"] == "s1"
    u.request("app.update", {"phase": "background"})
    u.request("agent.event", {"sessionId": "s1", "type": "task_completed", "summary": "Fixed",
                              "projectName": "MyApp", "projectPath": "~/code/MyApp"})
    post = phone.wait_notification("notification.post")  # validated against NotificationPostParams
    assert post["title"] == "Task Complete" and post["threadId"] == "s1"
    assert phone.request("session.list")["sessions"] == u.request("session.list")["sessions"]
    with pytest.raises(TimeoutError):
        watcher.ws.recv(timeout=0.3)


def test_binary_frame_is_closed_with_1003(srv):
    c = srv.ws()
    c.initialize()
    c.ws.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert close_code(c) == 1003
    still_serving(srv)


def test_message_over_max_message_bytes_is_closed_with_1009(net):
    s = net("--max-message-bytes", "1024")
    c = s.ws()
    assert c.request("ping") == {}
    big = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "debug.echo", "params": {"x": "y" * 2000}})
    c.ws.send(big)
    assert close_code(c) == 1009
    # a message just under the limit is fine on a new connection
    d = s.ws()
    d.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "p" * 900}}))
    assert json.loads(d.ws.recv(timeout=5))["id"] == 1
    still_serving(s)


def test_fragmented_text_message_is_reassembled(srv):
    c = srv.ws()
    c.initialize()
    msg = json.dumps({"jsonrpc": "2.0", "id": 77, "method": "session.list"})
    parts = [msg[i:i + 5] for i in range(0, len(msg), 5)]
    assert len(parts) > 3
    c.ws.send(iter(parts))  # one text frame + continuation frames
    r = c.reply(77)
    validate_result("session.list", r["result"])
    # a fragmented message interleaved with a control frame (ping) is still one message
    s, rest = raw_upgrade(srv.port())
    body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode()
    s.sendall(ws_frame(body[:10], opcode=0x1, fin=False) + ws_frame(b"hi", opcode=0x9) +
              ws_frame(body[10:20], opcode=0x0, fin=False) + ws_frame(body[20:], opcode=0x0, fin=True))
    seen = {}
    while 0x1 not in seen:
        op, payload, rest = read_frame(s, rest)
        seen[op] = payload
    assert seen[0xA] == b"hi"  # the pong echoes the ping's payload
    assert json.loads(seen[0x1]) == {"jsonrpc": "2.0", "id": 5, "result": {}}
    s.close()


def test_websocket_ping_gets_pong(srv):
    c = srv.ws()
    for _ in range(3):
        pong = c.ws.ping(os.urandom(8))
        assert pong.wait(1), "no pong within 1 s"
    assert c.request("ping") == {}


def test_client_that_never_reads_does_not_stop_others(net):
    s = net("--slow-client-timeout", "2")
    other = s.ws()
    other.initialize()
    latencies, failures = [], []
    done = threading.Event()

    def keep_pinging():  # another client, all along
        while not done.is_set():
            t = time.monotonic()
            try:
                assert other.request("ping", timeout=1) == {}
            except Exception as e:  # noqa: BLE001
                failures.append(repr(e))
                return
            latencies.append(time.monotonic() - t)
            time.sleep(0.01)

    pinger = threading.Thread(target=keep_pinging)
    pinger.start()
    slow, _ = raw_upgrade(s.port())
    slow.setblocking(False)
    frame = ws_frame(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "rpc.discover"})) * 64
    # flood requests (large replies) and never read; reset: already dropped by the slow-client policy
    _, reset = flood_unread(slow, frame, reset_ok=True)
    # past the stall timeout the slow one is dropped; the daemon stays up. Not
    # reading meanwhile: reading would be progress, and the client no longer stalled.
    dropped = reset
    time.sleep(4)
    deadline = time.monotonic() + 10
    slow.setblocking(True)
    slow.settimeout(0.5)
    while time.monotonic() < deadline and not dropped:
        try:
            if not slow.recv(1 << 20):
                dropped = True
        except socket.timeout:
            pass
        except ConnectionResetError:
            dropped = True
    time.sleep(0.3)
    done.set()
    pinger.join(5)
    assert not failures, failures
    assert len(latencies) > 20 and max(latencies) < 1.0, \
        f"{len(latencies)} pings, worst {max(latencies or [0]):.3f}s while another client did not read"
    assert dropped, "the client that never read was never disconnected"
    assert other.request("ping") == {}
    still_serving(s)


def test_plain_http_get_rpc_without_upgrade_is_400(srv):
    p = srv.port()
    r = raw_http(p, b"GET /rpc HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % p)
    assert r["status"] == 400
    assert r["headers"]["content-type"] == "application/json"
    assert "WebSocket" in json.loads(r["body"])["error"]
    still_serving(srv)


def test_unknown_path_is_404_json(srv):
    p = srv.port()
    # "/" and the web app's files are served (test_webapp.py); nothing else is
    for path in (b"/nope", b"/index.htm", b"/rpc2", b"/hooks", b"/web/index.html"):
        r = raw_http(p, b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % p)
        assert r["status"] == 404, (path, r)
        assert r["headers"]["content-type"] == "application/json"
        assert "/rpc" in json.loads(r["body"])["error"]
    with pytest.raises(InvalidStatus) as e:
        srv.ws(path="/nope", auth=False)
    assert e.value.response.status_code == 404


def test_hooks_route_exists_on_a_loopback_listener(srv):
    p = srv.port()
    r = raw_http(p, b"POST /hooks/claude HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 2\r\n\r\n{}" % p)
    assert r["status"] is not None and r["status"] != 404, r
    still_serving(srv)


def test_sigterm_stops_a_daemon_with_a_network_listener(srv):
    c = srv.ws()
    assert c.request("ping") == {}
    c.close()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        rc = srv.proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        pytest.fail("still running 3 s after SIGTERM: " + srv.stderr())
    assert rc == 0


# ---- listen rules ----------------------------------------------------------------


@pytest.mark.parametrize("addr", ["ws://0.0.0.0:0", "ws://[::]:0", "ws://192.0.2.2:0", "ws://10.1.2.3:8765"])
def test_plain_ws_on_a_non_loopback_address_exits_2(addr, tmp_path):
    t = time.monotonic()
    rc, err = run_serve("--no-stdio", "--state-dir", str(tmp_path / "s"), "--listen", addr)
    assert rc == 2, err
    assert "wss://" in err and "loopback" in err, err
    assert time.monotonic() - t < 5
    assert not (tmp_path / "s" / "listen.json").exists()


def test_port_0_picks_a_free_port(net):
    a, b = net(), net()
    assert a.port() > 0 and b.port() > 0 and a.port() != b.port()
    still_serving(a)
    still_serving(b)


def test_listen_json_lists_every_network_listener(net):
    s = net("--listen", "ws://[::1]:0", "--listen", "ws://localhost:0", wss=True)
    urls = [e["url"] for e in s.listen]
    assert len(urls) == 4, s.listen
    assert sum(u.startswith("wss://127.0.0.1:") for u in urls) == 1
    assert sum(u.startswith("ws://127.0.0.1:") for u in urls) == 2  # localhost is written as 127.0.0.1
    assert sum(u.startswith("ws://[::1]:") for u in urls) == 1
    for e in s.listen:
        assert set(e) == {"url", "certSha256"}
        port = int(e["url"].rsplit(":", 1)[1])
        assert 0 < port < 65536
        if e["url"].startswith("wss://"):
            assert len(e["certSha256"]) == 64 and int(e["certSha256"], 16) >= 0
        else:
            assert e["certSha256"] is None
    assert stat.S_IMODE(os.stat(s.listen_json_path).st_mode) & 0o077 == 0
    # every URL answers
    for e in s.listen:
        kw = {"ssl": no_verify()} if e["url"].startswith("wss") else {}
        c = WS(e["url"] + "/rpc", **kw)
        assert c.request("ping") == {}
        c.close()


@pytest.mark.parametrize("given", ["--tls-cert", "--tls-key"])
def test_tls_cert_and_key_go_together(given, tmp_path):
    f = tmp_path / "x.pem"
    f.write_text("x")
    rc, err = run_serve("--no-stdio", "--state-dir", str(tmp_path / "s"), "--listen", "wss://127.0.0.1:0",
                        given, str(f))
    assert rc == 2, err
    assert "--tls-cert and --tls-key" in err, err


def test_wss_on_all_interfaces_is_allowed(net):
    s = net("--listen", "wss://0.0.0.0:0", ws=False)
    e = s.entry("wss")
    assert e["url"].startswith("wss://0.0.0.0:")
    c = WS("wss://127.0.0.1:%d/rpc" % s.port("wss"), ssl=no_verify())
    assert c.request("ping") == {}


# ---- TLS ---------------------------------------------------------------------------


def peer_fingerprint(port):
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with no_verify().wrap_socket(raw, server_hostname="127.0.0.1") as t:
        return cert_sha256(t.getpeercert(binary_form=True))


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")
def test_wss_certificate_matches_the_pinned_fingerprint(net):
    s = net(wss=True)
    pin = s.entry("wss")["certSha256"]
    assert peer_fingerprint(s.port("wss")) == pin
    c = s.ws("wss", ssl=no_verify())
    assert cert_sha256(c.ws.socket.getpeercert(binary_form=True)) == pin
    assert c.ws.socket.version() in ("TLSv1.2", "TLSv1.3")
    assert c.initialize()["capabilities"]["framing"] == "webSocket"
    validate_result("session.list", c.request("session.list"))
    # the generated pair lives in the state directory, the key private
    key = os.path.join(s.state_dir, "tls-key.pem")
    assert os.path.exists(os.path.join(s.state_dir, "tls-cert.pem"))
    assert stat.S_IMODE(os.stat(key).st_mode) & 0o077 == 0
    # TLS below 1.2 is refused
    old = no_verify()
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    try:
        raw = socket.create_connection(("127.0.0.1", s.port("wss")), timeout=5)
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            old.wrap_socket(raw, server_hostname="127.0.0.1")
    except ssl.SSLError:
        pass  # this OpenSSL cannot even offer TLS 1.1
    still_serving(s, "wss", ssl=no_verify())


def test_generated_certificate_is_reused_across_restarts():
    d = tempfile.mkdtemp(prefix="cbn-", dir="/tmp")
    try:
        a = NetServer(wss=True, state_dir=d)
        first = a.entry("wss")["certSha256"]
        with open(os.path.join(d, "tls-cert.pem"), "rb") as f:
            pem = f.read()
        a.stop()
        b = NetServer(wss=True, state_dir=d)
        try:
            assert b.entry("wss")["certSha256"] == first
            assert peer_fingerprint(b.port("wss")) == first
            with open(os.path.join(d, "tls-cert.pem"), "rb") as f:
                assert f.read() == pem
        finally:
            b.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_given_certificate_and_key_are_served(net, tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "DER"], check=True,
                         capture_output=True).stdout
    s = net("--tls-cert", str(cert), "--tls-key", str(key), wss=True)
    assert s.entry("wss")["certSha256"] == cert_sha256(der)
    assert peer_fingerprint(s.port("wss")) == cert_sha256(der)
    assert not os.path.exists(os.path.join(s.state_dir, "tls-cert.pem"))


def test_tls_handshake_garbage_does_not_stop_the_daemon(net):
    s = net(wss=True)
    port = s.port("wss")
    for blob in (os.urandom(512), b"\x16\x03\x01\x00\x05hello", b"\x16\x03\x03\xff\xff" + os.urandom(4000),
                 b"GET /rpc HTTP/1.1\r\n\r\n"):
        r = raw_http(port, blob, timeout=2)
        assert r["status"] is None  # no HTTP answer in clear
    # a client that starts a handshake and goes silent
    idle = socket.create_connection(("127.0.0.1", port))
    idle.sendall(b"\x16\x03\x01")
    still_serving(s, "wss", ssl=no_verify())
    idle.close()
    still_serving(s, "wss", ssl=no_verify())
    still_serving(s)


def test_plain_ws_to_the_wss_port_fails_cleanly(net):
    s = net(wss=True)
    t = time.monotonic()
    with pytest.raises(Exception) as e:
        WS("ws://127.0.0.1:%d/rpc" % s.port("wss"), open_timeout=3)
    assert not isinstance(e.value, TimeoutError), "the server left a plain client hanging"
    assert time.monotonic() - t < 3
    still_serving(s, "wss", ssl=no_verify())


# ---- malformed HTTP ---------------------------------------------------------------


def assert_400_closed(r, why):
    assert r["status"] == 400, r
    assert r["closed"], "the connection stayed open after a 400"
    assert why in json.loads(r["body"])["error"]


@pytest.mark.parametrize("path", [b"/rpc", b"/", b"/hooks/claude"])
def test_content_length_with_transfer_encoding_is_400_and_closed(srv, path):
    p = srv.port()
    r = raw_http(p, b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 5\r\n"
                                      b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                                      b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n" % p)
    assert_400_closed(r, "Content-Length and Transfer-Encoding")
    assert r["raw"].count(b"HTTP/1.1 ") == 1, "a smuggled second request was answered"
    r = raw_http(p, upgrade_request(p, extra=b"Content-Length: 0\r\nTransfer-Encoding: chunked\r\n") + b"0\r\n\r\n")
    assert_400_closed(r, "Content-Length and Transfer-Encoding")
    still_serving(srv)


def test_two_content_lengths_are_400_and_closed(srv):
    p = srv.port()
    r = raw_http(p, b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
    assert_400_closed(r, "Content-Length")
    still_serving(srv)


@pytest.mark.parametrize("shape", ["one-header", "many-headers"])
def test_request_head_over_64k_is_400_and_closed(srv, shape):
    p = srv.port()
    if shape == "one-header":
        extra = b"X-Junk: " + b"a" * (65 << 10) + b"\r\n"
    else:
        extra = b"".join(b"X-J%d: %s\r\n" % (i, b"b" * 900) for i in range(80))
    r = raw_http(p, upgrade_request(p, extra=extra))
    assert_400_closed(r, "size limit")
    # just under the limit is served
    s, _ = raw_upgrade(p, extra=b"X-Junk: " + b"a" * (60 << 10) + b"\r\n")
    s.close()
    still_serving(srv)


def test_a_hundred_junk_headers(srv):
    p = srv.port()
    junk = b"".join(b"X-Junk-%d: \x01zz%d\r\n" % (i, i) for i in range(100))
    r = raw_http(p, upgrade_request(p, extra=junk))
    assert r["status"] == 400 and r["closed"], r
    r = raw_http(p, b"GET /x HTTP/1.1\r\n" + b"".join(b"junk line %d\r\n" % i for i in range(100)) + b"\r\n")
    assert r["status"] == 400 and r["closed"], r
    r = raw_http(p, b"\x00\xff garbage \r\n\r\n")
    assert r["status"] == 400 and r["closed"], r
    still_serving(srv)


def test_truncated_requests_then_close(srv):
    p = srv.port()
    req = upgrade_request(p)
    for cut in (1, 5, 17, len(req) // 2, len(req) - 3):
        s = socket.create_connection(("127.0.0.1", p))
        s.sendall(req[:cut])
        s.close()
    # a truncated body on /hooks/claude
    s = socket.create_connection(("127.0.0.1", p))
    s.sendall(b"POST /hooks/claude HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"a\":")
    s.close()
    # half a frame after a good upgrade
    s, _ = raw_upgrade(p)
    s.sendall(ws_frame('{"jsonrpc":"2.0","id":1,"method":"ping"}')[:9])
    s.close()
    time.sleep(0.1)
    still_serving(srv)


# ---- Origin (without a browser; with one: test_network_browser.py) -------------------


def test_foreign_origin_is_403_and_own_origins_are_allowed(net):
    s = net("--allow-origin", "https://app.example")
    p = s.port()
    for origin in ("http://evil.example", "http://127.0.0.1:%d.evil.example" % p, "null",
                   "https://127.0.0.1:%d" % p, "http://127.0.0.1:%d" % (p + 1)):
        with pytest.raises(InvalidStatus) as e:
            s.ws(origin=origin)
        assert e.value.response.status_code == 403, origin
    for origin in ("http://127.0.0.1:%d" % p, "http://localhost:%d" % p, "https://app.example"):
        host_hdr = origin.split("://")[1] if "app.example" not in origin else None
        if host_hdr and host_hdr.startswith("localhost"):
            r = raw_http(p, upgrade_request(p).replace(b"Host: 127.0.0.1", b"Host: localhost") [:-2] +
                         b"Origin: " + origin.encode() + b"\r\n\r\n", timeout=0.5)
            assert r["status"] == 101, (origin, r)
            continue
        c = s.ws(origin=origin)
        assert c.request("ping") == {}
        c.close()
    # DNS rebinding: a name that resolves to us is not our origin
    r = raw_http(p, upgrade_request(p).replace(b"Host: 127.0.0.1", b"Host: evil.example")[:-2] +
                 b"Origin: http://evil.example:%d\r\n\r\n" % p)
    assert r["status"] == 403 and r["closed"], r
    still_serving(s)


# ---- authentication (branch devices) ----------------------------------------------


def test_unauthenticated_network_call_is_32001(srv):
    require_pairing(srv)
    c = srv.ws(auth=False)
    assert c.request("ping") == {}
    assert "device.pair" in [m["name"] for m in c.request("rpc.discover", validate=False)["methods"]]
    r = c.call("session.list")
    assert r["error"]["code"] == -32001
    # the unix socket stays trusted
    validate_result("session.list", srv.unix().request("session.list"))


def test_pairing_then_initialize_with_the_token(srv):
    require_pairing(srv)
    c = srv.ws(auth=False)
    paired = c.request("device.pair", {"code": srv.pairing_code(), "name": "tablet"})
    assert paired["name"] == "tablet" and paired["token"] and paired["deviceId"]
    r = c.initialize(auth={"token": paired["token"]})
    assert r["deviceId"] == paired["deviceId"]
    validate_result("session.list", c.request("session.list"))
    # a new connection with the same token
    d = srv.ws(auth=False)
    assert d.initialize(auth={"token": paired["token"]})["deviceId"] == paired["deviceId"]
    # the code was single use
    e = srv.ws(auth=False)
    code = srv.pairing_code()
    e.request("device.pair", {"code": code, "name": "x"})
    assert e.call("device.pair", {"code": code, "name": "y"})["error"]["code"] == -32001


def test_bearer_token_on_the_upgrade_authenticates(srv):
    require_pairing(srv)
    paired = srv.pair(name="bearer")
    c = WS(srv.url() + "/rpc", additional_headers={"Authorization": "Bearer " + paired["token"]})
    assert c.initialize()["deviceId"] == paired["deviceId"]  # no auth param: the header's token
    validate_result("session.list", c.request("session.list"))
    # without the header (or auth.token) initialize itself is refused
    d = srv.ws(auth=False)
    assert d.call("initialize", {"clientInfo": {"name": "x"}})["error"]["code"] == -32001
    assert d.call("session.list")["error"]["code"] == -32001


def test_wrong_token_is_refused(srv):
    require_pairing(srv)
    c = srv.ws(auth=False)
    r = c.call("initialize", {"clientInfo": {"name": "x"}, "auth": {"token": "not-a-token"}})
    assert r["error"]["code"] == -32001
    assert c.call("session.list")["error"]["code"] == -32001
    d = WS(srv.url() + "/rpc", additional_headers={"Authorization": "Bearer not-a-token"})
    assert d.call("session.list")["error"]["code"] == -32001


def test_three_failures_close_the_connection(srv):
    require_pairing(srv)
    c = srv.ws(auth=False)
    for i in range(3):
        r = c.call("session.list")
        assert r["error"]["code"] == -32001
    with pytest.raises(ConnectionClosed):
        c.ws.recv(timeout=2)
        c.call("ping", timeout=2)
    still_serving(srv)


def test_revoke_closes_an_open_websocket_within_100ms(srv):
    require_pairing(srv)
    paired = srv.pair(name="lost tablet")
    c = WS(srv.url() + "/rpc", additional_headers={"Authorization": "Bearer " + paired["token"]})
    c.initialize()
    u = srv.unix()
    closed_at = []

    def watch():
        try:
            while True:
                c.ws.recv(timeout=5)
        except ConnectionClosed:
            closed_at.append(time.monotonic())
        except TimeoutError:
            pass

    t = threading.Thread(target=watch)
    t.start()
    r = u.request("device.revoke", {"deviceId": paired["deviceId"]})
    replied = time.monotonic()
    assert r["closedConnections"] == 1
    t.join(5)
    assert closed_at, "the revoked device's WebSocket stayed open"
    assert closed_at[0] - replied < 0.1, f"closed {closed_at[0] - replied:.3f}s after the revoke"
    with pytest.raises(InvalidStatus if False else Exception):
        d = WS(srv.url() + "/rpc", additional_headers={"Authorization": "Bearer " + paired["token"]})
        d.request("session.list")


def test_ten_thousand_unauthenticated_attempts_while_a_device_is_served(srv):
    require_pairing(srv)
    port = srv.port()
    good = srv.ws()
    good.initialize()
    stop = threading.Event()
    latencies = []
    errors = []

    def served():
        i = 0
        while not stop.is_set():
            t = time.monotonic()
            try:
                assert good.request("ping", timeout=5) == {}
                validate_result("session.list", good.request("session.list", timeout=5))
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
                return
            latencies.append(time.monotonic() - t)
            i += 1

    successes = []

    def attempt(i):
        kind = i % 3
        try:
            if kind == 0:  # open, close
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                return
            s, rest = raw_upgrade(port)
            s.settimeout(5)
            if kind == 1:  # garbage
                s.sendall(ws_frame(os.urandom(16).hex()))
            else:  # a non-public call without a token
                s.sendall(ws_frame(json.dumps({"jsonrpc": "2.0", "id": i, "method": "session.list"})))
                op, payload, rest = read_frame(s, rest)
                if op == 0x1:
                    m = json.loads(payload)
                    if "result" in m:
                        successes.append(m)
            s.close()
        except (OSError, EOFError, AssertionError):
            pass  # refused or closed under load: fine, but never an answer

    bg = threading.Thread(target=served)
    bg.start()
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(attempt, range(10_000)))
    stop.set()
    bg.join(10)
    assert not errors, errors
    assert not successes, f"an unauthenticated session.list was answered: {successes[:3]}"
    assert latencies and max(latencies) < 2.0, f"the paired device waited {max(latencies):.3f}s"
    assert time.monotonic() - t0 < 120
    still_serving(srv)


def test_a_client_that_does_not_authenticate_is_closed_after_auth_timeout(tmp_path):
    srv = NetServer("--auth-timeout", "1", state_dir=str(tmp_path / "s"))
    try:
        require_pairing(srv)
        idle = srv.ws(auth=False)
        assert idle.request("ping") == {}
        paired = srv.ws()
        paired.initialize()  # authenticated (its Bearer token): not affected
        t = time.monotonic()
        with pytest.raises(ConnectionClosed):
            idle.ws.recv(timeout=5)
        assert 0.5 < time.monotonic() - t < 4
        assert paired.request("ping") == {}
        time.sleep(1.2)
        validate_result("session.list", paired.request("session.list"))
    finally:
        srv.cleanup()
