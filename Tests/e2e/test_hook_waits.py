"""Every way Claude Code waits for the person, and answers that reach it,
through `codingbridge hook` exactly as Claude Code runs it: the "needs you"
state (Notification hook types, a permission refused in the terminal, our
request timing out while the terminal prompt waits), the Task tools' plan,
and a message from the phone delivered at the session's next Stop or by
resuming a session whose process ended. The inputs are the shapes the real
CLI sends (docs/claude-cli.md); test_claude_cli*.py drives the real CLI.
"""
import json
import os
import stat
import time

import pytest

from conftest import binary
from test_hook import SID, CWD, HookProcess, SocketServer, hook_input, notes_since, permission, run_hook, wait_until


@pytest.fixture
def srv(sockdir):
    s = SocketServer(os.path.join(sockdir, "cb.sock"))
    yield s
    s.close()


def session(srv):
    return srv.request("session.get", {"sessionId": SID})["session"]


def hook(srv, event, **k):
    code, out, err, _ = run_hook(hook_input(event, **k), srv.path)
    assert code == 0, err
    return json.loads(out) if out.strip() else None


def away(srv):
    srv.request("app.update", {"phase": "background", "permissions": {"notifications": "authorized"}})


# ------------------------------------------------------------- needs you

def test_a_permission_prompt_notification_means_needs_you_until_claude_moves_on(srv):
    away(srv)
    hook(srv, "UserPromptSubmit", prompt="Deploy staging")
    n = len(srv.notes)
    hook(srv, "Notification", message="Claude needs your permission to use Bash", notification_type="permission_prompt")
    s = session(srv)
    assert (s["status"], s["message"]) == ("awaitingInput", "Waiting for your permission in the terminal"), s
    (note,) = notes_since(srv, n, "notification.post")
    assert (note["category"], note["title"]) == ("needsInput", "Claude needs your attention"), note
    # Details are off by default: the lock screen gets the generic line.
    assert note["body"] == "Claude is waiting for you in the terminal"
    assert note["interruptionLevel"] in ("timeSensitive", "active")
    # The same wait said twice is one notification.
    hook(srv, "Notification", message="Claude needs your permission to use Bash", notification_type="permission_prompt")
    assert len(notes_since(srv, n, "notification.post")) == 1
    m = len(srv.notes)
    hook(srv, "PreToolUse", tool_name="Bash", tool_input={"command": "npm test"}, tool_use_id="toolu_1")
    assert session(srv)["status"] == "processing"
    cleared = [i for p in notes_since(srv, m, "notification.clear") for i in p["ids"]]
    assert note["id"] in cleared


def test_agent_needs_input_and_idle_prompt(srv):
    hook(srv, "UserPromptSubmit", prompt="Refactor")
    hook(srv, "Notification", message="Claude is waiting for your input", notification_type="agent_needs_input")
    assert (session(srv)["status"], session(srv)["message"]) == ("awaitingInput", "Claude needs your input")
    hook(srv, "Stop", stop_hook_active=False, last_assistant_message="Done.")
    assert session(srv)["status"] == "completed"
    # Claude Code's idle reminder after the turn ended: the completion said it.
    r = hook(srv, "Notification", message="Claude is waiting for your input", notification_type="idle_prompt")
    assert r is None and session(srv)["status"] == "completed"
    out = srv.request("agent.hook", hook_input("Notification", message="Signed in", notification_type="auth_success"))
    assert out["status"] == "ignored" and "auth_success" in out["ignored"][0]


def test_a_refusal_in_the_terminal_leaves_the_session_waiting_for_its_prompt(srv):
    """Claude Code cancels the waiting PermissionRequest hook when the person
    answers No in its own prompt; then it waits for the next prompt."""
    hook(srv, "UserPromptSubmit", prompt="Deploy staging")
    h = HookProcess(permission(), srv.path, "--timeout", "50")
    a = srv.wait_pending()[0]
    n = len(srv.notes)
    h.p.kill()
    h.p.wait(timeout=10)
    wait_until(lambda: session(srv)["status"] == "awaitingInput", "the session did not say it waits for its prompt")
    assert session(srv)["message"] == "Waiting for your prompt"
    assert notes_since(srv, n, "notification.post") == []  # the person is at the terminal
    r = srv.request("approval.respond", {"requestId": a["requestId"], "decision": "deny", "deviceId": "iphone"})
    assert (r["status"], r["resolution"]) == ("alreadyResolved", "cancelled")
    hook(srv, "UserPromptSubmit", prompt="Deploy to staging-2 instead")
    assert session(srv)["status"] == "processing"


def test_the_terminal_prompt_still_waits_after_our_request_timed_out(srv):
    """Interactive Claude Code shows its own prompt beside the waiting hook
    (and says so with a permission_prompt Notification): when our request
    times out, that prompt still waits for the person."""
    hook(srv, "UserPromptSubmit", prompt="Deploy")
    h = HookProcess(permission(), srv.path, "--timeout", "30")
    srv.wait_pending()
    hook(srv, "Notification", message="Claude needs your permission to use Bash", notification_type="permission_prompt")
    assert session(srv)["status"] == "awaitingApproval"
    srv.request("debug.advanceClock", {"ms": 28_000})
    code, out, err, _ = h.finish()
    assert (code, out) == (0, ""), err
    s = session(srv)
    assert (s["status"], s["message"]) == ("awaitingInput", "Waiting for your permission in the terminal"), s


def test_agent_event_needs_input_is_checked_against_the_contract(srv):
    srv.request("agent.event", {"sessionId": "s-native", "type": "task_started"})
    r = srv.request("agent.event", {"sessionId": "s-native", "type": "needs_input", "reason": "agent_needs_input",
                                    "message": "Pick a region"})
    assert r["status"] == "awaitingInput"
    bad = srv.call("agent.event", {"sessionId": "s-native", "type": "needs_input", "reason": "coffee"})
    assert bad["error"]["code"] == -32602


def test_a_tool_that_failed_after_a_terminal_yes_ends_the_phone_request(srv):
    hook(srv, "UserPromptSubmit", prompt="Build")
    h = HookProcess(permission("make build"), srv.path, "--timeout", "50")
    srv.wait_pending()
    hook(srv, "PostToolUseFailure", tool_name="Bash", tool_input={"command": "make build", "description": "Apply the staging plan"},
         tool_use_id="toolu_9", error="Exit code 2")
    code, out, _, _ = h.finish()
    assert (code, out) == (0, "")
    assert srv.pending() == []


# ------------------------------------------------------------- Task tools

def task_post(srv, name, tool_input, response):
    return hook(srv, "PostToolUse", tool_name=name, tool_input=tool_input, tool_response=response,
                tool_use_id=f"toolu_{name}_{time.monotonic_ns()}")


def progress(srv):
    p = session(srv)["progress"]
    return p["completed"], p["total"], p["current"]


def test_task_tools_become_progress_and_the_current_task(srv):
    away(srv)  # so the Live Activity runs
    hook(srv, "UserPromptSubmit", prompt="Ship the release")
    out = srv.request("agent.hook", hook_input("PreToolUse", tool_name="TaskCreate", tool_use_id="toolu_pre",
                                               tool_input={"subject": "Run tests", "description": "all of them"}))
    assert out["status"] == "ignored"
    task_post(srv, "TaskCreate", {"subject": "Run tests", "description": "all", "activeForm": "Running tests"},
              {"task": {"id": "1", "subject": "Run tests"}})
    task_post(srv, "TaskCreate", {"subject": "Write changelog", "description": "x"}, {"task": {"id": "2", "subject": "Write changelog"}})
    task_post(srv, "TaskCreate", {"subject": "Tag release", "description": "x"}, "Task #3 created successfully: Tag release")
    assert progress(srv) == (0, 3, None)
    task_post(srv, "TaskUpdate", {"taskId": "1", "status": "in_progress"}, {"success": True})
    assert progress(srv) == (0, 3, "Running tests")
    task_post(srv, "TaskUpdate", {"taskId": "1", "status": "completed"}, {"success": True})
    task_post(srv, "TaskUpdate", {"taskId": "3", "status": "deleted"}, {"success": True})
    task_post(srv, "TaskUpdate", {"taskId": "2", "status": "in_progress"}, {"success": True})
    assert progress(srv) == (1, 2, "Write changelog")
    out = srv.request("agent.hook", hook_input("PostToolUse", tool_name="TaskUpdate", tool_use_id="toolu_x",
                                               tool_input={"taskId": "99", "status": "completed"}, tool_response={}))
    assert out["status"] == "ignored" and "99" in out["ignored"][0]
    act = srv.request("activity.get")["activity"]
    assert act["progress"]["total"] == 2, act


def test_a_runaway_plan_stops_at_the_cap_and_still_updates(srv):
    srv.request("agent.hook", hook_input("UserPromptSubmit", prompt="go"))
    for i in range(1, 301):
        srv.request("agent.hook", hook_input("PostToolUse", tool_name="TaskCreate", tool_use_id=f"c{i}",
                                             tool_input={"subject": f"task {i}"}, tool_response={"task": {"id": str(i)}}))
    assert progress(srv) == (0, 256, None)
    srv.request("agent.hook", hook_input("PostToolUse", tool_name="TaskUpdate", tool_use_id="u1",
                                         tool_input={"taskId": "1", "status": "completed"}, tool_response={}))
    assert progress(srv) == (1, 256, None)


def test_the_plan_survives_a_restart(sockdir):
    state = os.path.join(sockdir, "state")
    s = SocketServer(os.path.join(sockdir, "a.sock"), state=state)
    try:
        hook(s, "UserPromptSubmit", prompt="Ship")
        task_post(s, "TaskCreate", {"subject": "Run tests", "activeForm": "Running tests"}, {"task": {"id": "1"}})
        task_post(s, "TaskCreate", {"subject": "Tag"}, {"task": {"id": "2"}})
    finally:
        s.close()
    s = SocketServer(os.path.join(sockdir, "b.sock"), state=state)
    try:
        task_post(s, "TaskUpdate", {"taskId": "1", "status": "in_progress"}, {})
        assert progress(s) == (0, 2, "Running tests")
    finally:
        s.close()


# ------------------------------------------------------------- messages into the session

def outbox(srv, status="all"):
    return srv.request("outbox.list", {"sessionId": SID, "status": status})["messages"]


def test_a_message_from_the_phone_goes_in_at_the_next_stop(srv):
    hook(srv, "UserPromptSubmit", prompt="Fix the flaky test")
    m = srv.request("message.send", {"sessionId": SID, "text": "Also update the changelog", "deviceId": "iphone"})
    assert outbox(srv)[0]["status"] == "queued"
    out = hook(srv, "Stop", stop_hook_active=False, last_assistant_message="Fixed.")
    assert out["decision"] == "block" and out["reason"].endswith("next prompt:\n\nAlso update the changelog"), out
    assert session(srv)["status"] == "processing"  # not completed: Claude goes on
    (row,) = outbox(srv)
    assert (row["id"], row["status"], row["attempts"]) == (m["id"], "inflight", 1)
    # Claude's next hook input proves it read the message.
    hook(srv, "PreToolUse", tool_name="Edit", tool_input={"file_path": "CHANGELOG.md"}, tool_use_id="toolu_c")
    assert outbox(srv)[0]["status"] == "delivered"
    assert hook(srv, "Stop", stop_hook_active=True, last_assistant_message="Done.") is None
    assert session(srv)["status"] == "completed"


def test_messages_go_in_one_per_stop_in_order(srv):
    hook(srv, "UserPromptSubmit", prompt="Go")
    for t in ["first", "second"]:
        srv.request("message.send", {"sessionId": SID, "text": t})
    assert hook(srv, "Stop", stop_hook_active=False)["reason"].endswith("\n\nfirst")
    assert hook(srv, "Stop", stop_hook_active=True)["reason"].endswith("\n\nsecond")
    assert hook(srv, "Stop", stop_hook_active=True) is None
    assert [m["status"] for m in outbox(srv)] == ["delivered", "delivered"]


def test_a_message_whose_stop_reply_was_lost_goes_again_at_the_next_stop(srv):
    hook(srv, "UserPromptSubmit", prompt="Go")
    srv.request("message.send", {"sessionId": SID, "text": "again please"})
    r = srv.request("agent.hook", hook_input("Stop", stop_hook_active=False))
    assert r["decision"] == "continue" and r["messageId"] >= 1
    # The reply never reached Claude Code (its hook died): it stopped, and
    # the person's next prompt is no proof it read the message.
    hook(srv, "UserPromptSubmit", prompt="next thing")
    assert outbox(srv)[0]["status"] == "inflight"
    assert hook(srv, "Stop", stop_hook_active=False)["reason"].endswith("\n\nagain please")
    assert outbox(srv)[0]["attempts"] == 2
    hook(srv, "Stop", stop_hook_active=True)
    assert outbox(srv)[0]["status"] == "delivered"


def test_a_message_whose_session_ended_unread_goes_in_when_it_is_resumed(sockdir, tmp_path):
    """The Stop's reply was lost and the process ended: the message is not
    stuck inflight, the resume takes it."""
    sock = os.path.join(sockdir, "u.sock")
    args_file = tmp_path / "args"
    cmd = fake_claude(str(tmp_path), f'printf "%s\\n" "$@" > {args_file}\n'
                      f'echo \'{{"session_id":"{SID}","hook_event_name":"SessionStart","source":"resume"}}\''
                      f' | CODINGBRIDGE_SOCKET={sock} {binary()} hook\n')
    s = SocketServer(sock, extra=["--resume-command", cmd])
    try:
        hook(s, "UserPromptSubmit", prompt="Go", cwd=str(tmp_path))
        s.request("message.send", {"sessionId": SID, "text": "one more thing"})
        assert s.request("agent.hook", hook_input("Stop", stop_hook_active=False, cwd=str(tmp_path)))["decision"] == "continue"
        hook(s, "SessionEnd", reason="other", cwd=str(tmp_path))
        wait_until(lambda: outbox(s)[0]["status"] == "delivered", "the message stayed stuck")
        assert args_file.read_text().splitlines()[-1] == "one more thing"
        assert outbox(s)[0]["attempts"] == 2
    finally:
        s.close()


def test_a_session_that_ended_before_a_restart_is_still_resumed(sockdir, tmp_path):
    state = os.path.join(sockdir, "rs")
    args_file = tmp_path / "args"
    s = SocketServer(os.path.join(sockdir, "a1.sock"), state=state)
    try:
        hook(s, "UserPromptSubmit", prompt="Go", cwd=str(tmp_path))
        hook(s, "SessionEnd", reason="other", cwd=str(tmp_path))
    finally:
        s.close()
    sock = os.path.join(sockdir, "a2.sock")
    cmd = fake_claude(str(tmp_path), f'pwd > {args_file}\n'
                      f'echo \'{{"session_id":"{SID}","hook_event_name":"SessionStart","source":"resume"}}\''
                      f' | CODINGBRIDGE_SOCKET={sock} {binary()} hook\n')
    s = SocketServer(sock, state=state, extra=["--resume-command", cmd])
    try:
        s.request("message.send", {"sessionId": SID, "text": "after the restart"})
        wait_until(lambda: outbox(s)[0]["status"] == "delivered", "the ended session was not resumed after a restart")
        assert args_file.read_text().strip() == str(tmp_path)
        assert outbox(s)[0]["kind"] == "agent.message"
    finally:
        s.close()


def test_client_delivery_leaves_a_claude_sessions_messages_alone(srv):
    """outbox.deliver (to clients, while connection.update says connected)
    and the session's Stop hook never take the same message."""
    hook(srv, "UserPromptSubmit", prompt="Go")
    srv.request("connection.update", {"state": "connected"})
    n = len(srv.notes)
    m = srv.request("message.send", {"sessionId": SID, "text": "for Claude"})
    other = srv.request("message.send", {"sessionId": "not-a-hook-session", "text": "for a client"})
    wait_until(lambda: notes_since(srv, n, "outbox.deliver"), "the other session's message was not delivered to clients")
    assert [d["id"] for d in notes_since(srv, n, "outbox.deliver")] == [other["id"]]
    assert outbox(srv)[0]["kind"] == "agent.message"
    assert hook(srv, "Stop", stop_hook_active=False)["reason"].endswith("for Claude")
    srv.request("debug.advanceClock", {"ms": 120_000})  # past the clients' ack timeout: theirs goes again
    assert {d["id"] for d in notes_since(srv, n, "outbox.deliver")} == {other["id"]}
    srv.request("connection.update", {"state": "disconnected"})
    hook(srv, "Stop", stop_hook_active=True)
    assert outbox(srv)[0]["status"] == "delivered" and outbox(srv)[0]["id"] == m["id"]


def test_a_message_handed_out_before_a_restart_is_not_handed_out_twice(sockdir):
    state = os.path.join(sockdir, "st")
    s = SocketServer(os.path.join(sockdir, "r1.sock"), state=state)
    try:
        hook(s, "UserPromptSubmit", prompt="Go")
        s.request("message.send", {"sessionId": SID, "text": "once only"})
        assert hook(s, "Stop", stop_hook_active=False)["reason"].endswith("once only")
    finally:
        s.close()
    s = SocketServer(os.path.join(sockdir, "r2.sock"), state=state)
    try:
        hook(s, "PreToolUse", tool_name="Read", tool_input={"file_path": "a"}, tool_use_id="t1")
        assert outbox(s)[0]["status"] == "delivered"
        assert hook(s, "Stop", stop_hook_active=True) is None
    finally:
        s.close()


def test_a_message_that_expired_before_the_stop_is_reported(srv):
    hook(srv, "UserPromptSubmit", prompt="Go")
    srv.request("message.send", {"sessionId": SID, "text": "too late", "ttlMs": 1000})
    srv.request("debug.advanceClock", {"ms": 2000})
    n = len(srv.notes)
    assert hook(srv, "Stop", stop_hook_active=False) is None
    (u,) = notes_since(srv, n, "outbox.undeliverable")
    assert u["status"] == "expired"


def test_a_stop_that_takes_a_message_still_ends_its_turns_permission_requests(srv):
    hook(srv, "UserPromptSubmit", prompt="Go")
    h = HookProcess(permission(), srv.path, "--timeout", "50")
    srv.wait_pending()
    srv.request("message.send", {"sessionId": SID, "text": "and then this"})
    assert hook(srv, "Stop", stop_hook_active=False)["decision"] == "block"
    code, out, _, _ = h.finish()
    assert (code, out) == (0, "") and srv.pending() == []
    assert session(srv)["status"] == "processing"


def fake_claude(tmp, body):
    path = os.path.join(tmp, "fake-claude")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def test_a_message_to_an_ended_session_resumes_it(sockdir, tmp_path):
    args_file = tmp_path / "args"
    project = tmp_path / "proj"
    project.mkdir()
    sock = os.path.join(sockdir, "r.sock")
    # What `claude --resume ID -p TEXT` does first: its hooks report the session.
    body = (f'printf "%s\\n" "$@" > {args_file}; pwd >> {args_file}\n'
            f'echo \'{{"session_id":"{SID}","hook_event_name":"SessionStart","source":"resume","cwd":"{project}"}}\''
            f' | CODINGBRIDGE_SOCKET={sock} {binary()} hook\n')
    cmd = fake_claude(str(tmp_path), body)
    s = SocketServer(sock, extra=["--resume-command", cmd])
    try:
        hook(s, "UserPromptSubmit", prompt="Write the report", cwd=str(project))
        hook(s, "Stop", stop_hook_active=False, cwd=str(project))
        hook(s, "SessionEnd", reason="other", cwd=str(project))
        m = s.request("message.send", {"sessionId": SID, "text": "--not-an-option please"})
        wait_until(lambda: outbox(s)[0]["status"] == "delivered", "the resumed session never acknowledged the message")
        lines = args_file.read_text().splitlines()
        assert lines == [f"--resume={SID}", "-p", "--", "--not-an-option please", str(project)], lines
        assert outbox(s)[0]["id"] == m["id"]
    finally:
        s.close()


def test_a_resume_that_fails_reports_the_message_undeliverable(sockdir, tmp_path):
    sock = os.path.join(sockdir, "f.sock")
    cmd = fake_claude(str(tmp_path), "exit 3\n")
    s = SocketServer(sock, extra=["--resume-command", cmd])
    try:
        hook(s, "UserPromptSubmit", prompt="Go", cwd=str(tmp_path))
        hook(s, "SessionEnd", reason="other", cwd=str(tmp_path))
        n = len(s.notes)
        s.request("message.send", {"sessionId": SID, "text": "hello"})
        wait_until(lambda: notes_since(s, n, "outbox.undeliverable"), "no outbox.undeliverable")
        (u,) = notes_since(s, n, "outbox.undeliverable")
        assert (u["status"], u["error"]) == ("failed", "resume exited with status 3"), u
    finally:
        s.close()


def test_no_resume_command_leaves_the_message_for_the_next_stop(sockdir, tmp_path):
    sock = os.path.join(sockdir, "n.sock")
    s = SocketServer(sock, extra=["--resume-command", "none"])
    try:
        hook(s, "UserPromptSubmit", prompt="Go")
        hook(s, "SessionEnd", reason="other")
        s.request("message.send", {"sessionId": SID, "text": "later"})
        time.sleep(0.3)
        assert outbox(s)[0]["status"] == "queued"
        hook(s, "UserPromptSubmit", prompt="back")
        assert hook(s, "Stop", stop_hook_active=False)["reason"].endswith("\n\nlater")
    finally:
        s.close()


# ------------------------------------------------------------- every event of the verified version

VERIFIED_EVENTS = {  # Claude Code 2.1.332 (docs/claude-cli.md "Hook events this binary knows"): a typical input each
    "PreToolUse": {"tool_name": "Read", "tool_input": {"file_path": "a.py"}, "tool_use_id": "t1"},
    "PermissionRequest": {"tool_name": "Bash", "tool_input": {"command": "make"}},
    "PostToolUse": {"tool_name": "Read", "tool_input": {"file_path": "a.py"}, "tool_response": {}, "tool_use_id": "t1"},
    "PostToolUseFailure": {"tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": "t2", "error": "Exit code 2",
                           "is_interrupt": False, "duration_ms": 5},
    "PostToolBatch": {"tool_calls": [{"tool_name": "Read", "tool_input": {}, "tool_use_id": "t1"}]},
    "PermissionDenied": {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "tool_use_id": "t3", "reason": "classifier"},
    "Notification": {"message": "Claude needs your permission", "notification_type": "permission_prompt"},
    "UserPromptSubmit": {"prompt": "hi", "prompt_id": "p1", "source": "user"},
    "UserPromptExpansion": {"expansion_type": "slash_command", "command_name": "review", "command_args": "", "prompt": "x"},
    "SessionStart": {"source": "resume", "model": "claude-opus-5-5", "seconds_since_last_response": 0, "context_tokens": 120,
                     "prompt_cache_likely_expired": False, "estimated_cache_write_usd": 0.0006},
    "SessionEnd": {"reason": "other"},
    "Setup": {"trigger": "init"},
    "Stop": {"stop_hook_active": False, "last_assistant_message": "ok", "background_tasks": [], "session_crons": [],
             "effort": {"level": "medium"}},
    "StopFailure": {"error": "overloaded_error", "error_details": "529"},
    "SubagentStart": {"agent_id": "a1", "agent_type": "Explore"},
    "SubagentStop": {"stop_hook_active": False, "agent_id": "a1", "agent_transcript_path": "/t", "agent_type": "Explore"},
    "PreCompact": {"trigger": "auto", "custom_instructions": None},
    "PostCompact": {"trigger": "auto", "compact_summary": "..."},
    "PreModelSwitch": {"trigger": "picker"},
    "PostModelSwitch": {"trigger": "picker"},
    "TeammateIdle": {"teammate_name": "t", "team_name": "x"},
    "TaskCreated": {"task_id": "1", "task_subject": "Write tests"},
    "TaskCompleted": {"task_id": "1", "task_subject": "Write tests"},
    "Elicitation": {"mcp_server_name": "db", "message": "Which database?"},
    "ElicitationResult": {"mcp_server_name": "db", "action": "accept"},
    "ConfigChange": {"source": "user_settings"},
    "InstructionsLoaded": {"file_path": "CLAUDE.md", "memory_type": "Project", "load_reason": "session_start"},
    "WorktreeCreate": {"name": "wt"},
    "WorktreeRemove": {"worktree_path": "/w"},
    "CwdChanged": {"old_cwd": "/a", "new_cwd": "/b"},
    "FileChanged": {"file_path": "a.py", "event": "change"},
    "DirectoryAdded": {"directory": "/d", "source": "slash_command"},
    "MessageDisplay": {"turn_id": "t", "message_id": "m", "index": 0, "final": True, "delta": "hi"},
    "PreSkillShellCommand": {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t4",
                             "command_name": "x", "invoked_by": "skill"},
}


@pytest.mark.parametrize("event", sorted(VERIFIED_EVENTS))
def test_every_event_of_the_verified_version_is_known(srv, event):
    srv.request("agent.hook", hook_input("UserPromptSubmit", prompt="go"))
    data = hook_input(event)
    data.update(VERIFIED_EVENTS[event])  # FileChanged has a field named "event"
    r = srv.request("agent.hook", data, timeout=10) if event != "PermissionRequest" else None
    if r is not None:
        assert not any("unknown hook event" in i for i in r["ignored"]), r
    assert srv.request("ping") == {}


def test_stop_failure_fails_the_task(srv):
    hook(srv, "UserPromptSubmit", prompt="go")
    hook(srv, "StopFailure", error="rate_limit_error")
    assert session(srv)["status"] == "error"
