"""The real Claude Code CLI (claudecli.py) interactively under tmux
(claudetmux.py), plus the -p flows of issue 17 that need more than one turn:
terminal answers, auto mode's "needs you", the Task tools, a message from the
phone at the next Stop or by resuming. Findings: docs/claude-cli.md.


Skipped (never red) without tmux (the interactive ones) or without the wheel.
"""
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

import claudecli as cc
import claudetmux as ct
from conftest import binary
from rpcclient import SocketClient

CLAUDE = cc.claude_binary()

pytestmark = pytest.mark.skipif(CLAUDE is None, reason=cc.claude_unavailable())
needs_tmux = pytest.mark.skipif(ct.tmux_unavailable() is not None, reason=ct.tmux_unavailable() or "")

FINAL = "Done writing."
RECORD_ONLY = ("PostToolUseFailure", "PostToolBatch", "TaskCreated", "TaskCompleted", "PermissionDenied")


def start_daemon(state_dir, *args):
    d = subprocess.Popen([binary(), "serve", "--state-dir", state_dir, "--listen", "unix", "--no-stdio", *args],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in d.stderr:
        if "listening on" in line:
            threading.Thread(target=d.stderr.read, daemon=True).start()
            return d
    pytest.fail(f"the daemon exited with {d.wait()} before listening")


@pytest.fixture
def rig(sockdir):
    home = tempfile.mkdtemp(prefix="cb-home-")
    cwd = tempfile.mkdtemp(prefix="cb-proj-")
    daemons, apis, runs, panes, phones = [], [], [], [], []

    class Rig:
        state, project = sockdir, cwd
        hooks_log = os.path.join(home, "hook-inputs.jsonl")
        home_dir = home
        phone = None

        def daemon(self, *args):
            daemons.append(start_daemon(sockdir, *args))
            self.phone = SocketClient(os.path.join(sockdir, "codingbridge.sock"))
            self.phone.timeout = 10
            self.phone.initialize(deviceId="phone")
            phones.append(self.phone)
            return self.phone

        def settings(self):
            return cc.hook_settings(binary(), sockdir, record=self.hooks_log, also=RECORD_ONLY)

        def api(self, script):
            api = cc.FakeAnthropic(script)
            apis.append(api)
            return api

        def interactive(self, script, args=("--permission-mode", "manual"), env=None, config=None):
            api = self.api(script)
            ct.pre_accept(home, cwd, extra=config)
            t = ct.TmuxClaude(CLAUDE, api, cwd, home, self.settings(), args=args, extra_env=env)
            panes.append(t)
            return api, t.start()

        def print_mode(self, script, args=(), env=None):
            api = self.api(script)
            run = cc.run_claude(CLAUDE, api, cwd, home, self.settings(), extra_env=env, args=args)
            runs.append(run)
            return api, run

        def hook_inputs(self, event=None):
            if not os.path.exists(self.hooks_log):
                return []
            with open(self.hooks_log) as f:
                ins = [json.loads(line) for line in f if line.strip()]
            return [i for i in ins if event is None or i.get("hook_event_name") == event]

        def events(self):
            return [i["hook_event_name"] for i in self.hook_inputs()]

        def approvals(self, count=1, timeout=20):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                aps = self.phone.request("approval.list")["approvals"]
                if len(aps) >= count:
                    return aps
                time.sleep(0.05)
            pytest.fail(f"no approval reached the phone; hooks: {self.events()}")

        def session(self, sid):
            return next(s for s in self.phone.request("session.list")["sessions"] if s["id"] == sid)

        def wait_status(self, sid, status, timeout=5):
            deadline = time.monotonic() + timeout
            while True:
                s = self.session(sid)
                if s["status"] == status or time.monotonic() > deadline:
                    return s
                time.sleep(0.05)

        def wait_hook(self, event, timeout=20, count=1):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                got = self.hook_inputs(event)
                if len(got) >= count:
                    return got
                time.sleep(0.05)
            pytest.fail(f"no {event} hook within {timeout} s; hooks: {self.events()}")

    yield Rig()
    for t in panes:
        t.stop()
    for r in runs:
        r.kill()
    for a in apis:
        a.close()
    for p in phones:
        p.close()
    for d in daemons:
        d.terminate()
        d.wait(10)
    if os.path.exists(os.path.join(home, "resumed.pids")):   # claude processes the daemon resumed
        with open(os.path.join(home, "resumed.pids")) as f:
            for pid in f.read().split():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        if CLAUDE.encode() in c.read():
                            os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(cwd, ignore_errors=True)


def write_file_script():
    return cc.turns([cc.text("Running it."),
                     cc.tool_use("Bash", {"command": "echo hi > out.txt", "description": "Write out.txt"})], final=FINAL)


def out_txt(rig):
    p = os.path.join(rig.project, "out.txt")
    return open(p).read() if os.path.exists(p) else None


# ---- interactive (tmux) --------------------------------------------------------

@needs_tmux
def test_interactive_approve_from_the_phone(rig):
    """Claude Code's own prompt shows at once, beside the waiting hook; the
    phone's allow answers it and the terminal prompt goes away. Once the turn
    ended and nobody typed, Notification idle_prompt."""
    rig.daemon()
    # idle_prompt comes messageIdleNotifThresholdMs (default 60000) after the turn ended
    api, t = rig.interactive(write_file_script(), config={"messageIdleNotifThresholdMs": 1500})
    t.submit("write the file")
    [ap] = rig.approvals()
    t.wait_for(ct.DIALOG, 5)
    assert rig.session(ap["sessionId"])["status"] == "awaitingApproval"
    assert rig.phone.request("approval.respond", {"requestId": ap["requestId"], "decision": "allow"})["status"] == "accepted"
    t.wait_for(FINAL, 10)
    assert out_txt(rig) == "hi\n"
    assert rig.wait_status(ap["sessionId"], "completed")["status"] == "completed"
    assert rig.events() == ["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
                            "PostToolBatch", "Stop"]
    assert rig.hook_inputs("SessionStart")[0]["model"] == "claude-opus-5-5"
    assert rig.hook_inputs("PermissionRequest")[0]["permission_mode"] == "default"   # --permission-mode manual
    [n] = rig.wait_hook("Notification", timeout=5)
    assert (n["notification_type"], n["message"]) == ("idle_prompt", "Claude is waiting for your input")


@needs_tmux
def test_terminal_yes_clears_the_phone_approval(rig):
    """"Yes" in the terminal: no hook says so, the PermissionRequest hook keeps
    waiting until the tool ran; PostToolUse then closes the phone's approval.
    A phone answer after that is not 'accepted'."""
    rig.daemon()
    api, t = rig.interactive(write_file_script())
    t.submit("write the file")
    [ap] = rig.approvals()
    t.wait_for(ct.DIALOG, 5, settle=ct.DIALOG_SETTLE)
    t.keys("Enter")                       # "1. Yes" is preselected
    t.wait_for(FINAL, 10)
    assert out_txt(rig) == "hi\n"
    rig.wait_hook("PostToolUse")
    deadline = time.monotonic() + 1.5
    while rig.phone.request("approval.list")["approvals"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rig.phone.request("approval.list")["approvals"] == []
    assert rig.wait_status(ap["sessionId"], "completed")["status"] == "completed"
    r = rig.phone.request("approval.respond", {"requestId": ap["requestId"], "decision": "deny"}, validate=False)
    assert r["status"] == "alreadyResolved", r


@needs_tmux
def test_terminal_no_cancels_the_hook_and_waits_for_the_person(rig):
    """"No" (or Esc) in the terminal: no hook event, Claude Code sends SIGTERM
    to the waiting PermissionRequest hook and waits for the next prompt
    ("Interrupted · What should Claude do instead?"), no Stop."""
    rig.daemon()
    api, t = rig.interactive(write_file_script())
    t.submit("write the file")
    [ap] = rig.approvals()
    t.wait_for(ct.DIALOG, 5, settle=ct.DIALOG_SETTLE)
    t.keys("4")                            # "4. No"
    t.wait_for("Interrupted", 5)
    deadline = time.monotonic() + 1.5
    while rig.phone.request("approval.list")["approvals"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rig.phone.request("approval.list")["approvals"] == []
    assert out_txt(rig) is None
    assert len(api.messages) == 1                      # the model was not asked again
    assert rig.events() == ["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest"]
    s = rig.wait_status(ap["sessionId"], "awaitingInput", timeout=2)
    assert (s["status"], s["message"]) == ("awaitingInput", "Waiting for your prompt"), s
    late = rig.phone.request("approval.respond", {"requestId": ap["requestId"], "decision": "allow"}, validate=False)
    assert late["status"] == "alreadyResolved", late


@needs_tmux
def test_auto_mode_needs_the_person(rig):
    """Auto mode (the default; --permission-mode auto): our API server does not
    pass the server-side safety check, so for a risky command Claude Code opens
    "Auto mode can't check actions in this session" and, ~6 s later, sends
    Notification agent_needs_input. "Stay in auto mode" then asks in the
    terminal with no PermissionRequest hook at all."""
    rig.daemon()
    script = cc.turns([cc.tool_use("Bash", {"command": "git push --force origin main", "description": "Push"})],
                      final="Pushed.")
    api, t = rig.interactive(script, args=("--permission-mode", "auto"))
    t.submit("push it")
    t.wait_for("Auto mode can't check actions", 10, settle=ct.DIALOG_SETTLE)
    [n] = rig.wait_hook("Notification", timeout=10)
    assert n["notification_type"] == "agent_needs_input"
    assert n["message"] == "Auto mode can't check actions in this session and needs your choice"
    sid = n["session_id"]
    assert rig.wait_status(sid, "awaitingInput", timeout=2)["status"] == "awaitingInput"
    t.keys("Enter")                          # stay in auto mode
    t.wait_for("needs your approval", 5, settle=ct.DIALOG_SETTLE)
    t.keys("Down", "Enter")                  # Yes (No is preselected)
    t.wait_for("Pushed.", 10)
    assert "PermissionRequest" not in rig.events()
    [f] = rig.hook_inputs("PostToolUseFailure")       # git fails: not a repository
    assert f["tool_name"] == "Bash" and f["error"].startswith("Exit code 128")
    assert rig.wait_status(sid, "completed")["status"] == "completed"


# ---- -p flows --------------------------------------------------------------------

def test_task_tools_make_the_plan(rig):
    """CLAUDE_CODE_ENABLE_TODO_TOOLS=true: TaskCreate/TaskUpdate (loaded through
    ToolSearch) and their PostToolUse tool_response shapes."""
    rig.daemon()
    api, run = rig.print_mode(cc.turns(*cc.TASK_TOOLS_STEPS, final="Planned."),
                              env={"CLAUDE_CODE_ENABLE_TODO_TOOLS": "true"})
    code, events, err = run.wait(30)
    assert code == 0, err
    assert run.result()["result"] == "Planned."
    post = {(i["tool_name"], json.dumps(i["tool_input"], sort_keys=True)): i["tool_response"]
            for i in rig.hook_inputs("PostToolUse")}
    assert post[("TaskCreate", json.dumps(cc.TASK_TOOLS_STEPS[1][0]["input"], sort_keys=True))] == {
        "task": {"id": "1", "subject": "Write tests", "description": "Add the e2e tests"}}
    assert post[("TaskUpdate", json.dumps({"taskId": "1", "status": "completed"}, sort_keys=True))] == {
        "success": True, "taskId": "1", "updatedFields": ["status"], "statusChange": {"from": "in_progress", "to": "completed"}}
    assert [(i["task_id"], i["task_subject"]) for i in rig.hook_inputs("TaskCreated")] == [("1", "Write tests"), ("2", "Run tests")]
    assert [i["task_id"] for i in rig.hook_inputs("TaskCompleted")] == ["1"]
    sid = run.result()["session_id"]
    progress = rig.session(sid).get("progress")
    assert (progress["completed"], progress["total"]) == (1, 2), progress


def test_message_from_the_phone_continues_at_the_next_stop(rig):
    """A message sent while Claude works (here: while it waits for an approval)
    is answered at the next Stop as {"decision": "block", "reason": TEXT}: the
    next Messages request carries TEXT as Stop hook feedback, the second Stop
    has stop_hook_active true."""
    rig.daemon()
    api, run = rig.print_mode(write_file_script())
    [ap] = rig.approvals()
    sent = rig.phone.request("message.send", {"sessionId": ap["sessionId"], "text": "Also add a README"})
    rig.phone.request("approval.respond", {"requestId": ap["requestId"], "decision": "allow"})
    code, events, err = run.wait(30)
    assert code == 0, err
    stops = rig.hook_inputs("Stop")
    texts = [t for b in api.messages for t in cc.user_texts(b)]
    assert any("Also add a README" in t for t in texts), (stops, rig.phone.request("outbox.list", {"status": "all"}))
    assert [s["stop_hook_active"] for s in stops] == [False, True]
    [m] = [m for m in rig.phone.request("outbox.list", {"status": "all"})["messages"] if m["id"] == sent["id"]]
    assert m["status"] == "delivered"


def test_message_to_an_ended_session_resumes_it(rig):
    """After `claude -p` ended (SessionEnd), a message from the phone runs
    `CMD --resume ID -p -- TEXT` in the session's cwd: same session_id,
    SessionStart source "resume", UserPromptSubmit with TEXT."""
    api = rig.api(cc.turns(final="Answered."))
    settings_path = os.path.join(rig.home_dir, "cb-settings.json")
    # --resume-command: claude with the test's environment and hooks.
    wrapper = os.path.join(rig.home_dir, "resume-claude.sh")
    pids = os.path.join(rig.home_dir, "resumed.pids")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\necho $$ >> {shlex.quote(pids)}\nexec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in {
            "HOME": rig.home_dir, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "test",
            "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}.items())
                + f" {shlex.quote(CLAUDE)} --settings {shlex.quote(settings_path)} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    rig.daemon("--resume-command", wrapper)
    run = cc.run_claude(CLAUDE, api, rig.project, rig.home_dir, rig.settings(), prompt="first")
    code, _, err = run.wait(30)
    assert code == 0, err
    sid = run.result()["session_id"]
    rig.wait_hook("SessionEnd")
    rig.phone.request("message.send", {"sessionId": sid, "text": "And now the docs"})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(rig.hook_inputs("SessionStart")) < 2:
        time.sleep(0.1)
    starts = rig.hook_inputs("SessionStart")
    assert len(starts) == 2, rig.phone.request("outbox.list", {"status": "all"})
    assert starts[1]["source"] == "resume" and starts[1]["session_id"] == sid
    rig.wait_hook("SessionEnd", count=2)
    prompts = [i for i in rig.hook_inputs("UserPromptSubmit") if i["session_id"] == sid]
    assert [p["prompt"] for p in prompts] == ["first", "And now the docs"]
    assert any("And now the docs" in t for t in cc.user_texts(api.messages[-1]))
    [m] = rig.phone.request("outbox.list", {"status": "all"})["messages"]
    assert m["status"] == "delivered", m
