"""The real Claude Code CLI (claudecli.py) interactively under tmux
(claudetmux.py), plus the -p flows of issue 17 that need more than one turn:
terminal answers, auto mode's "needs you", the Task tools, a message from the
phone at the next Stop or by resuming. Interactively, every phone answer too:
approve, deny with a message, "Always allow", a question answered, a message
at the next Stop, and nobody to answer. Findings: docs/claude-cli.md.


Skipped (never red) without tmux (the interactive ones) or without the wheel.
"""
import json
import os
import shlex
import shutil
import signal
import tempfile
import time

import pytest

import claudecli as cc
import claudetmux as ct
from conftest import binary, start_daemon
from rpcclient import SocketClient

CLAUDE = cc.claude_binary()

pytestmark = pytest.mark.skipif(CLAUDE is None, reason=cc.claude_unavailable())
needs_tmux = pytest.mark.skipif(ct.tmux_unavailable() is not None, reason=ct.tmux_unavailable() or "")

FINAL = "Done writing."
RECORD_ONLY = ("PostToolUseFailure", "PostToolBatch", "TaskCreated", "TaskCompleted", "PermissionDenied")


@pytest.fixture
def rig(sockdir):
    home = tempfile.mkdtemp(prefix="cb-home-")
    cwd = tempfile.mkdtemp(prefix="cb-proj-")
    daemons, apis, runs, panes, phones = [], [], [], [], []

    class Rig:
        state, project = sockdir, cwd
        hooks_log = os.path.join(home, "hook-inputs.jsonl")
        home_dir = home
        hooks_err = os.path.join(home, "hook-stderr.log")
        daemon_log = []
        phone = None

        def daemon(self, *args, phone=True):
            """The daemon, and a phone connected to it (phone=False: none yet)."""
            daemons.append(start_daemon(sockdir, "--log-level", "debug", *args, log=self.daemon_log))
            return self.connect_phone() if phone else None

        def connect_phone(self):
            self.phone = SocketClient(os.path.join(sockdir, "codingbridge.sock"))
            self.phone.timeout = 10
            self.phone.initialize(deviceId="phone")
            phones.append(self.phone)
            return self.phone

        def settings(self):
            s = cc.hook_settings(binary(), sockdir, record=self.hooks_log, also=RECORD_ONLY)
            for groups in s["hooks"].values():      # what each hook did, for the failure messages
                for h in (h for g in groups for h in g["hooks"]):
                    if " hook --state-dir " in h["command"]:
                        h["command"] += f" --verbose 2>>{shlex.quote(self.hooks_err)}"
            return s

        def why(self):
            """What the hooks and the daemon said: for failure messages."""
            err = open(self.hooks_err).read() if os.path.exists(self.hooks_err) else ""
            return (f"hooks: {self.events()}\nhook stderr:\n{err[-3000:]}\n"
                    f"daemon log (tail):\n{''.join(self.daemon_log[-60:])}")

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
            return cc.recorded_hook_inputs(self.hooks_log, event)

        def events(self):
            return [i["hook_event_name"] for i in self.hook_inputs()]

        def approvals(self, count=1, timeout=20):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                aps = self.phone.request("approval.list")["approvals"]
                if len(aps) >= count:
                    return aps
                time.sleep(0.05)
            pytest.fail(f"no approval reached the phone; {self.why()}")

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
            pytest.fail(f"no {event} hook within {timeout} s; {self.why()}")

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


def hooks_running(rig):
    """The `codingbridge hook` processes of this rig's daemon running now
    (argv: BINARY hook ... --state-dir STATE)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if len(argv) > 1 and os.path.basename(argv[0]) == os.path.basename(binary()) and argv[1] == "hook" \
                and rig.state in argv:
            found.append(int(pid))
    return found


def wait_question(rig, sid, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        full = rig.phone.request("session.get", {"sessionId": sid})["session"]
        if full.get("pendingQuestions"):
            return full
        time.sleep(0.05)
    pytest.fail(f"no question reached the phone; {rig.why()}")


@needs_tmux
def test_interactive_deny_from_the_phone_with_a_message(rig):
    """Deny with a message on the phone while Claude Code's own dialog is up
    beside the waiting hook: the dialog goes away, the terminal says "Not run ·
    permission denied / Reason: MESSAGE / Denied by PermissionRequest hook",
    the command does not run, and the model's next request carries the message
    as an is_error tool_result."""
    rig.daemon()
    script = cc.turns([cc.text("Running it."),
                       cc.tool_use("Bash", {"command": "echo hi > out.txt", "description": "Write out.txt"})],
                      final="Understood, not writing it.")
    api, t = rig.interactive(script)
    t.submit("write the file")
    [ap] = rig.approvals()
    assert (ap["toolName"], ap["summary"]) == ("Bash", "echo hi > out.txt")
    t.wait_for(ct.DIALOG, 5)
    assert hooks_running(rig), "the PermissionRequest hook should be waiting for the phone"
    assert rig.session(ap["sessionId"])["status"] == "awaitingApproval"
    r = rig.phone.request("approval.respond", {"requestId": ap["requestId"], "decision": "deny",
                                               "message": "Not from this branch"})
    assert (r["status"], r["resolution"]) == ("accepted", "deny"), r
    s = t.wait_for("Understood, not writing it.", 10)
    assert ct.DIALOG not in s, s
    assert "Reason: Not from this branch" in s and "Denied by PermissionRequest hook" in s, s
    assert out_txt(rig) is None
    [tr] = api.tool_results()
    assert (tr["is_error"], tr["content"]) == (True, "Not from this branch"), tr
    assert len(api.messages) == 2                       # the model was asked again, with the denial
    rig.wait_hook("Stop")
    assert rig.events() == ["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolBatch",
                            "Stop"]
    assert rig.phone.request("approval.list")["approvals"] == []
    assert rig.wait_status(ap["sessionId"], "completed")["status"] == "completed"


@needs_tmux
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_interactive_always_allow_from_the_phone(rig):
    """`make build` comes with an addRules suggestion (Bash(make build *),
    localSettings), also interactively, where the dialog offers it as "2. Yes,
    and don't ask again for: make build *". "Always allow" on the phone: the
    dialog goes away, Claude Code writes the rule into the project's
    .claude/settings.local.json and runs the second identical call without a
    PermissionRequest or a dialog."""
    with open(os.path.join(rig.project, "Makefile"), "w") as f:
        f.write("build:\n\techo hi >> out.txt\n")
    rig.daemon()
    build = cc.tool_use("Bash", {"command": "make build", "description": "Build"})
    api, t = rig.interactive(cc.turns([build], [build], final="Built twice."))
    t.submit("build it")
    [ap] = rig.approvals()
    rule = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "make build *"}],
            "behavior": "allow", "destination": "localSettings"}
    assert ap["permissionSuggestions"] == [rule]
    assert rig.hook_inputs("PermissionRequest")[0]["permission_suggestions"] == [rule]
    s = t.wait_for(ct.DIALOG, 5)
    assert "don’t ask again for: make build *" in s or "don't ask again for: make build *" in s, s
    r = rig.phone.request("approval.respond", {"requestId": ap["requestId"], "decision": "allow", "alwaysAllow": True})
    assert r["status"] == "accepted", r
    s = t.wait_for("Built twice.", 10)
    assert ct.DIALOG not in s and "Allowed by PermissionRequest hook" in s, s
    assert out_txt(rig) == "hi\nhi\n"                       # both calls ran
    assert len(rig.hook_inputs("PreToolUse")) == 2
    assert len(rig.hook_inputs("PermissionRequest")) == 1   # the second was not asked
    assert [tr["is_error"] for tr in api.tool_results()] == [False, False]
    with open(os.path.join(rig.project, ".claude", "settings.local.json")) as f:
        assert json.load(f)["permissions"]["allow"] == ["Bash(make build *)"]
    assert rig.wait_status(ap["sessionId"], "completed")["status"] == "completed"


ASK = {"questions": [{"question": "Which CI provider?", "header": "CI", "multiSelect": False,
                      "options": [{"label": "GitHub Actions", "description": "Hosted on GitHub"},
                                  {"label": "GitLab CI", "description": "Hosted on GitLab"}]}]}


@needs_tmux
def test_interactive_question_answered_on_the_phone(rig):
    """Interactive mode offers AskUserQuestion. Its PreToolUse hook waits for
    the phone (the terminal shows only "running PreToolUse hook", no question
    dialog); question.answer makes the hook allow with updatedInput.answers,
    the terminal shows "Answered Claude's questions: · Which CI provider? →
    GitLab CI" and the next Messages request's tool_result carries it."""
    rig.daemon()
    api, t = rig.interactive(cc.turns([cc.tool_use("AskUserQuestion", ASK)], final="Using GitLab CI."))
    t.submit("set up CI")
    [pre] = rig.wait_hook("PreToolUse")
    assert pre["tool_name"] == "AskUserQuestion"
    assert cc.offers_tool(api.messages[0], "AskUserQuestion")
    full = wait_question(rig, pre["session_id"])
    assert full["status"] == "awaitingAnswer"
    [q] = full["pendingQuestions"]
    assert q["questionId"] == pre["tool_use_id"] and q["questions"] == ASK["questions"]
    s = t.wait_for("running PreToolUse hook", 5)
    assert "GitHub Actions" not in s, s                    # no question dialog in the terminal
    r = rig.phone.request("question.answer", {"questionId": q["questionId"], "answers": {"CI": ["GitLab CI"]}})
    assert r["status"] == "accepted", r
    s = t.wait_for("Using GitLab CI.", 10)
    assert "Which CI provider? → GitLab CI" in s and "GitHub Actions" not in s, s
    [tr] = api.tool_results()
    assert tr["tool_use_id"] == pre["tool_use_id"] and tr.get("is_error") in (None, False), tr
    assert '"Which CI provider?"="GitLab CI"' in tr["content"], tr
    rig.wait_hook("Stop")
    assert "PermissionRequest" not in rig.events()        # AskUserQuestion is not a permission
    [post] = [i for i in rig.hook_inputs("PostToolUse") if i["tool_name"] == "AskUserQuestion"]
    assert post["tool_input"]["answers"] == {"Which CI provider?": "GitLab CI"}, post
    s = rig.wait_status(pre["session_id"], "completed")
    assert (s["status"], s["pendingQuestionCount"]) == ("completed", 0), s


@needs_tmux
def test_interactive_message_from_the_phone_at_the_next_stop(rig):
    """message.send while Claude works (it waits for an approval): at the
    turn's Stop the hook blocks with the text, Claude Code goes on (the next
    Messages request carries it as Stop hook feedback; the terminal shows it
    under "Stop hook reported a problem"), the second Stop has
    stop_hook_active, and the message is delivered."""
    rig.daemon()
    api, t = rig.interactive(write_file_script())
    t.submit("write the file")
    [ap] = rig.approvals()
    t.wait_for(ct.DIALOG, 5)
    sent = rig.phone.request("message.send", {"sessionId": ap["sessionId"], "text": "Also add a README"})
    assert sent["status"] == "queued", sent
    rig.phone.request("approval.respond", {"requestId": ap["requestId"], "decision": "allow"})
    stops = rig.wait_hook("Stop", count=2, timeout=15)
    assert [x["stop_hook_active"] for x in stops] == [False, True]
    assert len({x["prompt_id"] for x in stops}) == 1       # the same turn goes on
    s = t.wait_for("Also add a README", 5)
    assert "Stop hook" in s, s
    asked = [b for b in api.messages if any("Also add a README" in x for x in cc.user_texts(b))]
    assert asked and asked[0] is api.messages[2], [cc.user_texts(b)[-1:] for b in api.messages]
    assert len(api.messages) == 3
    assert rig.events().count("UserPromptSubmit") == 1     # it went in as the Stop's block, not as a prompt
    deadline = time.monotonic() + 5
    while True:
        [m] = [m for m in rig.phone.request("outbox.list", {"status": "all"})["messages"] if m["id"] == sent["id"]]
        if m["status"] == "delivered" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert (m["status"], m["kind"], m["attempts"]) == ("delivered", "agent.message", 1), m
    assert rig.wait_status(ap["sessionId"], "completed")["status"] == "completed"


@needs_tmux
def test_interactive_nobody_to_answer(rig):
    """The daemon runs but no phone is connected: the PermissionRequest hook
    returns at once (no hook process left while the dialog is up), no approval
    is made, and the terminal's dialog decides: Yes runs the command."""
    rig.daemon(phone=False)
    api, t = rig.interactive(write_file_script())
    t.submit("write the file")
    [req] = rig.wait_hook("PermissionRequest")
    t.wait_for(ct.DIALOG, 5, settle=ct.DIALOG_SETTLE)
    deadline = time.monotonic() + 3                       # a waiting hook would stay ~53 s
    while hooks_running(rig) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hooks_running(rig) == [], f"the PermissionRequest hook still waits with nobody to answer; {rig.why()}"
    t.keys("Enter")                                        # "1. Yes"
    s = t.wait_for(FINAL, 10)
    assert ct.DIALOG not in s and "PermissionRequest hook" not in s, s
    assert out_txt(rig) == "hi\n"
    rig.wait_hook("Stop")
    assert rig.events() == ["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
                            "PostToolBatch", "Stop"]
    phone = rig.connect_phone()
    assert phone.request("approval.list")["approvals"] == []
    assert rig.wait_status(req["session_id"], "completed")["status"] == "completed"


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

