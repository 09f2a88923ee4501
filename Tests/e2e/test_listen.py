"""Many devices on one server: `codingbridge serve --listen unix:PATH`.

Each socket client is its own connection (framing, lifecycle, deviceId,
output queue); all see the same state. Covers: approvals raced from two
devices, 1,000 clients at once, a client that disconnects mid-request, a
client that never reads (bounded memory, others still served, dropped after
the stall timeout), socket permissions, stale socket replaced, a second
server refused, daemon mode and SIGTERM cleanup. Results are validated
against rpc-spec/openrpc.json.
"""
import json
import os
import resource
import selectors
import signal
import socket
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import binary, flood_unread, validate_notification, validate_response, validate_result
from rpcclient import SocketClient

BASH_NPM_TEST = {"toolName": "Bash", "input": {"command": "npm test"}}


class Server:
    """`serve ... --listen unix:PATH` with stdin kept open (or closed)."""

    def __init__(self, path, *args, listen=None, stdin=subprocess.PIPE, wait=True):
        self.path = path
        self.errf = tempfile.TemporaryFile()
        listen_args = ["--listen", listen if listen else f"unix:{path}"]
        self.proc = subprocess.Popen([binary(), "serve", *args, *listen_args], stdin=stdin,
                                     stdout=subprocess.DEVNULL if stdin != subprocess.PIPE else subprocess.PIPE,
                                     stderr=self.errf)
        if wait:
            # ready when it accepts (a stale file may already be at the path)
            deadline = time.monotonic() + 15
            while True:
                assert self.proc.poll() is None, f"server exited {self.proc.returncode}: {self.stderr()}"
                assert time.monotonic() < deadline, "server socket never appeared: " + self.stderr()
                if "listening on" in self.stderr():
                    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    try:
                        probe.connect(path)
                        break
                    except OSError:
                        pass
                    finally:
                        probe.close()
                time.sleep(0.02)

    def stderr(self):
        self.errf.seek(0)
        return self.errf.read().decode("utf-8", "replace")

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def wait_stderr(self, text, timeout=15):
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            assert time.monotonic() < deadline, f"{text!r} never logged; stderr:\n{self.stderr()}"
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def servers():
    made = []

    def make(path, *args, **kw):
        s = Server(path, *(args or ("--ephemeral", "--manual-clock")), **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


class Sock(SocketClient):
    """One socket client: NDJSON or LSP framing, replies by id, notifications kept."""
    client_name = "test_listen"
    timeout = 10
    check_notifications = False


def sock_path(d):
    return os.path.join(d, "cb.sock")


# ---- the socket itself ---------------------------------------------------

def test_socket_and_state_dir_permissions(sockdir, servers):
    state = os.path.join(sockdir, "state")
    os.makedirs(state, mode=0o755)
    os.chmod(state, 0o755)
    path = os.path.join(state, "codingbridge.sock")
    srv = servers(path, "--state-dir", state, listen="unix")
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700  # made private
    c = Sock(path)
    r = c.initialize(deviceId="iphone")
    assert r["deviceId"] == "iphone" and r["capabilities"]["framing"] == "ndjson"
    assert c.request("ping") == {}
    assert srv.proc.poll() is None


def test_default_path_created_private(sockdir, servers):
    # --listen unix with no path: <state dir>/codingbridge.sock, the directory created 0700
    state = os.path.join(sockdir, "new", "state")
    path = os.path.join(state, "codingbridge.sock")
    servers(path, "--state-dir", state, listen="unix")
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600


def test_ephemeral_without_path_is_a_clear_error(sockdir):
    r = subprocess.run([binary(), "serve", "--ephemeral", "--listen", "unix"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    assert r.returncode != 0
    assert b"--listen unix:PATH" in r.stderr, r.stderr
    r = subprocess.run([binary(), "serve", "--ephemeral", "--listen", "tcp:1234"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    assert r.returncode != 0 and b"--listen" in r.stderr
    r = subprocess.run([binary(), "serve", "--ephemeral", "--no-stdio"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    assert r.returncode != 0 and b"--no-stdio needs --listen" in r.stderr


def test_stale_socket_is_replaced(sockdir, servers):
    path = sock_path(sockdir)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    dead.close()  # the file stays; nobody listens (a server killed with -9)
    with pytest.raises(ConnectionRefusedError):
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(path)
    srv = servers(path)
    c = Sock(path)
    c.initialize()
    assert c.request("ping") == {}
    # and a server killed with -9 leaves a socket the next one replaces
    srv.proc.kill()
    srv.proc.wait(timeout=10)
    assert os.path.exists(path)
    servers(path)
    c2 = Sock(path)
    c2.initialize()
    assert c2.request("ping") == {}


def test_second_server_is_refused(sockdir, servers):
    path = sock_path(sockdir)
    first = servers(path)
    a = Sock(path)
    a.initialize()
    r = subprocess.run([binary(), "serve", "--ephemeral", "--listen", f"unix:{path}"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    assert r.returncode == 2
    assert f"another server is already listening on {path}".encode() in r.stderr, r.stderr
    # the first one and its socket are untouched
    assert a.request("ping") == {}
    b = Sock(path)
    b.initialize()
    assert first.proc.poll() is None


def test_something_that_is_not_a_socket_is_never_replaced(sockdir):
    path = sock_path(sockdir)
    with open(path, "w") as f:
        f.write("keep me")
    r = subprocess.run([binary(), "serve", "--ephemeral", "--listen", f"unix:{path}"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    assert r.returncode == 2 and b"is not a socket" in r.stderr, r.stderr
    assert open(path).read() == "keep me"
    long_path = "/tmp/" + "x" * 120 + ".sock"
    r = subprocess.run([binary(), "serve", "--ephemeral", "--listen", f"unix:{long_path}"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    assert r.returncode == 2 and b"unix sockets allow at most" in r.stderr, r.stderr


def test_sigterm_flushes_and_removes_the_socket(sockdir, servers):
    path = sock_path(sockdir)
    srv = servers(path)
    c = Sock(path)
    c.initialize()
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=15) == 0
    assert not os.path.exists(path)
    c.drain(0.5)
    assert c.eof  # the server closed our connection on the way out


def test_daemon_keeps_serving_without_stdin(sockdir, servers):
    path = sock_path(sockdir)
    # stdin at EOF from the start: the socket keeps the server running
    srv = servers(path, "--ephemeral", stdin=subprocess.DEVNULL)
    time.sleep(0.3)
    assert srv.proc.poll() is None, srv.stderr()
    c = Sock(path)
    c.initialize()
    assert c.request("ping") == {}
    # --no-stdio: stdin is never read at all
    path2 = os.path.join(sockdir, "d.sock")
    d = servers(path2, "--ephemeral", "--no-stdio", stdin=subprocess.DEVNULL)
    c2 = Sock(path2)
    c2.initialize()
    assert c2.request("ping") == {}
    d.proc.send_signal(signal.SIGINT)
    assert d.proc.wait(timeout=15) == 0 and not os.path.exists(path2)


def test_stdin_eof_with_a_listener_keeps_the_socket(sockdir, servers):
    path = sock_path(sockdir)
    srv = servers(path)
    c = Sock(path)
    c.initialize()
    srv.proc.stdin.close()
    time.sleep(0.3)
    assert srv.proc.poll() is None
    assert c.request("ping") == {}
    assert "still serving on the socket" in srv.stderr()


# ---- one connection per client --------------------------------------------

def test_each_client_has_its_own_lifecycle_and_framing(sockdir, servers):
    path = sock_path(sockdir)
    servers(path)
    a, b = Sock(path), Sock(path, framing="lsp")
    # b has not initialized: -32002 for it, whatever a does
    ra = a.initialize(deviceId="laptop")
    assert ra["deviceId"] == "laptop"
    r = b.call("session.list")
    assert r["error"]["code"] == -32002
    rb = b.initialize()
    assert rb["capabilities"]["framing"] == "lsp"
    assert rb["deviceId"].startswith("device-")  # generated when none is given
    assert b.frames and set(b.frames) == {"lsp"} and set(a.frames) == {"ndjson"}
    assert a.call("initialize", {})["error"]["code"] == -32600
    # b shuts down and exits: only b is gone
    assert b.call("shutdown")["result"] is None
    assert b.call("session.list")["error"]["code"] == -32600
    b.call_async("exit")
    b.drain(0.5)
    assert b.eof
    assert a.request("session.list") == a.request("session.list")
    c = Sock(path)
    c.initialize()
    assert c.request("ping") == {}


def test_empty_device_id_is_invalid(sockdir, servers):
    path = sock_path(sockdir)
    servers(path)
    a = Sock(path)
    r = a.call("initialize", {"deviceId": ""})
    assert r["error"]["code"] == -32602 and r["error"]["data"]["param"] == "deviceId"


def test_every_client_sees_the_same_state(sockdir, servers):
    path = sock_path(sockdir)
    servers(path)
    phone, laptop = Sock(path), Sock(path)
    phone.initialize(deviceId="iphone")
    laptop.initialize(deviceId="laptop")
    watcher = Sock(path)  # not initialized: gets no notifications
    laptop.request("agent.event", {"sessionId": "s1", "type": "task_started", "prompt": "fix the tests"})
    n = phone.wait_notification("session.changed")
    assert n["session"]["id"] == "s1"
    validate_result("session.get", phone.request("session.get", {"sessionId": "s1"}))
    assert phone.request("session.list")["sessions"] == laptop.request("session.list")["sessions"]
    watcher.drain(0.3)
    assert watcher.notifications == []


def test_two_devices_race_to_approve(sockdir, servers):
    path = sock_path(sockdir)
    servers(path)
    phone, ipad, laptop = Sock(path), Sock(path), Sock(path)
    phone.initialize(deviceId="iphone")
    ipad.initialize(deviceId="ipad")
    laptop.initialize(deviceId="laptop")
    laptop.request("agent.event", {"sessionId": "s1", "type": "task_started"})
    laptop.request("app.update", {"phase": "background"})
    laptop.request("agent.event", {"sessionId": "s1", "type": "approval_request", "requestId": "r1", **BASH_NPM_TEST})
    for d in (phone, ipad):
        d.wait_notification("notification.post", lambda p: p.get("deepLink", "").endswith("/approval/r1"))
    # both answer at once: the two requests are on the wire before either reply
    ra = phone.call_async("approval.respond", {"requestId": "r1", "decision": "allow"})
    rb = ipad.call_async("approval.respond", {"requestId": "r1", "decision": "deny"})
    a, b = phone.reply(ra), ipad.reply(rb)
    for r in (a, b):
        assert "result" in r, r
        validate_result("approval.respond", r["result"])
    statuses = sorted([a["result"]["status"], b["result"]["status"]])
    assert statuses == ["accepted", "alreadyResolved"], (a, b)
    winner, loser = ("iphone", "ipad") if a["result"]["status"] == "accepted" else ("ipad", "iphone")
    decision = "allow" if winner == "iphone" else "deny"
    # every device learns who answered, and the approval's notification goes everywhere
    for d in (phone, ipad, laptop):
        res = d.wait_notification("approval.resolved", lambda p: p["requestId"] == "r1")
        assert res["decision"] == decision and res["by"] == winner
        d.wait_notification("notification.clear", lambda p: "approval:r1" in p["ids"])
    assert phone.request("approval.list")["approvals"] == []
    # a third answer, later, from the loser: still alreadyResolved, nothing changes
    again = (ipad if loser == "ipad" else phone).request("approval.respond", {"requestId": "r1", "decision": "allow"})
    assert again["status"] == "alreadyResolved" and again["resolution"] == decision
    laptop.drain(0.3)
    assert not [n for n in laptop.notifications if n["method"] == "approval.resolved"]


def test_activity_from_another_device_ends_this_devices_live_activity(sockdir, servers):
    """EDGE-CASES "Session Handoff": the phone follows s1 on its Live Activity;
    a message typed on the laptop moves the session there, so the phone's
    activity ends with "Session continued on another device"."""
    path = sock_path(sockdir)
    servers(path)
    phone, laptop = Sock(path), Sock(path)
    phone.initialize(deviceId="iphone")
    laptop.initialize(deviceId="laptop")
    phone.request("agent.event", {"sessionId": "s1", "type": "task_started", "prompt": "fix the tests"})
    assert phone.request("message.send", {"sessionId": "s1", "text": "and the docs"})["status"] == "queued"
    phone.request("app.update", {"phase": "background"})
    start = validate_notification("activity.start", phone.wait_notification("activity.start", lambda p: p["sessionId"] == "s1"))
    assert start["device"] == "iphone"  # the device whose app went to background shows it
    assert phone.request("session.get", {"sessionId": "s1"})["session"]["activeDevice"] == "iphone"

    laptop.request("message.send", {"sessionId": "s1", "text": "actually, skip the docs"})
    for d in (phone, laptop):
        end = validate_notification("activity.end", d.wait_notification("activity.end", lambda p: p["sessionId"] == "s1"))
        assert end["message"] == "Session continued on another device"
        assert end["device"] == "iphone"  # every client sees it; it was the phone's
    post = phone.wait_notification("notification.post", lambda p: p["category"] == "sessionHandoff")
    assert post["title"] == "Session Handed Off" and post["interruptionLevel"] == "passive"
    assert post["userInfo"]["handedOffTo"] == "laptop" and post["userInfo"]["handedOffFrom"] == "iphone"
    s = laptop.request("session.get", {"sessionId": "s1"})["session"]
    assert s["activeDevice"] == "laptop" and s["status"] == "processing"  # the agent keeps working
    assert laptop.request("activity.get")["activity"] is None
    # The laptop again: nothing more to hand off.
    laptop.request("message.send", {"sessionId": "s1", "text": "thanks"})
    phone.drain(0.3)
    assert not [n for n in phone.notifications if n["method"] in ("activity.end", "activity.start")]
    # A new approval puts s1 back on the phone's Live Activity; approving on its
    # lock screen is the phone itself, not a hand-off.
    laptop.request("agent.event", {"sessionId": "s1", "type": "approval_request", "requestId": "r1", **BASH_NPM_TEST})
    phone.wait_notification("activity.start", lambda p: p["sessionId"] == "s1")
    r = phone.request("approval.respond", {"requestId": "r1", "decision": "allow", "source": "notification"})
    assert r["status"] == "accepted"
    phone.drain(0.3)
    assert not [n for n in phone.notifications if n["method"] == "activity.end"]
    shown = phone.request("activity.get")["activity"]
    assert shown["sessionId"] == "s1" and shown["device"] == "iphone"
    # An empty device id is refused, not taken as a device.
    bad = phone.call("message.send", {"sessionId": "s1", "text": "x", "deviceId": ""})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"]["param"] == "deviceId"


def test_a_thousand_clients_at_once(sockdir, servers):
    n = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 200), hard))
    path = sock_path(sockdir)
    srv = servers(path)
    sel = selectors.DefaultSelector()
    socks = []
    for i in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        socks.append(s)
    # every client: initialize + ping + session.list, pipelined, all before reading anything
    for i, s in enumerate(socks):
        msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"clientInfo": {"name": "many", "version": "1"}, "deviceId": f"dev-{i}"}},
                {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                {"jsonrpc": "2.0", "id": 3, "method": "session.list"}]
        s.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
    bufs = [b""] * n
    got = [dict() for _ in range(n)]
    done = 0
    deadline = time.monotonic() + 60
    while done < n:
        assert time.monotonic() < deadline, f"only {done} of {n} clients fully answered"
        for key, _ in sel.select(timeout=1):
            i = key.data
            chunk = key.fileobj.recv(65536)
            assert chunk, f"client {i} disconnected"
            bufs[i] += chunk
            while b"\n" in bufs[i]:
                line, bufs[i] = bufs[i].split(b"\n", 1)
                m = json.loads(line)
                if "id" in m:
                    validate_response(m)
                    got[i][m["id"]] = m
            if len(got[i]) == 3:
                done += 1
                sel.unregister(key.fileobj)
    for i in range(n):
        init = got[i][1]["result"]
        validate_result("initialize", init)
        assert init["deviceId"] == f"dev-{i}"
        assert got[i][2]["result"] == {}
        validate_result("session.list", got[i][3]["result"])
    # a broadcast reaches all 1,000
    ctl = Sock(path)
    ctl.initialize(deviceId="ctl")
    ctl.request("agent.event", {"sessionId": "many", "type": "task_started"})
    reached = 0
    for i, s in enumerate(socks):
        s.setblocking(True)
        s.settimeout(10)
        while b"session.changed" not in bufs[i]:
            bufs[i] += s.recv(65536)
        reached += 1
    assert reached == n
    for s in socks:
        s.close()
    assert ctl.request("ping") == {}
    assert srv.proc.poll() is None


# ---- clients that go away or never read ------------------------------------

def test_client_disconnects_mid_request(sockdir, servers):
    path = sock_path(sockdir)
    srv = servers(path)
    phone = Sock(path)
    phone.initialize(deviceId="iphone")
    # a hook waits for a decision, then vanishes before it comes
    hook = Sock(path)
    hook.initialize(deviceId="hook")
    hook.call_async("agent.hook", {"session_id": "s9", "cwd": "/tmp/p", "hook_event_name": "PermissionRequest",
                                   "tool_name": "Bash", "tool_input": {"command": "make deploy"}})
    deadline = time.monotonic() + 10
    while not phone.request("approval.list")["approvals"]:
        assert time.monotonic() < deadline, "the hook's approval never arrived"
        time.sleep(0.02)
    rid = phone.request("approval.list")["approvals"][0]["requestId"]
    hook.s.shutdown(socket.SHUT_RDWR)
    hook.close()
    # half a message, then gone
    half = Sock(path)
    half.initialize()
    half.s.sendall(b'{"jsonrpc":"2.0","id":5,"method":"sess')
    half.close()
    # the hook's connection closed before the decision: its approval is
    # cancelled and the reply to the gone hook goes nowhere
    deadline = time.monotonic() + 10
    while phone.request("approval.list")["approvals"]:
        assert time.monotonic() < deadline, "the gone hook's approval was not cancelled"
        time.sleep(0.02)
    r = phone.request("approval.respond", {"requestId": rid, "decision": "allow"})
    assert r["status"] == "alreadyResolved"
    assert phone.request("ping") == {}
    fresh = Sock(path)
    fresh.initialize()
    assert fresh.request("approval.list")["approvals"] == []
    assert srv.proc.poll() is None


def test_client_that_never_reads(sockdir, servers):
    path = sock_path(sockdir)
    srv = servers(path, "--ephemeral", "--manual-clock", "--slow-client-timeout", "2")
    other = Sock(path)
    other.initialize(deviceId="other")
    slow = Sock(path)
    slow.initialize(deviceId="slow")
    rss_before = srv.rss_kib()
    # the slow client floods requests and never reads a reply
    slow.s.setblocking(False)
    req = b'{"jsonrpc":"2.0","id":1,"method":"session.list"}\n' * 256
    flood_unread(slow.s, req)
    # meanwhile everyone else is served, and broadcasts keep flowing to them
    for i in range(300):
        other.request("agent.event", {"sessionId": f"s{i % 7}", "type": "tool_use", "toolName": "Bash",
                                       "input": {"command": "x" * 500}})
        assert other.request("ping") == {}
    other.wait_notification("session.changed")
    grown = srv.rss_kib() - rss_before
    assert grown < 48 * 1024, f"server RSS grew {grown} KiB for a client that never reads"
    # after the stall timeout it is dropped; the others carry on
    srv.wait_stderr("disconnected")
    assert other.request("ping") == {}
    slow.s.setblocking(True)
    slow.drain(2)
    deadline = time.monotonic() + 10
    while not slow.eof:
        assert time.monotonic() < deadline, "the slow client was never disconnected"
        slow.drain(0.5)
    assert srv.proc.poll() is None
