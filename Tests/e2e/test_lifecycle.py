"""Lifecycle: initialize / initialized / shutdown / exit, gating, EOF and signals."""
import json
import signal
import subprocess

import pytest

from conftest import RPCFailure, validate_result


def test_initialize_result_matches_spec(raw_server):
    r = raw_server.request("initialize", {"clientInfo": {"name": "t", "version": "0"}, "capabilities": {}})
    assert r["serverInfo"]["name"] == "codingbridge"
    assert r["capabilities"]["framing"] == "ndjson"
    assert "ping" in r["capabilities"]["methods"]
    assert r["recovered"] == {} or isinstance(r["recovered"], dict)


def test_methods_before_initialize_get_32002(raw_server):
    with pytest.raises(RPCFailure) as e:
        raw_server.request("debug.echo", {"value": 1})
    assert e.value.code == -32002
    assert e.value.data["method"] == "debug.echo"
    # ping and rpc.discover work at any time
    assert raw_server.request("ping") == {}
    validate_result("rpc.discover", raw_server.request("rpc.discover"))
    # notifications before initialize are dropped silently
    raw_server.notify("debug.echo", {})
    raw_server.expect_silence()


def test_second_initialize_is_rejected(server):
    with pytest.raises(RPCFailure) as e:
        server.request("initialize", {"clientInfo": {"name": "again"}})
    assert e.value.code == -32600
    assert "already" in e.value.data["reason"]


def test_initialize_checks_param_types(raw_server):
    with pytest.raises(RPCFailure) as e:
        raw_server.request("initialize", {"clientInfo": "me"})
    assert e.value.code == -32602
    assert e.value.data["param"] == "clientInfo"
    with pytest.raises(RPCFailure) as e:
        raw_server.request("initialize", {"capabilities": {"notifications": "no"}})
    assert e.value.code == -32602 and e.value.data["param"] == "capabilities.notifications"
    # still uninitialized, and a correct initialize works afterwards
    raw_server.initialize()
    assert raw_server.request("debug.echo", {"value": 3}) == {"value": 3}


def test_shutdown_then_exit_exits_0(server):
    assert server.request("shutdown") is None
    with pytest.raises(RPCFailure) as e:
        server.request("debug.echo", {})
    assert e.value.code == -32600 and "shutting down" in e.value.data["reason"]
    assert server.request("ping") == {}
    server.notify("exit")
    assert server.wait() == 0


def test_exit_without_shutdown_exits_1(server):
    server.notify("exit")
    assert server.wait() == 1


def test_exit_before_initialize_exits_1(raw_server):
    raw_server.notify("exit")
    assert raw_server.wait() == 1


def test_eof_flushes_pending_replies_and_exits_0(spawn):
    c = spawn(initialize=False)
    msgs = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(500)]
    c.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
    c.close_stdin()
    assert c.wait() == 0
    ids = [c.recv()["id"] for _ in range(500)]
    assert ids == list(range(500))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_exits_cleanly(server, sig):
    assert server.request("ping") == {}
    server.proc.send_signal(sig)
    assert server.wait() == 0
    assert "Traceback" not in server.stderr()


def test_stdout_carries_protocol_only(spawn):
    c = spawn("--ephemeral", "--log-level", "debug", initialize=False)
    c.initialize()
    c.request("ping")
    c.close_stdin()
    assert c.wait() == 0
    # everything on stdout parsed as JSON-RPC (the reader fails otherwise);
    # logs went to stderr
    assert "codingbridge[" in c.stderr()


def test_device_id_is_accepted(raw_server):
    r = raw_server.initialize(deviceId="iphone-1")
    validate_result("initialize", r)


def _stuffed_server():
    """A server whose client wrote many requests and reads nothing."""
    p = subprocess.Popen([conftest_binary(), "serve", "--ephemeral"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    import os
    os.set_blocking(p.stdin.fileno(), False)
    req = b'{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}\n' * 100
    import time
    deadline = time.time() + 10
    stalled = 0
    while time.time() < deadline and stalled < 20:
        try:
            p.stdin.write(req)
            stalled = 0
        except BlockingIOError:
            stalled += 1
            time.sleep(0.05)
    return p


def conftest_binary():
    from conftest import binary
    return binary()


def test_sigterm_with_a_client_that_never_reads_still_exits():
    p = _stuffed_server()
    try:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 0  # gives up flushing after 5 s
        assert b"not taken by the client" in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()


def test_second_signal_exits_without_waiting():
    import time
    p = _stuffed_server()
    try:
        p.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        t = time.time()
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=20) == 0
        assert time.time() - t < 4
    finally:
        if p.poll() is None:
            p.kill()
