"""Claude Code http hooks: `POST /hooks/claude` on the daemon's loopback listener,
driven as Claude Code drives it (keep-alive HTTP/1.1 POSTs from http.client, raw
sockets for clients that misbehave or go away).

The daemon is `codingbridge serve --listen ws://127.0.0.1:0 --listen unix --no-stdio
--state-dir D` (netharness.NetServer); the token is `D/hook-token`. The person
decides on a paired WebSocket device; the unix socket is the trusted observer
(session.list, approval.list, audit.list). Each answer is compared with what
`codingbridge hook` (the command hook, test_hook.py) gives for the same input.
"""
import copy
import http.client
import json
import os
import socket
import ssl
import subprocess
import threading
import time
import uuid

import jsonschema
import pytest

from conftest import ROOT, _schema_with_components, binary, validate_notification
from netharness import NetServer, net, raw_http, srv  # noqa: F401

AGENTS = os.path.join(ROOT, "Tests", "e2e", "agents")
PATH = "/hooks/claude"
CWD = "/home/dev/shop-api"


# ---- helpers -------------------------------------------------------------------


def fixture(name):
    with open(os.path.join(AGENTS, name), encoding="utf-8") as f:
        return json.load(f)


def with_session(d, sid):
    d = copy.deepcopy(d)
    d["session_id"] = sid
    d["transcript_path"] = f"/home/dev/.claude/projects/-home-dev-shop-api/{sid}.jsonl"
    return d


def hook_input(sid, event, **k):
    d = {"session_id": sid, "transcript_path": f"/home/dev/.claude/projects/-home-dev-shop-api/{sid}.jsonl",
         "cwd": CWD, "permission_mode": "default", "hook_event_name": event}
    d.update(k)
    return d


def permission(sid, command="terraform apply -auto-approve"):
    return hook_input(sid, "PermissionRequest", tool_name="Bash",
                      tool_input={"command": command, "description": "Apply the staging plan"})


def new_sid():
    return str(uuid.uuid4())


def token_of(s):
    with open(os.path.join(s.state_dir, "hook-token"), encoding="utf-8") as f:
        return f.read().strip()


class Hooks:
    """Claude Code's side: one keep-alive HTTP/1.1 connection to /hooks/claude."""

    def __init__(self, s, token=None, timeout=30):
        self.port = s.port()
        self.token = token_of(s) if token is None else token
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def post(self, body, path=PATH, headers=None, auth=True, method="POST"):
        """-> (status, headers dict (lower-case names), body bytes, seconds)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {"Content-Type": "application/json"}
        if auth:
            h["Authorization"] = "Bearer " + self.token
        h.update(headers or {})
        t0 = time.monotonic()
        self.conn.request(method, path, body=data if method != "GET" else None, headers=h)
        r = self.conn.getresponse()
        out = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, out, time.monotonic() - t0

    def close(self):
        self.conn.close()


class Background:
    """A POST that waits (a PermissionRequest), on its own connection and thread."""

    def __init__(self, s, body, **kw):
        self.h = Hooks(s)
        self.result = None
        self.error = None
        self.t = threading.Thread(target=self._run, args=(body,), kwargs=kw, daemon=True)
        self.t.start()

    def _run(self, body, **kw):
        try:
            self.result = self.h.post(body, **kw)
        except Exception as e:  # noqa: BLE001
            self.error = e

    def running(self):
        return self.t.is_alive()

    def finish(self, timeout=15):
        self.t.join(timeout)
        assert not self.t.is_alive(), "the http hook got no answer"
        if self.error:
            raise self.error
        self.h.close()
        return self.result


def run_command_hook(s, data, *args):
    """`codingbridge hook --state-dir D` as Claude Code runs it -> (code, stdout)."""
    p = subprocess.run([binary(), "hook", "--state-dir", s.state_dir, *args], input=json.dumps(data).encode(),
                       capture_output=True, timeout=30)
    return p.returncode, p.stdout.decode()


def wait_until(cond, what, timeout=5.0, step=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, what
        time.sleep(step)


def sessions(u):
    return {x["id"]: x for x in u.request("session.list")["sessions"]}


def pending(u, sid=None):
    return u.request("approval.list", {"sessionId": sid} if sid else {})["approvals"]


def dechunk(r):
    """The body of a raw_http() answer, chunked transfer coding undone."""
    if r["headers"].get("transfer-encoding", "").lower() != "chunked":
        return r["body"]
    out, rest = b"", r["body"]
    while True:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size.split(b";")[0], 16)
        if n == 0:
            return out
        out, rest = out + rest[:n], rest[n + 2:]


def validate_permission_output(body):
    schema = _schema_with_components({"$ref": "#/components/schemas/ClaudeHookPermissionOutput"})
    out = json.loads(body)
    jsonschema.validate(out, schema)
    return out


def ws_notifications(c, pred, what, timeout=5.0):
    """Reads the WebSocket until a notification matching pred arrived -> the matches."""
    deadline = time.monotonic() + timeout
    while True:
        got = [n for n in c.notifications if pred(n)]
        if got:
            return got
        left = deadline - time.monotonic()
        assert left > 0, f"{what}; got {[n['method'] for n in c.notifications]}"
        try:
            c._take(min(left, 0.5))
        except TimeoutError:
            pass


def device(s):
    """A paired WebSocket device (the phone), initialized -> (client, deviceId)."""
    c = s.ws()
    r = c.initialize()
    return c, r["deviceId"]


# Session fields that depend on when (wall clock) or which id, not on the input.
VOLATILE = {"id", "startedAt", "lastActivityAt", "elapsedSeconds", "elapsed"}


def comparable(sess):
    out = {k: v for k, v in sess.items() if k not in VOLATILE}
    out["deepLink"] = sess["deepLink"].replace(sess["id"], "<id>")
    return out


# ---- 1. events other than PermissionRequest ------------------------------------------


EVENT_FIXTURES = ["hook-session-start.json", "hook-pre-tool-use-bash-tests.json", "hook-post-tool-use-bash.json",
                  "hook-stop.json"]


def test_events_answer_200_empty_on_one_keep_alive_connection_like_the_command_hook(srv):
    u = srv.unix()
    hooks = Hooks(srv)
    sock = None
    for name in EVENT_FIXTURES:
        fx = fixture(name)
        via_http, via_cmd = new_sid(), new_sid()
        for step in fx.get("before", []):
            status, _, body, _ = hooks.post(with_session(step["params"], via_http))
            assert (status, body) == (200, b""), (name, status, body)
            assert run_command_hook(srv, with_session(step["params"], via_cmd)) == (0, "")
        status, headers, body, secs = hooks.post(with_session(fx["input"], via_http))
        assert (status, body) == (200, b""), (name, status, body)
        assert headers.get("content-length", "0") == "0", headers  # (or chunked, empty)
        assert secs < 2.0, (name, secs)
        assert run_command_hook(srv, with_session(fx["input"], via_cmd)) == (0, "")
        # Claude Code keeps the connection: every POST went over the same socket.
        if sock is None:
            sock = hooks.conn.sock
        assert hooks.conn.sock is sock and sock is not None, f"{name}: the server closed the keep-alive connection"
        got = sessions(u)
        want = fx["expect"]["sessionStatus"]
        if want is None:  # SessionStart: nothing to show before a prompt
            assert via_http not in got and via_cmd not in got, name
            continue
        assert got[via_http]["status"] == want, (name, got[via_http])
        for k, v in fx["expect"].get("session", {}).items():
            assert got[via_http].get(k) == v, (name, k, got[via_http])
        assert got[via_http]["projectPath"] == CWD
        # the same outcome as the command hook given the same input
        assert comparable(got[via_http]) == comparable(got[via_cmd]), name
    hooks.close()


# ---- 2. PermissionRequest decided on a paired WebSocket device --------------------------


@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_permission_request_waits_for_the_ws_device_and_answers_its_decision(srv, decision):
    sid = new_sid()
    u = srv.unix()
    phone, device_id = device(srv)
    hooks = Hooks(srv)
    assert hooks.post(hook_input(sid, "UserPromptSubmit", prompt="Deploy staging"))[0] == 200
    waiting = Background(srv, permission(sid), headers={"X-CodingBridge-Timeout": "20"})
    (a,) = wait_until(lambda: pending(u, sid), "no approval for the http hook's PermissionRequest")
    assert a["toolName"] == "Bash" and "terraform apply" in a["summary"]
    assert a["expiresAt"] - a["createdAt"] == 18_000  # 2 s before the request's 20 s
    # the device is told (a banner in the foreground, else a notification)
    rid = a["requestId"]
    shown = ws_notifications(phone, lambda n: n["method"] in ("banner.show", "notification.post")
                             and rid in json.dumps(n), "the ws device got no notification for the approval")
    validate_notification(shown[0]["method"], shown[0]["params"])
    time.sleep(0.3)
    assert waiting.running(), "the http hook answered before anyone decided"
    r = phone.request("approval.respond", {"requestId": rid, "decision": decision})
    assert r["status"] == "accepted"
    status, headers, body, secs = waiting.finish()
    assert status == 200 and headers.get("content-type") == "application/json", (status, headers, body)
    # exactly what the command hook prints: one JSON line
    assert body.endswith(b"\n") and body.count(b"\n") == 1, body
    out = validate_permission_output(body)
    expected = {"behavior": "allow"} if decision == "allow" else {
        "behavior": "deny", "message": f"Denied by the user from CodingBridge ({device_id})."}
    assert out == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": expected}}
    # who decided, from where
    resolved = phone.wait_notification("approval.resolved", lambda p: p["requestId"] == rid)
    assert resolved == {"requestId": rid, "sessionId": sid, "decision": decision, "by": device_id,
                        "alwaysAllow": False, "interrupt": False}
    entries = u.request("audit.list")["entries"]
    mine = [e for e in entries if e["kind"] == "approval.decision" and json.dumps(e["detail"]).find(rid) >= 0]
    assert len(mine) == 1, entries
    local = phone.ws.socket.getsockname()
    assert mine[0]["deviceId"] == device_id
    assert mine[0]["connection"] == "webSocket"
    assert mine[0]["address"] == f"{local[0]}:{local[1]}", (mine[0], local)
    assert pending(u, sid) == []
    # a second answer changes nothing; the connection serves the next hook
    assert phone.request("approval.respond", {"requestId": rid, "decision": "allow"})["status"] == "alreadyResolved"
    assert hooks.post(hook_input(sid, "Stop", stop_hook_active=False))[:3:2] == (200, b"")


# ---- 3. refused requests ------------------------------------------------------------


def test_wrong_or_missing_token_is_401_and_nothing_reaches_the_engine(srv):
    u = srv.unix()
    phone, _ = device(srv)
    paired_token = srv.pair(name="other")["token"]
    good = token_of(srv)
    sid = new_sid()
    body = hook_input(sid, "UserPromptSubmit", prompt="should never arrive")
    variants = {
        "no header": None,
        "wrong token": "Bearer " + "A" * len(good),
        "empty bearer": "Bearer ",
        "bare scheme": "Bearer",
        "token without scheme": good,
        "basic scheme": "Basic " + good,
        "token plus a byte": "Bearer " + good + "x",
        "token minus a byte": "Bearer " + good[:-1],
        "a paired device's token": "Bearer " + paired_token,
    }
    hooks = Hooks(srv)
    for what, value in variants.items():
        status, _, out, _ = hooks.post(body, auth=False, headers={"Authorization": value} if value is not None else {})
        assert status == 401, (what, status, out)
        assert isinstance(json.loads(out)["error"]["message"], str), (what, out)
        # a PermissionRequest is refused the same, without an approval
        status, _, _, _ = hooks.post(permission(sid), auth=False,
                                     headers={"Authorization": value} if value is not None else {})
        assert status == 401, what
    time.sleep(0.2)
    assert sid not in sessions(u)
    assert pending(u) == []
    assert not [n for n in phone.notifications if sid in json.dumps(n)], phone.notifications
    # the right token on the same daemon works
    assert hooks.post(body)[:3:2] == (200, b"")
    assert sessions(u)[sid]["status"] == "processing"


def test_bad_json_is_400_a_get_is_405_and_the_daemon_keeps_serving(srv):
    u = srv.unix()
    hooks = Hooks(srv)
    sid = new_sid()
    for bad in [b"", b"not json", b'{"hook_event_name":', b"[1,2,3]", b'"PreToolUse"', b"\xff\xfe{}", b"null"]:
        status, _, out, _ = hooks.post(bad)
        assert status == 400, (bad, status, out)
        assert json.loads(out)["error"]["message"], out
    # hook input the adapter refuses (as agent.hook does: -32602) is 400 with the reason
    fx = fixture("hook-malformed-missing-session-id.json")
    status, _, out, _ = hooks.post(fx["input"])
    assert status == 400, (status, out)
    err = json.loads(out)["error"]
    assert err["code"] == -32602 and "session_id" in json.dumps(err), err
    status, _, out, _ = hooks.post(b"", method="GET")
    assert status == 405, (status, out)
    assert hooks.post(hook_input(sid, "UserPromptSubmit", prompt="go"))[:3:2] == (200, b"")
    assert sessions(u)[sid]["status"] == "processing"


def test_body_over_max_message_bytes_is_413_and_the_daemon_keeps_serving(net):
    s = net("--max-message-bytes", "1024")
    u = s.unix()
    hooks = Hooks(s)
    sid = new_sid()
    big = hook_input(sid, "UserPromptSubmit", prompt="x" * 2000)
    status, _, out, _ = hooks.post(big)
    assert status == 413, (status, out)
    assert sid not in sessions(u)
    small = hook_input(sid, "UserPromptSubmit", prompt="x" * 100)
    assert len(json.dumps(small)) < 1024
    assert Hooks(s).post(small)[:3:2] == (200, b"")
    assert sessions(u)[sid]["status"] == "processing"


# ---- 4. the wait's bound -------------------------------------------------------------


@pytest.mark.parametrize("how", ["header", "query"])
def test_timeout_bounds_the_wait_and_the_approval_goes(net, how):
    """Manual clock: the engine never expires the approval, so the request's own
    bound ends the wait: 200 empty at 3 s, the approval cancelled."""
    s = net("--manual-clock")
    u = s.unix()
    phone, _ = device(s)
    sid = new_sid()
    kw = {"headers": {"X-CodingBridge-Timeout": "3"}} if how == "header" else {"path": PATH + "?timeout=3"}
    waiting = Background(s, permission(sid), **kw)
    (a,) = wait_until(lambda: pending(u, sid), "no approval")
    assert a["expiresAt"] - a["createdAt"] == 1_000  # 2 s before the 3 s
    status, _, body, secs = waiting.finish()
    assert (status, body) == (200, b""), (status, body)
    assert 2.8 <= secs < 4.0, secs
    assert pending(u, sid) == []
    resolved = phone.wait_notification("approval.resolved", lambda p: p["requestId"] == a["requestId"])
    # as when a command hook gives up at its --timeout and closes its socket
    assert resolved == {"requestId": a["requestId"], "sessionId": sid, "decision": "cancelled", "by": None,
                        "alwaysAllow": False, "interrupt": False}
    late = phone.request("approval.respond", {"requestId": a["requestId"], "decision": "allow"})
    assert late["status"] == "alreadyResolved", late


def test_timeout_on_the_real_clock_expires_the_approval_2s_before(srv):
    """Real clock: the approval expires 2 s before the bound (1 s for 3 s) and the
    request is answered then, empty, as the command hook is."""
    u = srv.unix()
    phone, _ = device(srv)
    sid = new_sid()
    waiting = Background(srv, permission(sid), headers={"X-CodingBridge-Timeout": "3"})
    (a,) = wait_until(lambda: pending(u, sid), "no approval")
    status, _, body, secs = waiting.finish()
    assert (status, body) == (200, b""), (status, body)
    assert 0.8 <= secs < 2.5, secs
    assert pending(u, sid) == []
    resolved = phone.wait_notification("approval.resolved", lambda p: p["requestId"] == a["requestId"])
    assert resolved == {"requestId": a["requestId"], "sessionId": sid, "decision": "timedOut", "by": None,
                        "alwaysAllow": False, "interrupt": False}
    assert u.request("approval.respond", {"requestId": a["requestId"], "decision": "allow"})["status"] == "expired"


def test_invalid_timeout_is_400_and_creates_no_approval(srv):
    u = srv.unix()
    hooks = Hooks(srv)
    sid = new_sid()
    for bad in ["0", "-1", "abc", "nan", "inf", "86401", ""]:
        status, _, out, _ = hooks.post(permission(sid), headers={"X-CodingBridge-Timeout": bad})
        assert status == 400, ("header", bad, status, out)
        assert "timeout" in json.loads(out)["error"]["message"], out
        if bad:  # `?timeout=` with nothing after it: the next test
            status, _, out, _ = hooks.post(permission(sid), path=PATH + "?timeout=" + bad)
            assert status == 400, ("query", bad, status, out)
    assert pending(u) == []
    assert sid not in sessions(u)
    # the header wins over the query
    waiting = Background(srv, permission(sid), path=PATH + "?timeout=abc", headers={"X-CodingBridge-Timeout": "3"})
    wait_until(lambda: pending(u, sid), "the header's valid timeout did not win over the query's")
    status, _, body, _ = waiting.finish()
    assert (status, body) == (200, b"")


def test_empty_timeout_query_is_400_like_an_empty_header(srv):
    u = srv.unix()
    sid = new_sid()
    hooks = Hooks(srv, timeout=2)
    try:
        status, _, out, _ = hooks.post(permission(sid), path=PATH + "?timeout=")
    except TimeoutError:
        pytest.fail(f"POST {PATH}?timeout= was not refused: it waits (approvals: {pending(u, sid)})")
    assert status == 400, (status, out)


# ---- 5. the client goes away ----------------------------------------------------------


def test_client_disconnect_cancels_its_approval_within_1s(srv):
    """As test_hook's killed command hook: Claude Code stops waiting (the person
    answered in the terminal) and closes the connection; the approval leaves the
    phone at once, not at its timeout."""
    u = srv.unix()
    phone, device_id = device(srv)
    sid = new_sid()
    Hooks(srv).post(hook_input(sid, "UserPromptSubmit", prompt="Deploy staging"))
    # another session's PermissionRequest waits on its own connection all along
    other_sid = new_sid()
    other = Background(srv, permission(other_sid, "make release"), headers={"X-CodingBridge-Timeout": "20"})
    (o,) = wait_until(lambda: pending(u, other_sid), "no approval for the other request")
    data = json.dumps(permission(sid)).encode()
    s = socket.create_connection(("127.0.0.1", srv.port()), timeout=5)
    s.sendall(b"POST /hooks/claude HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token_of(srv).encode() +
              b"\r\nContent-Type: application/json\r\nX-CodingBridge-Timeout: 30\r\nContent-Length: %d\r\n\r\n"
              % len(data) + data)
    (a,) = wait_until(lambda: pending(u, sid), "no approval")
    time.sleep(0.3)
    assert pending(u, sid), "the approval went before the client left"
    s.close()
    t0 = time.monotonic()
    wait_until(lambda: pending(u, sid) == [], "the approval stayed pending after its client left", timeout=1.0,
               step=0.01)
    assert time.monotonic() - t0 < 1.0
    resolved = phone.wait_notification("approval.resolved", lambda p: p["requestId"] == a["requestId"])
    assert resolved == {"requestId": a["requestId"], "sessionId": sid, "decision": "cancelled", "by": None,
                        "alwaysAllow": False, "interrupt": False}
    sess = sessions(u)[sid]
    assert sess["pendingApprovalCount"] == 0 and sess["status"] != "awaitingApproval", sess
    r = phone.request("approval.respond", {"requestId": a["requestId"], "decision": "allow"})
    assert r["status"] == "alreadyResolved"
    # only the request whose client left: the other one still waits, and hears its answer
    assert [x["requestId"] for x in pending(u, other_sid)] == [o["requestId"]]
    assert other.running()
    phone.request("approval.respond", {"requestId": o["requestId"], "decision": "deny"})
    status, _, body, _ = other.finish()
    assert status == 200 and json.loads(body)["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    # the daemon serves the next PermissionRequest as usual
    waiting = Background(srv, permission(sid, "terraform plan"), headers={"X-CodingBridge-Timeout": "20"})
    (b,) = wait_until(lambda: pending(u, sid), "no second approval")
    phone.request("approval.respond", {"requestId": b["requestId"], "decision": "allow"})
    status, _, body, _ = waiting.finish()
    assert status == 200 and json.loads(body)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}


# ---- 6. the printed settings work ------------------------------------------------------


def test_print_settings_http_url_and_header_work_against_the_daemon(srv):
    p = subprocess.run([binary(), "hook", "--print-settings", "--http", "--state-dir", srv.state_dir],
                       capture_output=True, timeout=10)
    assert p.returncode == 0, p.stderr
    block = json.loads(p.stdout)
    token = token_of(srv)
    u = srv.unix()
    for event in ("PreToolUse", "PermissionRequest"):
        (h,) = block["hooks"][event][0]["hooks"]
        assert h["type"] == "http"
        assert h["url"] == f"http://127.0.0.1:{srv.port()}/hooks/claude", h
    (h,) = block["hooks"]["PreToolUse"][0]["hooks"]
    headers = {k: v.replace("$CODINGBRIDGE_HOOK_TOKEN", token) for k, v in h["headers"].items()}
    assert "CODINGBRIDGE_HOOK_TOKEN" in h["allowedEnvVars"]
    url = h["url"]
    assert url.startswith("http://")
    hostport, _, path = url[len("http://"):].partition("/")
    host, _, port = hostport.rpartition(":")
    sid = new_sid()
    pre = hook_input(sid, "PreToolUse", tool_name="Bash", tool_use_id="toolu_1",
                     tool_input={"command": "npm test -- checkout"})
    for data in (hook_input(sid, "UserPromptSubmit", prompt="tests"), pre):
        c = http.client.HTTPConnection(host, int(port), timeout=10)
        c.request("POST", "/" + path, body=json.dumps(data), headers={**headers, "Content-Type": "application/json"})
        r = c.getresponse()
        assert (r.status, r.read()) == (200, b"")
        c.close()
    sess = sessions(u)[sid]
    assert sess["status"] == "processing" and sess["operation"] == "Running tests", sess


# ---- 7. request shape and where the route is served -----------------------------------


def test_conflicting_content_length_and_transfer_encoding_is_400_and_closed(srv):
    u = srv.unix()
    sid = new_sid()
    data = json.dumps(hook_input(sid, "UserPromptSubmit", prompt="smuggled")).encode()
    head = (b"POST /hooks/claude HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token_of(srv).encode() +
            b"\r\nContent-Type: application/json\r\n")
    chunked = b"%x\r\n" % len(data) + data + b"\r\n0\r\n\r\n"
    for req in [head + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(data) + chunked,
                head + b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n" % len(chunked) + chunked,
                head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(data), len(data)) + data]:
        r = raw_http(srv.port(), req)
        assert r["status"] == 400, r["raw"][:300]
        assert r["closed"], "the connection stayed open after a smuggling attempt"
    time.sleep(0.2)
    assert sid not in sessions(u)
    # chunked alone is an ordinary request
    r = raw_http(srv.port(), head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked, timeout=1.0)
    assert r["status"] == 200 and dechunk(r) == b"", r["raw"][:300]
    assert sessions(u)[sid]["status"] == "processing"


def test_hooks_route_is_not_served_on_a_non_loopback_listener(net):
    s = net("--listen", "wss://0.0.0.0:0")
    u = s.unix()
    token = token_of(s)
    sid = new_sid()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    c = http.client.HTTPSConnection("127.0.0.1", s.port("wss"), timeout=5, context=ctx)
    c.request("POST", PATH, body=json.dumps(hook_input(sid, "UserPromptSubmit", prompt="from afar")),
              headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 404, (r.status, r.read())
    r.read()
    c.close()
    assert sid not in sessions(u)
    # the loopback ws:// listener of the same daemon serves it
    assert Hooks(s).post(hook_input(sid, "UserPromptSubmit", prompt="from here"))[:3:2] == (200, b"")
    assert sessions(u)[sid]["status"] == "processing"
