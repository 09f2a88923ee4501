"""Every bad input: each gets a clear JSON-RPC error (with `data`
saying what was wrong) and the server keeps serving the next message."""
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import RPCFailure, binary, validate_response


def line(c, raw: bytes):
    c.send_raw(raw + b"\n")


def expect_error(c, code, id=None):
    r = c.recv()
    validate_response(r)
    assert r["id"] == id, r
    assert r["error"]["code"] == code, r
    assert isinstance(r["error"].get("data"), dict), r
    return r["error"]


def still_serving(c):
    assert c.request("ping") == {}
    assert c.request("debug.echo", {"ok": True}) == {"ok": True}


@pytest.mark.parametrize("raw", [b"{", b"{]", b"nul", b'{"jsonrpc":"2.0",}', b"'single'", b"\x00"])
def test_malformed_json(server, raw):
    line(server, raw)
    err = expect_error(server, -32700)
    assert "reason" in err["data"] and "position" in err["data"]
    still_serving(server)


@pytest.mark.parametrize("raw", [b"1", b'"text"', b"null", b"true", b'{"foo":"boo"}', b"{}"])
def test_valid_json_that_is_not_a_request(server, raw):
    line(server, raw)
    err = expect_error(server, -32600)
    assert err["data"]["reason"]
    still_serving(server)


@pytest.mark.parametrize("version", ['"1.0"', "2.0", '"2.00"', "null"])
def test_wrong_jsonrpc_value(server, version):
    line(server, b'{"jsonrpc":%s,"id":7,"method":"ping"}' % version.encode())
    err = expect_error(server, -32600, id=7)
    assert err["data"]["member"] == "jsonrpc"
    still_serving(server)


def test_missing_jsonrpc_member(server):
    line(server, b'{"id":8,"method":"ping"}')
    assert expect_error(server, -32600, id=8)["data"]["member"] == "jsonrpc"


@pytest.mark.parametrize("method", ["1", "null", "[]", '{"a":1}', "true"])
def test_non_string_method(server, method):
    line(server, b'{"jsonrpc":"2.0","id":"m","method":%s}' % method.encode())
    assert expect_error(server, -32600, id="m")["data"]["member"] == "method"
    still_serving(server)


def test_method_with_nul_is_invalid(server):
    line(server, b'{"jsonrpc":"2.0","id":1,"method":"pi\\u0000ng"}')
    assert expect_error(server, -32600, id=1)["data"]["member"] == "method"


@pytest.mark.parametrize("params", ['"bar"', "3", "true", "null"])
def test_params_neither_array_nor_object(server, params):
    line(server, b'{"jsonrpc":"2.0","id":4,"method":"debug.echo","params":%s}' % params.encode())
    assert expect_error(server, -32600, id=4)["data"]["member"] == "params"
    still_serving(server)


@pytest.mark.parametrize("id", ["{}", "[1]", "true"])
def test_invalid_id_type(server, id):
    line(server, b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % id.encode())
    assert expect_error(server, -32600)["data"]["member"] == "id"


def test_responses_from_the_client_are_ignored(server):
    line(server, b'{"jsonrpc":"2.0","id":99,"result":{}}')
    line(server, b'{"jsonrpc":"2.0","id":98,"error":{"code":1,"message":"x"}}')
    server.expect_silence()
    still_serving(server)


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
def test_message_over_the_limit_is_skipped_and_next_is_kept(spawn, framing):
    c = spawn("--ephemeral", "--max-message-bytes", "4096", framing=framing)
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "debug.echo", "params": {"s": "x" * 10000}}).encode()
    nxt = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
    c.send_raw(c.frame(big) + c.frame(nxt))  # one write: the next message must survive
    err = expect_error(c, -32600)
    assert err["data"]["limit"] == 4096 and err["data"]["size"] > 4096
    r = c.recv()
    assert r["id"] == 2 and r["result"] == {}
    still_serving(c)


def test_default_limit_is_16_mib(spawn):
    c = spawn()
    big = b'{"jsonrpc":"2.0","id":1,"method":"debug.echo","params":{"s":"' + b"y" * (17 << 20) + b'"}}'
    c.send_raw(big + b"\n" + b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
    err = expect_error(c, -32600)
    assert err["data"]["limit"] == 16 << 20
    assert c.recv(timeout=20)["id"] == 2


@pytest.mark.parametrize("header,reason", [
    (b"Content-Length: abc\r\n\r\n", "decimal"),
    (b"Content-Length: -5\r\n\r\n", "decimal"),
    (b"Content-Length: 99999999999999999999999\r\n\r\n", "overflows"),
    (b"Content-Length:\r\n\r\n", "empty"),
    (b"Content-Type: application/json\r\n\r\n", "missing Content-Length"),
    (b"X-A: 1\r\n" * 65 + b"\r\n", "too many header lines"),  # a header block that never ends
    (b"Content-Length: 5\r\nContent-Length: 5\r\n\r\n", "duplicate"),
    (b"Bogus header line\r\n\r\n", "malformed"),
])
def test_bad_or_missing_content_length_resyncs(lsp_server, header, reason):
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    good = b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
    lsp_server.send_raw(header + body + b"Content-Length: %d\r\n\r\n" % len(good) + good)
    err = expect_error(lsp_server, -32700)
    assert reason in err["data"]["reason"]
    r = lsp_server.recv()
    assert r["id"] == 2 and r["result"] == {}
    still_serving(lsp_server)


def test_header_line_too_long(lsp_server):
    lsp_server.send_raw(b"X-Long: " + b"a" * 20000 + b"\r\n\r\n")
    good = b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
    lsp_server.send_raw(b"Content-Length: %d\r\n\r\n" % len(good) + good)
    assert "too long" in expect_error(lsp_server, -32700)["data"]["reason"]
    assert lsp_server.recv()["id"] == 2


@pytest.mark.parametrize("raw", [
    b'{"jsonrpc":"2.0","id":1,"method":"debug.echo","params":{"s":"\xff"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"debug.echo","params":{"s":"\xc3\x28"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"debug.echo","params":{"s":"\xed\xa0\x80"}}',  # UTF-16 surrogate
    b'{"jsonrpc":"2.0","id":1,"method":"debug.echo","params":{"\xe0\x80\xaf":1}}',    # overlong
])
@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
def test_invalid_utf8(spawn, raw, framing):
    c = spawn(framing=framing)
    c.send_raw(c.frame(raw))
    err = expect_error(c, -32700)
    assert "decode" in err["data"]["reason"] or "UTF-8" in err["data"]["reason"]
    still_serving(c)


@pytest.mark.parametrize("depth", [129, 10000, 1_000_000])
def test_deep_nesting(server, depth):
    line(server, b'{"jsonrpc":"2.0","id":1,"method":"debug.echo","params":{"a":' + b"[" * depth + b"]" * depth + b"}}")
    err = expect_error(server, -32700)
    assert err["data"]["reason"] == "nesting too deep"
    assert err["data"]["maxDepth"] == 128
    still_serving(server)


def test_nesting_within_the_limit_works(server):
    v = {"a": json.loads("[" * 100 + "]" * 100)}
    assert server.request("debug.echo", v) == v


def test_client_closes_mid_message_lsp(lsp_server):
    lsp_server.send_raw(b'Content-Length: 100\r\n\r\n{"jsonrpc":"2.0",')
    lsp_server.close_stdin()
    err = expect_error(lsp_server, -32700)
    assert "body" in err["data"]["reason"]
    assert lsp_server.wait() == 0


def test_client_closes_mid_header(lsp_server):
    lsp_server.send_raw(b"Content-Len")
    lsp_server.close_stdin()
    assert "header" in expect_error(lsp_server, -32700)["data"]["reason"]
    assert lsp_server.wait() == 0


def test_client_closes_mid_ndjson_line(server):
    server.send_raw(b'{"jsonrpc":"2.0","id":1,"meth')
    server.close_stdin()
    expect_error(server, -32700)
    assert server.wait() == 0


def test_client_vanishes_entirely_while_replies_are_owed(spawn):
    c = spawn()
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}\n' * 200)
    c.proc.stdout.close()  # nobody reads: the server gets EPIPE, must not crash
    c.close_stdin()
    assert c.wait(timeout=20) in (0,)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    return 0


def test_writer_that_never_reads_keeps_memory_bounded():
    """The peer writes requests with big replies and never reads: the server
    stops reading once ~4 MiB of replies are queued, so the peer's own write
    blocks and the server's memory stays flat. Reading again drains it all."""
    p = subprocess.Popen([binary(), "serve", "--ephemeral"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    try:
        p.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
        # each request ~50 B, each reply the whole spec (rpc.discover, tens of KiB): 6000 of them = hundreds of MiB if unbounded
        req = b'{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}\n'
        total = 6000
        sent = [0]

        def writer():
            try:
                for _ in range(total):
                    p.stdin.write(req)
                    sent[0] += 1
            except (BrokenPipeError, ValueError, OSError):
                pass

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        # wait until the writer makes no progress (the server stopped reading)
        last, stable = -1, 0
        while stable < 4:
            time.sleep(0.25)
            stable = stable + 1 if sent[0] == last else 0
            last = sent[0]
        assert sent[0] < total, "the server kept reading although nobody read its replies"
        rss = rss_kib(p.pid)
        print(f"peer blocked after {sent[0]} requests; server RSS {rss} KiB")
        assert rss < 80 * 1024, f"server RSS {rss} KiB while the peer does not read"
        # now read everything: all accepted requests are answered
        got = 0
        p.stdout.read(0)
        deadline = time.time() + 60
        t_done = False
        while time.time() < deadline:
            chunk = os.read(p.stdout.fileno(), 1 << 20)
            if not chunk:
                break
            got += chunk.count(b"\n")
            if not t.is_alive() and not t_done:
                t_done = True
                p.stdin.close()
        assert got == total + 1  # + initialize
        assert p.wait(timeout=20) == 0
    finally:
        if p.poll() is None:
            p.kill()


def test_batch_reply_is_capped(spawn):
    """A small batch must not be able to demand an unbounded reply: replies of
    one batch are capped at the message size limit; members past it get -32603."""
    c = spawn("--ephemeral", "--max-message-bytes", "200000")
    doc_size = len(json.dumps(c.request("rpc.discover")))
    n = 200000 // doc_size + 3
    c.send([{"jsonrpc": "2.0", "id": i, "method": "rpc.discover"} for i in range(n)] +
           [{"jsonrpc": "2.0", "id": "last", "method": "ping"}])
    r = c.recv(timeout=20)
    assert isinstance(r, list) and len(r) == n + 1
    ok = [e for e in r if "result" in e]
    capped = [e for e in r if "error" in e]
    assert capped and all(e["error"]["code"] == -32603 and e["error"]["data"]["limit"] == 200000 for e in capped)
    # Compact, as the server writes it (json.dumps spacing would inflate the sum).
    assert sum(len(json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode()) for e in r) < 200000 + 200 * len(r)
    assert len(ok) >= 1
    still_serving(c)


def test_stdio_peer_that_takes_nothing_is_cut_off_and_the_server_exits():
    """The slow-client policy holds for stdio too: a peer that leaves more
    than 256 KiB unread and takes nothing for --slow-client-timeout is cut
    off, and with nothing else to serve the server exits 0 as on EOF."""
    p = subprocess.Popen([binary(), "serve", "--ephemeral", "--slow-client-timeout", "1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    try:
        p.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
        # each reply is the whole spec (tens of KiB): far more than the pipe holds
        p.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}\n' * 40)
        code = p.wait(timeout=20)
        assert code == 0, f"exit code {code}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


OUT_OF_RANGE = [
    ("message.send", {"sessionId": "s", "text": "x"}, "ttlMs", 9223372036854775000, 1, 31_536_000_000),
    ("message.send", {"sessionId": "s", "text": "x"}, "ttlMs", 0, 1, 31_536_000_000),
    ("agent.event", {"sessionId": "s", "type": "task_completed"}, "sentAt", -9223372036854775808, 0, 2**53 - 1),
    ("agent.event", {"sessionId": "s", "type": "task_completed"}, "sentAt", 1e300, 0, 2**53 - 1),
    ("outbox.ack", {}, "id", 2**63 - 1, 1, 2**53 - 1),
    ("audit.list", {}, "limit", 1001, 1, 1000),
    ("agent.claudecodeui", {"type": "exit"}, "exitCode", 2**31, -2**31, 2**31 - 1),
    ("settings.update", {}, "approvalTimeoutSeconds", 1e308, 1, 86400),
]


@pytest.mark.parametrize("method,base,param,value,lo,hi", OUT_OF_RANGE)
def test_numbers_outside_their_range_are_refused_with_the_range(server, method, base, param, value, lo, hi):
    """Every number from outside has a range in the contract; beyond it the
    error names the param and the range, and the server keeps serving."""
    line(server, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**base, param: value}}).encode())
    err = expect_error(server, -32602, id=1)
    assert err["data"]["param"] == param, err
    assert (err["data"]["minimum"], err["data"]["maximum"]) == (lo, hi), err
    assert f"out of range [{lo}, {hi}]" in err["message"], err
    still_serving(server)


def test_implausible_sent_at_is_counted_not_measured(server):
    server.request("app.update", {"phase": "background"})
    for sent_at in (1, 2**53 - 1):
        server.request("agent.event", {"sessionId": "s", "type": "task_started"})
        r = server.request("agent.event", {"sessionId": "s", "type": "task_completed", "sentAt": sent_at})
        assert r["status"] == "completed"
    latency = server.request("metrics.get")["notificationLatencyMs"]
    assert latency["count"] == 0 and latency["implausibleSentAt"] == 2


@pytest.mark.parametrize("method,params,unknown", [
    ("approval.respond", {"requestId": "r", "decision": "allow", "sorce": "app"}, ["sorce"]),
    ("settings.get", {"x": 1, "a": 2}, ["a", "x"]),
    ("app.update", {"network": {"connected": True, "wifi": True}}, ["network.wifi"]),
    ("agent.event", {"sessionId": "s", "type": "approval_request", "requestId": "r", "toolName": "Bash",
                     "timeoutSecond": 5}, ["timeoutSecond"]),
])
def test_unknown_param_names_are_refused_and_listed(server, method, params, unknown):
    """A typo must not fall back to a default silently."""
    line(server, json.dumps({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}).encode())
    err = expect_error(server, -32602, id=2)
    assert err["data"]["unknown"] == unknown, err
    assert server.request("approval.list")["approvals"] == []   # nothing was applied
    still_serving(server)


def test_agent_payloads_keep_their_extra_fields(server):
    """Adapters take the agent's own object; its new fields are not errors."""
    r = server.request("agent.hook", {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi",
                                      "prompt_id": "p1", "effort": "high", "model": "claude-x"})
    assert r["status"] == "applied"


@pytest.mark.parametrize("value,what", [
    ("a\u0000b", "U+0000 at byte 1"), ("tab\there", "U+0009"), ("del\u007f", "U+007F"),
    ("x" * 129, "string of 129 characters"), ("", "empty string"),
])
@pytest.mark.parametrize("method,param,base", [
    ("agent.event", "sessionId", {"type": "task_started"}),
    ("agent.event", "requestId", {"sessionId": "s", "type": "approval_request", "toolName": "Bash"}),
    ("question.answer", "questionId", {"answers": {}}),
    ("message.send", "idempotencyKey", {"sessionId": "s", "text": "hi"}),
    ("initialize", "deviceId", {}),
    ("agent.hook", "session_id", {"hook_event_name": "Stop"}),
])
def test_ids_are_bounded_and_without_control_characters(spawn, method, param, base, value, what):
    """A NUL in a session id once truncated it on disk (session "a\\0b" became "a")."""
    c = spawn("--ephemeral", initialize=method != "initialize")
    params = json.dumps({**base, param: value})  # JSON escapes: the server gets \u0000, not a raw NUL
    line(c, b'{"jsonrpc":"2.0","id":3,"method":"%s","params":%s}' % (method.encode(), params.encode()))
    err = expect_error(c, -32602, id=3)
    assert err["data"]["param"] == param and what in err["data"]["got"], err


def test_a_request_id_of_another_session_is_an_error_not_a_silent_drop(server):
    ask = {"type": "approval_request", "requestId": "r1", "toolName": "Bash", "input": {"command": "ls"}}
    server.request("agent.event", {"sessionId": "s1", **ask})
    assert server.request("agent.event", {"sessionId": "s1", **ask})["status"] == "awaitingApproval"  # a retry
    with pytest.raises(RPCFailure) as e:
        server.request("agent.event", {"sessionId": "s2", **ask})
    assert e.value.code == -32012
    assert e.value.data == {"requestId": "r1", "sessionId": "s2", "ownerSessionId": "s1",
                            "reason": "request ids must be unique across sessions; this one belongs to another session"}
    q = {"type": "question", "questionId": "q1", "questions": [{"question": "Which?", "options": [{"label": "A"}]}]}
    server.request("agent.event", {"sessionId": "s1", **q})
    with pytest.raises(RPCFailure) as e:
        server.request("agent.event", {"sessionId": "s2", **q})
    assert e.value.code == -32012 and e.value.data["ownerSessionId"] == "s1"


@pytest.mark.parametrize("value", ["1e308", "inf", "0", "86401"])
def test_slow_client_timeout_out_of_range_is_refused(value):
    p = subprocess.run([binary(), "serve", "--ephemeral", "--slow-client-timeout", value],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    assert p.returncode != 0 and p.returncode < 128, p.returncode
    assert b"--slow-client-timeout " in p.stderr and b"is out of range: seconds in (0, 86400]" in p.stderr, p.stderr


@pytest.mark.parametrize("args,message", [
    (["serve", "--ephemeral", "--auth-timeout", "-1"], b"--auth-timeout -1 is out of range: seconds in (0, 3600]"),
    (["serve", "--ephemeral", "--max-message-bytes", "-5"], b"--max-message-bytes -5 is out of range: bytes in [64, 1073741824]"),
    (["serve", "--ephemeral", "--max-message-bytes", "4294967296"], b"out of range: bytes in [64, 1073741824]"),
    (["hook", "--timeout", "-3"], b"--timeout -3 is out of range: seconds in (0, 86400]"),
    (["hook", "--event-timeout", "1e300"], b"is out of range: seconds in (0, 3600]"),
    (["demo", "--speed", "0"], b"--speed 0 is out of range: a multiplier in (0, 1000]"),
])
def test_numeric_options_out_of_range_say_so(args, message):
    """Negative values are values (not "missing"), and every number has a range."""
    p = subprocess.run([binary(), *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    assert p.returncode != 0 and p.returncode < 128, p.returncode
    assert message in p.stderr, p.stderr


def test_recovery_rate_stays_within_0_and_1(server):
    """The app reports both counters; more successes than attempts is its miscount."""
    server.request("metrics.record", {"metric": "backgroundRecoveryAttempted", "count": 3})
    m = server.request("metrics.record", {"metric": "backgroundRecoverySucceeded", "count": 7})
    assert 0 <= m["recoveryRate"] <= 1 and m["recoveryRate"] == 1
