"""`codingbridge hook` run exactly as Claude Code runs a command hook: the hook
input JSON on stdin (then EOF), stdout read as the hook's output, the exit
code and the wall time checked. With and without a server; approve, deny and
timeout for PermissionRequest; other events update the session and return at
once. Whatever goes wrong, the hook must print nothing and exit 0 quickly, so
Claude Code falls back to its own prompt.

The server is `codingbridge serve --listen unix:PATH --no-stdio`; the test
drives it as another socket client (the phone), like a real deployment.
"""
import json
import os
import queue
import socket
import subprocess
import threading
import time

import jsonschema
import pytest

from conftest import _schema_with_components, binary, validate_notification, validate_result

SID = "3c9b7e21-5a0f-4d6e-8b1c-7f2a9e4d6b08"
CWD = "/home/dev/payments"


def hook_input(event, **k):
    d = {"session_id": SID, "transcript_path": f"/home/dev/.claude/projects/-home-dev-payments/{SID}.jsonl",
         "cwd": CWD, "permission_mode": "default", "hook_event_name": event}
    d.update(k)
    return d


def permission(command="terraform apply -auto-approve"):
    return hook_input("PermissionRequest", tool_name="Bash",
                      tool_input={"command": command, "description": "Apply the staging plan"})


def run_hook(data, socket_path, *args, env=None, timeout=30):
    """Runs the hook like Claude Code: stdin JSON, returns (code, stdout, stderr, seconds)."""
    e = {**os.environ, "CODINGBRIDGE_SOCKET": socket_path}
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([binary(), "hook", *args], input=data if isinstance(data, bytes) else json.dumps(data).encode(),
                       capture_output=True, env=e, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0


class HookProcess:
    """A hook started in the background (it waits for a decision)."""

    def __init__(self, data, socket_path, *args):
        self.t0 = time.monotonic()
        self.p = subprocess.Popen([binary(), "hook", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env={**os.environ, "CODINGBRIDGE_SOCKET": socket_path})
        self.p.stdin.write(json.dumps(data).encode())
        self.p.stdin.close()

    def finish(self, timeout=30):
        # stdin is already closed; the output is a few hundred bytes at most,
        # so waiting before reading cannot fill a pipe.
        self.p.wait(timeout=timeout)
        secs = time.monotonic() - self.t0
        return self.p.returncode, self.p.stdout.read().decode(), self.p.stderr.read().decode(), secs

    def running(self):
        return self.p.poll() is None


class SocketServer:
    """The server behind a unix socket, plus a control connection for the test."""

    def __init__(self, path, state=None, initialize=True, extra=()):
        self.path = path
        self._ids = 0
        self._replies = queue.Queue()
        self.notes = []
        where = ["--state-dir", state] if state else ["--ephemeral"]
        self.proc = subprocess.Popen([binary(), "serve", *where, "--manual-clock", "--no-stdio",
                                      "--listen", f"unix:{path}", *extra],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            assert self.proc.poll() is None, self.proc.stderr.read().decode()
            assert time.monotonic() < deadline, "server socket never appeared"
            try:
                self.ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.ctl.connect(path)
                break
            except OSError:
                self.ctl.close()
                time.sleep(0.02)
        threading.Thread(target=self._read, daemon=True).start()
        if initialize:
            self.initialize()

    def initialize(self):
        self.init = self.request("initialize", {"clientInfo": {"name": "test_hook", "version": "1"}, "capabilities": {},
                                                "deviceId": "iphone"})

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = self.ctl.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self._deliver(json.loads(line))

    def _deliver(self, m):
        if "id" in m:
            self._replies.put(m)
        else:
            self.notes.append(m)

    def request(self, method, params=None, ok_errors=False, timeout=10):
        self._ids += 1
        rid = f"ctl-{self._ids}"
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.ctl.sendall((json.dumps(msg) + "\n").encode())
        while True:
            r = self._replies.get(timeout=timeout)
            if r["id"] == rid:
                break
        if "error" in r:
            if ok_errors:
                return None
            raise AssertionError(f"{method} failed: {r['error']}")
        if method != "initialize":
            validate_result(method, r["result"])
        return r["result"]

    def call(self, method, params=None, timeout=10):
        """The whole reply (result or error), nothing checked."""
        self._ids += 1
        rid = f"ctl-{self._ids}"
        self.ctl.sendall((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}) + "\n").encode())
        while True:
            r = self._replies.get(timeout=timeout)
            if r["id"] == rid:
                return r

    def pending(self):
        return self.request("approval.list", {"sessionId": SID})["approvals"]

    def wait_pending(self, n=1, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            a = self.pending()
            if len(a) >= n:
                return a
            assert time.monotonic() < deadline, "the hook's approval never arrived"
            time.sleep(0.02)

    def close(self):
        self.ctl.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def wait_until(cond, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def srv(sockdir):
    s = SocketServer(os.path.join(sockdir, "cb.sock"))
    yield s
    s.close()


# ---------------------------------------------------------------- no server

@pytest.mark.parametrize("event", [permission(), hook_input("Stop"), hook_input("UserPromptSubmit", prompt="hi")],
                         ids=["PermissionRequest", "Stop", "UserPromptSubmit"])
def test_no_server_prints_nothing_and_exits_at_once(sockdir, event):
    code, out, err, secs = run_hook(event, os.path.join(sockdir, "absent.sock"))
    assert (code, out) == (0, "")
    assert secs < 2.0, secs


def test_stale_socket_file_without_server(sockdir):
    path = os.path.join(sockdir, "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()  # the file stays, nobody listens: ECONNREFUSED
    code, out, _, secs = run_hook(permission(), path, "--verbose")
    assert (code, out) == (0, "") and secs < 2.0


def test_server_that_never_answers_is_bounded_by_timeout(sockdir):
    path = os.path.join(sockdir, "mute.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(1)
    held = []
    threading.Thread(target=lambda: held.append(s.accept()), daemon=True).start()
    try:
        code, out, _, secs = run_hook(permission(), path, "--timeout", "1.5")
        assert (code, out) == (0, "")
        assert 1.4 <= secs < 4.0, secs
        # Other events wait at most --event-timeout.
        code, out, _, secs = run_hook(hook_input("Stop"), path, "--event-timeout", "0.5")
        assert (code, out) == (0, "") and secs < 3.0, secs
    finally:
        s.close()


def test_garbage_stdin_prints_nothing(sockdir):
    for data in [b"", b"not json", b"[1,2,3]", b'{"hook_event_name":'] + [b"\xff\xfe"]:
        code, out, _, secs = run_hook(data, os.path.join(sockdir, "x.sock"))
        assert (code, out) == (0, "") and secs < 2.0, data


def test_stdin_never_closed_is_bounded(sockdir):
    # A hook started from a terminal by hand: stdin open, nothing written.
    t0 = time.monotonic()
    p = subprocess.Popen([binary(), "hook", "--timeout", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, "CODINGBRIDGE_SOCKET": os.path.join(sockdir, "x.sock")})
    try:
        out, _ = p.communicate(timeout=10)
    finally:
        p.stdin.close()
    assert p.returncode == 0 and out == b""
    assert time.monotonic() - t0 < 5


def test_socket_path_too_long(sockdir):
    code, out, _, secs = run_hook(permission(), "/tmp/" + "x" * 200 + ".sock")
    assert (code, out) == (0, "") and secs < 2.0


# ---------------------------------------------------------------- with a server

def test_events_update_the_session_and_return_quickly(srv):
    steps = [
        (hook_input("SessionStart", source="startup"), None),
        (hook_input("UserPromptSubmit", prompt="Retry failed webhooks"), "processing"),
        (hook_input("PreToolUse", tool_name="Bash", tool_use_id="toolu_1", tool_input={"command": "go test ./..."}),
         "processing"),
        (hook_input("PreToolUse", tool_name="TodoWrite", tool_use_id="toolu_2", tool_input={"todos": [
            {"content": "Add retry queue", "status": "completed", "activeForm": "Adding retry queue"},
            {"content": "Backoff", "status": "in_progress", "activeForm": "Adding backoff"}]}), "processing"),
        (hook_input("PostToolUse", tool_name="Bash", tool_use_id="toolu_1", tool_input={"command": "go test ./..."},
                    tool_response={"stdout": "ok"}), "processing"),
        # Claude Code idle while the turn never ended: it waits for the person.
        (hook_input("Notification", message="Claude is waiting for your input", notification_type="idle_prompt"),
         "awaitingInput"),
    ]
    for data, status in steps:
        code, out, err, secs = run_hook(data, srv.path)
        assert (code, out) == (0, ""), err
        assert secs < 3.0, (data["hook_event_name"], secs)
        if status:
            assert srv.request("session.get", {"sessionId": SID})["session"]["status"] == status
    s = srv.request("session.get", {"sessionId": SID})["session"]
    assert s["operation"] == "Running tests"
    assert s["progress"]["completed"] == 1 and s["progress"]["total"] == 2
    assert s["projectPath"] == CWD
    code, out, _, _ = run_hook(hook_input("Stop", stop_hook_active=False), srv.path)
    assert (code, out) == (0, "")
    assert srv.request("session.get", {"sessionId": SID})["session"]["status"] == "completed"


def test_ask_user_question_becomes_a_question(srv):
    run_hook(hook_input("UserPromptSubmit", prompt="Set up CI"), srv.path)
    ask = {"questions": [{"question": "Which CI provider?", "header": "CI", "multiSelect": False,
                          "options": [{"label": "GitHub Actions"}, {"label": "GitLab CI"}]}]}
    h = HookProcess(hook_input("PreToolUse", tool_name="AskUserQuestion", tool_use_id="toolu_q", tool_input=ask),
                    srv.path, "--timeout", "20")
    wait_until(lambda: srv.request("session.get", {"sessionId": SID})["session"]["status"] == "awaitingAnswer",
               "the question")
    s = srv.request("session.get", {"sessionId": SID})["session"]
    assert s["pendingQuestions"][0]["questions"][0]["question"] == "Which CI provider?"
    time.sleep(0.3)
    assert h.running(), "the phone can answer: the PreToolUse hook waits for it"
    r = srv.request("question.answer", {"questionId": "toolu_q", "answers": {"CI": ["GitLab CI"]}, "deviceId": "iphone"})
    assert r["status"] == "accepted"
    code, out, err, secs = h.finish()
    assert code == 0 and secs < 10, err
    # Claude Code skips its dialog and runs the tool with these answers.
    assert json.loads(out) == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                                      "updatedInput": {**ask, "answers": {"Which CI provider?": "GitLab CI"}}}}
    assert srv.request("session.get", {"sessionId": SID})["session"]["status"] == "processing"


def test_ask_user_question_with_nobody_to_answer_is_left_to_the_terminal(sockdir):
    s = SocketServer(os.path.join(sockdir, "cb.sock"), initialize=False)
    try:
        ask = {"questions": [{"question": "Which CI provider?", "header": "CI", "multiSelect": False,
                              "options": [{"label": "GitHub Actions"}, {"label": "GitLab CI"}]}]}
        code, out, err, secs = run_hook(hook_input("PreToolUse", tool_name="AskUserQuestion", tool_use_id="toolu_t",
                                                   tool_input=ask), s.path, "--verbose")
        assert (code, out) == (0, "") and secs < 3, err
        assert "nobody can answer" in err
        # Answered in the terminal: PostToolUse carries the answers and clears it.
        run_hook(hook_input("PostToolUse", tool_name="AskUserQuestion", tool_use_id="toolu_t", tool_input=ask,
                            tool_response={"questions": ask["questions"], "answers": {"Which CI provider?": "GitHub Actions"}}),
                 s.path)
        s.initialize()
        sess = s.request("session.get", {"sessionId": SID})["session"]
        assert sess["pendingQuestions"] == [] and sess["history"][-1]["kind"] == "answered"
    finally:
        s.close()


@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_permission_request_decided_on_the_phone(srv, decision):
    run_hook(hook_input("UserPromptSubmit", prompt="Deploy staging"), srv.path)
    h = HookProcess(permission(), srv.path, "--timeout", "20")
    a = srv.wait_pending()[0]
    assert a["toolName"] == "Bash" and "terraform apply" in a["summary"]
    # Expires 2 s before the hook gives up (min with the 60 s setting).
    assert a["expiresAt"] - a["createdAt"] == 18_000
    time.sleep(0.3)
    assert h.running(), "the hook waits for the person"
    r = srv.request("approval.respond", {"requestId": a["requestId"], "decision": decision, "deviceId": "iphone"})
    assert r["status"] == "accepted"
    code, out, err, secs = h.finish()
    assert code == 0, err
    printed = json.loads(out)
    expected = {"behavior": "allow"} if decision == "allow" else {
        "behavior": "deny", "message": "Denied by the user from CodingBridge (iphone)."}
    assert printed == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": expected}}
    assert out.endswith("\n") and out.count("\n") == 1
    assert secs < 10


def test_permission_request_times_out_on_the_engine_clock(srv):
    run_hook(hook_input("UserPromptSubmit", prompt="Deploy"), srv.path)
    h = HookProcess(permission(), srv.path, "--timeout", "30")
    a = srv.wait_pending()[0]
    srv.request("debug.advanceClock", {"ms": 27_999})
    time.sleep(0.3)
    assert h.running()
    srv.request("debug.advanceClock", {"ms": 1})  # 28 s = --timeout - 2
    code, out, err, secs = h.finish()
    assert (code, out) == (0, ""), err
    assert secs < 10
    s = srv.request("session.get", {"sessionId": SID})["session"]
    assert s["message"] == "Approval timed out - Claude continued"
    assert srv.request("approval.respond", {"requestId": a["requestId"], "decision": "allow"})["status"] == "expired"


def test_permission_request_hook_gives_up_at_its_own_timeout(srv):
    # The manual clock never moves: the hook's wall-clock bound ends it.
    h = HookProcess(permission(), srv.path, "--timeout", "2")
    a = srv.wait_pending()[0]
    code, out, _, secs = h.finish()
    assert (code, out) == (0, "")
    assert 1.9 <= secs < 5.0, secs
    # Nobody waits for the decision any more: the hook's connection closed,
    # so the phone stops asking; a late answer is refused, the server serves on.
    wait_until(lambda: srv.pending() == [], "the approval was not cancelled when the hook left")
    assert srv.request("approval.respond", {"requestId": a["requestId"], "decision": "allow"})["status"] == "alreadyResolved"
    assert srv.request("session.get", {"sessionId": SID})["session"]["pendingApprovalCount"] == 0


def test_permission_request_cancelled_by_stop(srv):
    run_hook(hook_input("UserPromptSubmit", prompt="Clean up"), srv.path)
    h = HookProcess(permission("rm -rf ./tmp"), srv.path, "--timeout", "20")
    srv.wait_pending()
    # The person answered in the terminal meanwhile; Claude finished the turn.
    code, out, _, _ = run_hook(hook_input("Stop", stop_hook_active=False), srv.path)
    assert (code, out) == (0, "")
    code, out, _, secs = h.finish()
    assert (code, out) == (0, "") and secs < 10
    assert srv.pending() == []


def test_malformed_hook_input_is_reported_on_stderr_only(srv):
    code, out, err, secs = run_hook({"hook_event_name": "PreToolUse", "session_id": SID, "tool_name": "Bash",
                                     "tool_input": "ls -la"}, srv.path)
    assert (code, out) == (0, "")
    assert "tool_input" in err and secs < 3.0


def test_permission_granted_in_the_terminal_ends_the_phone_request(srv):
    """The person answered Claude Code's own prompt: the tool ran (PostToolUse),
    so the phone stops asking and the waiting hook ends without output."""
    run_hook(hook_input("UserPromptSubmit", prompt="Deploy"), srv.path)
    req = permission("kubectl rollout restart deploy/api")
    h = HookProcess(req, srv.path, "--timeout", "20")
    srv.wait_pending()
    post = {k: v for k, v in req.items()}
    post.update(hook_event_name="PostToolUse", tool_use_id="toolu_k", tool_response={"stdout": "restarted"})
    code, out, _, _ = run_hook(post, srv.path)
    assert (code, out) == (0, "")
    code, out, _, secs = h.finish()
    assert (code, out) == (0, "") and secs < 10
    assert srv.pending() == []


def test_socket_path_resolution(sockdir):
    """--socket, else --state-dir/codingbridge.sock, else $CODINGBRIDGE_SOCKET,
    else $XDG_STATE_HOME/codingbridge/codingbridge.sock, else
    ~/.local/state/codingbridge/codingbridge.sock."""
    def listener(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen(4)
        s.settimeout(5)
        return s

    def reached(s, args, env):
        e = {k: v for k, v in os.environ.items() if k not in ("CODINGBRIDGE_SOCKET", "XDG_STATE_HOME")}
        e.update(env)
        p = subprocess.Popen([binary(), "hook", "--event-timeout", "0.3", *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        p.stdin.write(json.dumps(hook_input("Stop")).encode())
        p.stdin.close()
        try:
            c, _ = s.accept()
            line = c.makefile("rb").readline()
            c.close()
        except socket.timeout:
            line = b""
        p.wait(timeout=10)
        assert p.returncode == 0 and p.stdout.read() == b""
        return json.loads(line)["method"] == "initialize" if line else False

    a = listener(os.path.join(sockdir, "a.sock"))
    xdg = listener(os.path.join(sockdir, "xdg", "codingbridge", "codingbridge.sock"))
    home = listener(os.path.join(sockdir, "home", ".local", "state", "codingbridge", "codingbridge.sock"))
    state = listener(os.path.join(sockdir, "st", "codingbridge.sock"))
    try:
        assert reached(a, ["--socket", a.getsockname()], {"CODINGBRIDGE_SOCKET": "/nonexistent.sock"})
        assert reached(state, ["--state-dir", os.path.join(sockdir, "st")], {"CODINGBRIDGE_SOCKET": "/nonexistent.sock"})
        assert reached(a, [], {"CODINGBRIDGE_SOCKET": a.getsockname(), "XDG_STATE_HOME": os.path.join(sockdir, "xdg")})
        assert reached(xdg, [], {"XDG_STATE_HOME": os.path.join(sockdir, "xdg"), "HOME": os.path.join(sockdir, "home")})
        assert reached(home, [], {"HOME": os.path.join(sockdir, "home")})
    finally:
        for s in (a, xdg, home, state):
            s.close()
        for d in ("xdg", "home", "st"):
            subprocess.run(["rm", "-rf", os.path.join(sockdir, d)])


def test_two_waiting_hooks_get_their_own_decisions(srv):
    """Parallel subagents can wait on two permissions at once: each hook gets
    the decision made for its own request."""
    run_hook(hook_input("UserPromptSubmit", prompt="Migrate both services"), srv.path)
    h1 = HookProcess(permission("psql -f migrate_billing.sql"), srv.path, "--timeout", "20")
    srv.wait_pending(1)
    h2 = HookProcess(permission("psql -f migrate_ledger.sql"), srv.path, "--timeout", "20")
    pending = srv.wait_pending(2)
    by_cmd = {a["summary"]: a["requestId"] for a in pending}
    srv.request("approval.respond", {"requestId": by_cmd["psql -f migrate_ledger.sql"], "decision": "deny"})
    code2, out2, _, _ = h2.finish()
    assert h1.running()
    srv.request("approval.respond", {"requestId": by_cmd["psql -f migrate_billing.sql"], "decision": "allow"})
    code1, out1, _, _ = h1.finish()
    assert code1 == code2 == 0
    assert json.loads(out1)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    assert json.loads(out2)["hookSpecificOutput"]["decision"]["behavior"] == "deny"


# ------------------------------------------------ the hook killed while waiting

def notes_since(srv, n, method):
    """Params of `method` notifications the phone got after the n-th, each checked against the spec."""
    return [validate_notification(method, m["params"]) for m in srv.notes[n:] if m["method"] == method]


def test_killed_hook_cancels_its_permission_request(srv):
    """Claude Code kills the hook when the person answers in the terminal
    (e.g. denies): the hook's connection closes, so the approval must leave
    the phone at once, not at Stop or its timeout."""
    run_hook(hook_input("UserPromptSubmit", prompt="Deploy staging"), srv.path)
    h = HookProcess(permission(), srv.path, "--timeout", "50")
    a = srv.wait_pending()[0]
    # The app is in the foreground: a banner (a push when in the background).
    def shown():
        return [p for p in notes_since(srv, 0, "banner.show") + notes_since(srv, 0, "notification.post")
                if a["requestId"] in json.dumps(p)]
    wait_until(shown, "no banner or notification for the approval")
    posted = shown()
    note_id = posted[-1]["id"]
    time.sleep(0.2)
    assert h.running(), "the hook waits for the person"
    n = len(srv.notes)
    h.p.kill()  # SIGKILL: no goodbye on the socket, just a closed connection
    h.p.wait(timeout=10)
    wait_until(lambda: srv.pending() == [], "the approval stayed pending after its hook was killed")
    wait_until(lambda: notes_since(srv, n, "approval.resolved"), "no approval.resolved")
    assert notes_since(srv, n, "approval.resolved") == [
        {"requestId": a["requestId"], "sessionId": SID, "decision": "cancelled", "by": None,
         "alwaysAllow": False, "interrupt": False}]
    cleared = [i for p in notes_since(srv, n, "notification.clear") for i in p["ids"]]
    assert note_id in cleared, (note_id, srv.notes[n:])
    assert notes_since(srv, n, "badge.update")[-1] == {"count": 0}
    s = srv.request("session.get", {"sessionId": SID})["session"]
    assert s["pendingApprovalCount"] == 0 and s["status"] != "awaitingApproval", s
    # The answer from the phone comes too late and goes nowhere.
    r = srv.request("approval.respond", {"requestId": a["requestId"], "decision": "allow", "deviceId": "iphone"})
    assert r["status"] == "alreadyResolved"
    assert srv.request("ping") == {} and srv.proc.poll() is None


def test_a_hook_request_restored_by_a_restart_is_cancelled(sockdir):
    """kill -9 while a hook waits: the hook loses its connection (Claude Code
    asks in the terminal). The restarted server restores the approval but no
    hook can hear an answer any more: it is cancelled, not left on the phone."""
    path, state = os.path.join(sockdir, "cb.sock"), os.path.join(sockdir, "state")
    a_srv = SocketServer(path, state=state)
    try:
        run_hook(hook_input("UserPromptSubmit", prompt="Deploy staging"), path)
        h = HookProcess(permission(), path, "--timeout", "50")
        a = a_srv.wait_pending()[0]
        a_srv.proc.kill()
        a_srv.proc.wait(timeout=10)
        code, out, err, _ = h.finish()
        assert code == 0 and out == "", (code, out, err)  # no decision: Claude Code asks in the terminal
    finally:
        a_srv.close()
    b_srv = SocketServer(path, state=state, initialize=False)
    try:
        # A hook comes first: it only calls (capabilities.notifications false),
        # so what the restart fired is still held for the app.
        code, _, _, _ = run_hook(hook_input("PostToolUse", tool_name="Read", tool_input={"file_path": "a.py"},
                                            tool_response={}), path)
        assert code == 0
        b_srv.initialize()
        rec = b_srv.init["recovered"]
        assert rec["restored"] is True and rec["pendingApprovals"] == 0
        assert b_srv.pending() == []
        wait_until(lambda: notes_since(b_srv, 0, "approval.resolved"), "no approval.resolved after the restart")
        assert notes_since(b_srv, 0, "approval.resolved") == [
            {"requestId": a["requestId"], "sessionId": SID, "decision": "cancelled", "by": None,
             "alwaysAllow": False, "interrupt": False}]
        r = b_srv.request("approval.respond", {"requestId": a["requestId"], "decision": "allow"})
        assert r["status"] == "alreadyResolved"
        # A new PermissionRequest on the restarted server is waited for as usual.
        h2 = HookProcess(permission("terraform plan"), path, "--timeout", "50")
        (p,) = b_srv.wait_pending()
        assert p["requestId"] != a["requestId"]
        b_srv.request("approval.respond", {"requestId": p["requestId"], "decision": "allow"})
        code, out, _, _ = h2.finish()
        assert code == 0 and json.loads(out)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    finally:
        b_srv.close()


def test_closed_connections_without_a_waiting_permission_change_nothing(srv):
    """Only the connection a PermissionRequest waits on cancels it: hooks for
    other events (finished or killed) and other clients going away do not."""
    run_hook(hook_input("UserPromptSubmit", prompt="Migrate"), srv.path)
    h = HookProcess(permission("psql -f migrate.sql"), srv.path, "--timeout", "50")
    before = srv.wait_pending()
    n = len(srv.notes)
    # a hook for another event that ran to its end (its connection closed)
    pre = hook_input("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_use_id="toolu_ls")
    code, out, _, _ = run_hook(pre, srv.path)
    assert (code, out) == (0, "")
    # a hook for another event killed with SIGKILL, whenever that lands
    k = HookProcess(hook_input("Notification", message="Claude needs your permission"), srv.path, "--timeout", "50")
    k.p.kill()
    k.p.wait(timeout=10)
    # another client that goes away abruptly, and one after a pending request of its own
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(srv.path)
    c.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"x"},"deviceId":"ipad"}}\n'
              b'{"jsonrpc":"2.0","id":2,"method":"approval.list","params":{}}\n')
    c.recv(65536)
    c.shutdown(socket.SHUT_RDWR)
    c.close()
    # a hook killed after its PermissionRequest was already answered
    h2 = HookProcess(permission("psql -f check.sql"), srv.path, "--timeout", "50")
    rid2 = next(a["requestId"] for a in srv.wait_pending(2) if a["summary"] == "psql -f check.sql")
    assert srv.request("approval.respond", {"requestId": rid2, "decision": "deny"})["status"] == "accepted"
    code2, out2, _, _ = h2.finish()
    assert code2 == 0 and json.loads(out2)["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    time.sleep(0.3)
    assert [a["requestId"] for a in srv.pending()] == [a["requestId"] for a in before]
    assert h.running()
    assert [p["requestId"] for p in notes_since(srv, n, "approval.resolved")] == [rid2]
    assert srv.request("approval.respond", {"requestId": before[0]["requestId"], "decision": "allow"})["status"] == "accepted"
    code, out, err, _ = h.finish()
    assert code == 0, err
    assert json.loads(out)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}


# ------------------------------------- richer decisions: always allow, deny with a message, deny and stop

SUGGESTIONS = [
    {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "terraform apply:*"}], "behavior": "allow",
     "destination": "localSettings"},
    {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
]


def suggesting(command="terraform apply -auto-approve"):
    d = permission(command)
    d["permission_suggestions"] = SUGGESTIONS
    return d


def printed(out):
    """What the hook printed: one line of Claude Code's decision JSON, checked against the contract."""
    assert out.endswith("\n") and out.count("\n") == 1, out
    d = json.loads(out)
    jsonschema.validate(d, _schema_with_components({"$ref": "#/components/schemas/ClaudeHookPermissionOutput"}))
    assert d["hookSpecificOutput"]["hookEventName"] == "PermissionRequest"
    return d["hookSpecificOutput"]["decision"]


def audited(srv, rid):
    return [e for e in srv.request("audit.list")["entries"]
            if e["kind"] == "approval.decision" and e["detail"].get("requestId") == rid]


def test_always_allow_prints_the_suggestions_as_updated_permissions(srv):
    run_hook(hook_input("UserPromptSubmit", prompt="Deploy staging"), srv.path)
    h = HookProcess(suggesting(), srv.path, "--timeout", "20")
    (a,) = srv.wait_pending()
    assert a["permissionSuggestions"] == SUGGESTIONS  # "Always allow" is offered
    n = len(srv.notes)
    r = srv.request("approval.respond", {"requestId": a["requestId"], "decision": "allow", "alwaysAllow": True,
                                         "deviceId": "iphone"})
    assert r["status"] == "accepted" and r["resolution"] == "allow"
    code, out, err, secs = h.finish()
    assert code == 0 and secs < 10, err
    assert printed(out) == {"behavior": "allow", "updatedPermissions": SUGGESTIONS}
    wait_until(lambda: notes_since(srv, n, "approval.resolved"), "no approval.resolved")
    assert notes_since(srv, n, "approval.resolved") == [
        {"requestId": a["requestId"], "sessionId": SID, "decision": "allow", "by": "iphone",
         "alwaysAllow": True, "interrupt": False}]
    (e,) = audited(srv, a["requestId"])
    assert e["detail"]["alwaysAllow"] is True and e["detail"]["interrupt"] is False
    assert e["detail"]["withMessage"] is False and e["deviceId"] == "iphone"


def test_plain_allow_of_a_request_with_suggestions_applies_none(srv):
    h = HookProcess(suggesting(), srv.path, "--timeout", "20")
    (a,) = srv.wait_pending()
    srv.request("approval.respond", {"requestId": a["requestId"], "decision": "allow", "alwaysAllow": False})
    code, out, _, _ = h.finish()
    assert code == 0 and printed(out) == {"behavior": "allow"}


def test_deny_with_a_message_and_stop(srv):
    run_hook(hook_input("UserPromptSubmit", prompt="Clean up"), srv.path)
    h = HookProcess(permission("rm -rf ./build"), srv.path, "--timeout", "20")
    (a,) = srv.wait_pending()
    assert a["permissionSuggestions"] == []  # nothing to always allow
    n = len(srv.notes)
    message = "Keep ./build: the release script reads it. Ünïcode \"quotes\" and a\nsecond line stay as typed."
    r = srv.request("approval.respond", {"requestId": a["requestId"], "decision": "deny", "message": message,
                                         "interrupt": True, "deviceId": "iphone"})
    assert r["status"] == "accepted" and r["resolution"] == "deny"
    code, out, err, _ = h.finish()
    assert code == 0, err
    assert printed(out) == {"behavior": "deny", "message": message, "interrupt": True}
    wait_until(lambda: notes_since(srv, n, "approval.resolved"), "no approval.resolved")
    (res,) = notes_since(srv, n, "approval.resolved")
    assert res["decision"] == "deny" and res["interrupt"] is True and res["alwaysAllow"] is False
    assert "message" not in res and "release script" not in json.dumps(srv.notes[n:])  # the message goes to Claude only
    (e,) = audited(srv, a["requestId"])
    assert e["detail"]["withMessage"] is True and e["detail"]["interrupt"] is True
    assert "release script" not in json.dumps(e)


def test_deny_with_only_a_message_or_only_stop(srv):
    h1 = HookProcess(permission("psql -f a.sql"), srv.path, "--timeout", "20")
    srv.wait_pending(1)
    h2 = HookProcess(permission("psql -f b.sql"), srv.path, "--timeout", "20")
    by = {a["summary"]: a["requestId"] for a in srv.wait_pending(2)}
    srv.request("approval.respond", {"requestId": by["psql -f a.sql"], "decision": "deny", "message": "Use b.sql"})
    srv.request("approval.respond", {"requestId": by["psql -f b.sql"], "decision": "deny", "interrupt": True,
                                     "deviceId": "ipad"})
    assert printed(h1.finish()[1]) == {"behavior": "deny", "message": "Use b.sql"}
    assert printed(h2.finish()[1]) == {"behavior": "deny", "message": "Denied by the user from CodingBridge (ipad).",
                                       "interrupt": True}


def test_decisions_that_do_not_fit_are_invalid_params(srv):
    h = HookProcess(suggesting(), srv.path, "--timeout", "20")
    (a,) = srv.wait_pending()
    h2 = HookProcess(permission("make migrate"), srv.path, "--timeout", "20")
    bare = next(x for x in srv.wait_pending(2) if x["summary"] == "make migrate")
    rid, bare_rid = a["requestId"], bare["requestId"]
    cases = [
        ({"requestId": rid, "decision": "deny", "alwaysAllow": True}, "alwaysAllow"),
        ({"requestId": rid, "decision": "allow", "message": "why"}, "message"),
        ({"requestId": rid, "decision": "allow", "interrupt": True}, "interrupt"),
        ({"requestId": bare_rid, "decision": "allow", "alwaysAllow": True}, "alwaysAllow"),  # no suggestions
        ({"requestId": rid, "decision": "deny", "message": ""}, "message"),
        ({"requestId": rid, "decision": "deny", "message": "x" * 1001}, "message"),
        ({"requestId": rid, "decision": "deny", "message": 42}, "message"),
        ({"requestId": rid, "decision": "allow", "alwaysAllow": "yes"}, "alwaysAllow"),
        ({"requestId": rid, "decision": "deny", "interrupt": 1}, "interrupt"),
    ]
    for params, param in cases:
        r = srv.call("approval.respond", params)
        assert "error" in r, (params, r)
        e = r["error"]
        assert e["code"] == -32602 and e["data"]["param"] == param, (params, e)
        assert "expected" in e["data"] and "got" in e["data"], e
    no_suggestions = srv.call("approval.respond", cases[3][0])["error"]
    assert "permission suggestions" in no_suggestions["message"], no_suggestions
    time.sleep(0.2)
    assert h.running() and h2.running(), "nothing was decided"
    assert len(srv.pending()) == 2
    # 1000 characters is the limit, not over it.
    srv.request("approval.respond", {"requestId": bare_rid, "decision": "deny", "message": "m" * 1000})
    assert printed(h2.finish()[1])["message"] == "m" * 1000
    srv.request("approval.respond", {"requestId": rid, "decision": "allow", "alwaysAllow": True})
    assert printed(h.finish()[1])["updatedPermissions"] == SUGGESTIONS


def test_suggestions_the_approval_cannot_keep_are_left_out(srv):
    """Claude Code's own input is taken leniently: items that are not objects or
    are over 4 KB, and any past the 16th, are dropped (said in `ignored`); the
    approval and "Always allow" with the rest still work."""
    d = permission("terraform apply")
    rule = SUGGESTIONS[0]
    d["permission_suggestions"] = ["not an object", {"type": "addRules", "rules": [{"ruleContent": "x" * 5000}]}] \
        + [dict(rule, destination=f"d{i}") for i in range(17)]
    h = HookProcess(d, srv.path, "--timeout", "20")
    (a,) = srv.wait_pending()
    kept = [dict(rule, destination=f"d{i}") for i in range(16)]
    assert a["permissionSuggestions"] == kept
    srv.request("approval.respond", {"requestId": a["requestId"], "decision": "allow", "alwaysAllow": True})
    assert printed(h.finish()[1]) == {"behavior": "allow", "updatedPermissions": kept}
    # Not an array is the sender's bug: no approval, the hook prints nothing.
    bad = permission("ls")
    bad["permission_suggestions"] = {"type": "setMode"}
    code, out, err, _ = run_hook(bad, srv.path)
    assert (code, out) == (0, "") and "permission_suggestions" in err
    assert srv.pending() == []


def test_agent_event_takes_permission_suggestions_within_the_limits(srv):
    base = {"sessionId": "ev-1", "type": "approval_request", "toolName": "Bash", "input": {"command": "npm test"}}
    srv.request("agent.event", dict(base, requestId="e1", permissionSuggestions=SUGGESTIONS))
    (a,) = srv.request("approval.list", {"sessionId": "ev-1"})["approvals"]
    assert a["permissionSuggestions"] == SUGGESTIONS
    for extra, param in [({"permissionSuggestions": [{}] * 17}, "permissionSuggestions"),
                         ({"permissionSuggestions": ["x"]}, "permissionSuggestions[0]"),
                         ({"permissionSuggestions": [{}, {"big": "y" * 5000}]}, "permissionSuggestions[1]"),
                         ({"permissionSuggestions": {"type": "setMode"}}, "permissionSuggestions")]:
        r = srv.call("agent.event", dict(base, requestId="e2", **extra))
        assert r.get("error", {}).get("code") == -32602 and r["error"]["data"]["param"] == param, r
    assert srv.request("approval.respond", {"requestId": "e1", "decision": "allow", "alwaysAllow": True})["status"] == "accepted"


def test_an_always_allow_queued_offline_reaches_the_waiting_hook_on_reconnect(sockdir):
    """The backend link is down: the decision is queued (durably, with its
    options) and the hook keeps waiting; on reconnect it gets Always allow."""
    s = SocketServer(os.path.join(sockdir, "cb.sock"), state=os.path.join(sockdir, "state"))
    try:
        h = HookProcess(suggesting(), s.path, "--timeout", "30")
        (a,) = s.wait_pending()
        s.request("connection.update", {"state": "disconnected"})
        r = s.request("approval.respond", {"requestId": a["requestId"], "decision": "allow", "alwaysAllow": True,
                                           "deviceId": "iphone"})
        assert r["status"] == "queued"
        (m,) = s.request("outbox.list")["messages"]
        assert m["kind"] == "approval.respond"
        assert m["payload"] == {"requestId": a["requestId"], "decision": "allow", "deviceId": "iphone", "source": "app",
                                "alwaysAllow": True, "interrupt": False}
        (e,) = audited(s, a["requestId"])
        assert e["detail"]["queued"] is True and e["detail"]["alwaysAllow"] is True
        time.sleep(0.3)
        assert h.running(), "queued: not decided yet"
        s.request("connection.update", {"state": "connected"})
        code, out, err, _ = h.finish()
        assert code == 0, err
        assert printed(out) == {"behavior": "allow", "updatedPermissions": SUGGESTIONS}
    finally:
        s.close()


def test_an_offline_deny_with_a_message_reaches_the_waiting_hook_on_reconnect(sockdir):
    s = SocketServer(os.path.join(sockdir, "cb.sock"), state=os.path.join(sockdir, "state"))
    try:
        h = HookProcess(permission(), s.path, "--timeout", "30")
        (a,) = s.wait_pending()
        s.request("connection.update", {"state": "disconnected"})
        assert s.request("approval.respond", {"requestId": a["requestId"], "decision": "deny", "message": "Plan first",
                                              "interrupt": True})["status"] == "queued"
        (m,) = s.request("outbox.list")["messages"]
        assert (m["payload"]["message"], m["payload"]["interrupt"]) == ("Plan first", True)
        s.request("connection.update", {"state": "connected"})
        assert printed(h.finish()[1]) == {"behavior": "deny", "message": "Plan first", "interrupt": True}
    finally:
        s.close()


def test_an_always_allow_queued_offline_survives_kill9(sockdir):
    """kill -9 with an Always allow queued offline: the restarted server still
    has the request's suggestions and the decision's options, applies them on
    reconnect (approval.resolved alwaysAllow) and delivers them
    (outbox.deliver payload). A hook's own request cannot live through a
    restart (its connection goes with the process and the restart cancels it,
    test_a_hook_request_restored_by_a_restart_is_cancelled), so the request
    here comes from agent.event, as from any other agent front end."""
    path, state = os.path.join(sockdir, "cb.sock"), os.path.join(sockdir, "state")
    a_srv = SocketServer(path, state=state)
    try:
        a_srv.request("agent.event", {"sessionId": SID, "type": "task_started"})
        a_srv.request("agent.event", {"sessionId": SID, "type": "approval_request", "requestId": "r-always",
                                      "toolName": "Bash", "input": {"command": "terraform apply"},
                                      "timeoutSeconds": 600, "permissionSuggestions": SUGGESTIONS})
        a_srv.request("connection.update", {"state": "disconnected"})
        r = a_srv.request("approval.respond", {"requestId": "r-always", "decision": "allow", "alwaysAllow": True,
                                               "deviceId": "iphone"})
        assert r["status"] == "queued"  # answered after the commit
        a_srv.proc.kill()
        a_srv.proc.wait(timeout=10)
    finally:
        a_srv.close()
    b_srv = SocketServer(path, state=state)
    try:
        rec = b_srv.init["recovered"]
        assert rec["queuedDecisions"] == 1 and rec["pendingApprovals"] == 1, rec
        (a,) = b_srv.pending()
        assert a["requestId"] == "r-always" and a["permissionSuggestions"] == SUGGESTIONS
        n = len(b_srv.notes)
        b_srv.request("connection.update", {"state": "connected"})
        wait_until(lambda: notes_since(b_srv, n, "approval.resolved"), "no approval.resolved on reconnect")
        assert notes_since(b_srv, n, "approval.resolved") == [
            {"requestId": "r-always", "sessionId": SID, "decision": "allow", "by": "iphone",
             "alwaysAllow": True, "interrupt": False}]
        wait_until(lambda: [m for m in b_srv.notes[n:] if m["method"] == "outbox.deliver"], "no outbox.deliver")
        d = next(m["params"] for m in b_srv.notes[n:] if m["method"] == "outbox.deliver")
        assert d["kind"] == "approval.respond"
        assert d["payload"]["alwaysAllow"] is True and d["payload"]["requestId"] == "r-always"
        assert b_srv.pending() == []
    finally:
        b_srv.close()


# ---------------------------------------------------------------- who can answer

def test_nobody_to_answer_returns_at_once_and_leaves_no_approval(sockdir):
    """No other client and no push registration: the PermissionRequest is
    answered at once with no output (Claude Code's own prompt decides) and
    no approval is left for a phone to find later."""
    s = SocketServer(os.path.join(sockdir, "cb.sock"), initialize=False)
    try:
        code, out, err, secs = run_hook(permission(), s.path, "--timeout", "60", "--verbose")
        assert (code, out) == (0, ""), err
        assert secs < 3, secs
        assert "nobody can answer: no client connected and no push registration" in err, err
        s.initialize()
        assert s.pending() == []
        h = HookProcess(permission("make deploy"), s.path, "--timeout", "20")
        assert s.wait_pending()[0]["summary"].startswith("make deploy")
        time.sleep(0.3)
        assert h.running(), "a connected phone: the hook waits as before"
        s.request("approval.respond", {"requestId": s.pending()[0]["requestId"], "decision": "allow"})
        assert json.loads(h.finish()[1])["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    finally:
        s.close()


def test_a_push_registration_alone_keeps_the_hook_waiting(sockdir):
    path = os.path.join(sockdir, "cb.sock")
    s = SocketServer(path)
    try:
        s.request("push.register", {"platform": "apns", "kind": "alert", "token": "ab" * 32})
        s.ctl.close()  # the phone goes away; its registration stays
        h = HookProcess(permission(), path, "--timeout", "20", "--verbose")
        time.sleep(1.0)
        assert h.running(), "a device with push can answer: the hook waits"
        phone = SocketServer.__new__(SocketServer)
        phone.path, phone._ids, phone._replies, phone.notes, phone.proc = path, 0, queue.Queue(), [], s.proc
        phone.ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        phone.ctl.connect(path)
        threading.Thread(target=phone._read, daemon=True).start()
        phone.initialize()
        a = phone.wait_pending()[0]
        phone.request("approval.respond", {"requestId": a["requestId"], "decision": "deny", "deviceId": "iphone"})
        code, out, err, _ = h.finish()
        assert json.loads(out)["hookSpecificOutput"]["decision"]["behavior"] == "deny", err
        phone.ctl.close()
    finally:
        s.close()


def test_always_wait_for_approval_waits_with_nobody_connected(sockdir):
    path = os.path.join(sockdir, "cb.sock")
    proc = subprocess.Popen([binary(), "serve", "--ephemeral", "--no-stdio", "--listen", f"unix:{path}",
                             "--always-wait-for-approval"], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: os.path.exists(path), "server socket never appeared")
        h = HookProcess(permission(), path, "--timeout", "5")  # the approval expires at 3 s
        time.sleep(1.0)
        assert h.running(), "--always-wait-for-approval: the hook waits"
        code, out, _, secs = h.finish()
        assert (code, out) == (0, "") and secs >= 2.5
    finally:
        proc.terminate()
        proc.wait(timeout=10)
