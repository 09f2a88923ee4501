"""The real Claude Code CLI (bundled in the pinned claude-agent-sdk wheel, see
claudecli.py) wired to `codingbridge hook` exactly as `hook --print-settings`
prints it, against a scripted local Messages API and a real daemon
(`serve --state-dir D --listen unix --no-stdio`). A unix-socket client with
deviceId "phone" answers the approvals. `claude -p` in the default permission
mode, so Bash asks. Findings: docs/claude-cli.md.

Skipped (never red) when the wheel cannot be downloaded.
"""
import json
import os
import shutil
import tempfile
import time

import pytest

import claudecli as cc
from conftest import binary, start_daemon
from rpcclient import SocketClient

CLAUDE = cc.claude_binary()

pytestmark = pytest.mark.skipif(CLAUDE is None, reason=cc.claude_unavailable())

FINAL = "Wrote out.txt."


@pytest.fixture
def rig(sockdir):
    """(daemon state dir, phone client, throwaway home, project cwd, record file)."""
    home = tempfile.mkdtemp(prefix="cb-home-")
    cwd = tempfile.mkdtemp(prefix="cb-proj-")
    daemon = start_daemon(sockdir)
    phone = SocketClient(os.path.join(sockdir, "codingbridge.sock"))
    phone.timeout = 10
    phone.initialize(deviceId="phone")
    apis, runs = [], []

    class Rig:
        state, client, project = sockdir, phone, cwd
        hooks_log = os.path.join(home, "hook-inputs.jsonl")

        def start(self, script, args=()):
            api = cc.FakeAnthropic(script)
            apis.append(api)
            settings = cc.hook_settings(binary(), sockdir, record=self.hooks_log)
            run = cc.run_claude(CLAUDE, api, cwd, home, settings, args=args)
            runs.append(run)
            return api, run

        def hook_inputs(self, event=None):
            return cc.recorded_hook_inputs(self.hooks_log, event)

        def approvals(self, run, count=1, timeout=20):
            """Waits (polling approval.list) until `count` approvals are pending."""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                aps = phone.request("approval.list")["approvals"]
                if len(aps) >= count:
                    return aps
                assert run.proc.poll() is None, f"claude exited ({run.proc.returncode}) before asking: {run.events!r}"
                time.sleep(0.05)
            pytest.fail("no approval reached the phone")

    yield Rig()
    for r in runs:
        r.kill()
    for a in apis:
        a.close()
    phone.close()
    daemon.terminate()
    daemon.wait(10)
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(cwd, ignore_errors=True)


def session(rig, sid):
    return next(s for s in rig.client.request("session.list")["sessions"] if s["id"] == sid)


def wait_status(rig, sid, status, timeout=5):
    deadline = time.monotonic() + timeout
    while True:
        s = session(rig, sid)
        if s["status"] == status or time.monotonic() > deadline:
            return s
        time.sleep(0.05)


def test_approve_from_the_phone(rig):
    api, run = rig.start(cc.bash_then_text("echo hi > out.txt", FINAL))
    [ap] = rig.approvals(run)
    assert ap["toolName"] == "Bash" and ap["summary"] == "echo hi > out.txt"
    assert session(rig, ap["sessionId"])["status"] == "awaitingApproval"
    r = rig.client.request("approval.respond", {"requestId": ap["requestId"], "decision": "allow"})
    assert r["status"] == "accepted"

    code, events, err = run.wait(25)
    assert code == 0, err
    with open(os.path.join(rig.project, "out.txt")) as f:
        assert f.read() == "hi\n"
    result = run.result()
    assert result and result["subtype"] == "success" and result["result"] == FINAL, events
    [tr] = api.tool_results()
    assert tr["is_error"] is False
    assert result["session_id"] == ap["sessionId"]
    assert wait_status(rig, ap["sessionId"], "completed")["status"] == "completed"
    assert [i["hook_event_name"] for i in rig.hook_inputs()] == [
        "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop", "SessionEnd"]


def test_deny_from_the_phone(rig):
    api, run = rig.start(cc.bash_then_text("echo hi > out.txt", "Understood, not writing it."))
    [ap] = rig.approvals(run)
    r = rig.client.request("approval.respond", {"requestId": ap["requestId"], "decision": "deny",
                                                "message": "Not from this branch"})
    assert r["status"] == "accepted"

    code, events, err = run.wait(25)
    assert code == 0, err
    assert not os.path.exists(os.path.join(rig.project, "out.txt"))
    [tr] = api.tool_results()
    assert tr["is_error"] is True and "Not from this branch" in json.dumps(tr["content"]), tr
    # The denial reached the model: the request after the tool_use carries it.
    assert len(api.messages) == 2
    result = run.result()
    assert result and result["result"] == "Understood, not writing it."
    assert not rig.hook_inputs("PostToolUse")
    assert wait_status(rig, ap["sessionId"], "completed")["status"] == "completed"


def test_deny_default_message(rig):
    api, run = rig.start(cc.bash_then_text("echo hi > out.txt", "OK."))
    [ap] = rig.approvals(run)
    rig.client.request("approval.respond", {"requestId": ap["requestId"], "decision": "deny"})
    code, _, err = run.wait(25)
    assert code == 0, err
    assert not os.path.exists(os.path.join(rig.project, "out.txt"))
    [tr] = api.tool_results()
    assert tr["is_error"] is True and tr["content"] == "Denied by the user from CodingBridge (phone).", tr


def test_always_allow_for_a_redirect_offers_only_add_directories(rig):
    """2.1.332 in -p: for `echo hi > out.txt` the only suggestion is adding the
    project directory for the session (no Bash rule), so "Always allow" does
    not stop the next identical call from asking."""
    api, run = rig.start(cc.bash_then_text("echo hi > out.txt", FINAL, times=2))
    [ap] = rig.approvals(run)
    [sug] = ap["permissionSuggestions"]
    assert sug["type"] == "addDirectories" and sug["destination"] == "session"
    assert [os.path.realpath(d) for d in sug["directories"]] == [os.path.realpath(rig.project)]
    [raw] = rig.hook_inputs("PermissionRequest")
    assert raw["permission_suggestions"] == [sug]
    rig.client.request("approval.respond", {"requestId": ap["requestId"], "decision": "allow", "alwaysAllow": True})
    aps = rig.approvals(run, count=1)   # asked again for the second call
    assert aps[0]["requestId"] != ap["requestId"]
    rig.client.request("approval.respond", {"requestId": aps[0]["requestId"], "decision": "allow"})
    code, _, err = run.wait(25)
    assert code == 0, err
    assert len(rig.hook_inputs("PermissionRequest")) == 2
    assert not os.path.exists(os.path.join(rig.project, ".claude"))


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_always_allow_writes_the_rule_and_stops_asking(rig):
    """`make build` gets an addRules suggestion (Bash(make build *), localSettings):
    "Always allow" on the phone reaches Claude Code, which writes the rule into the
    project's .claude/settings.local.json and runs the second identical call
    without asking."""
    with open(os.path.join(rig.project, "Makefile"), "w") as f:
        f.write("build:\n\techo hi >> out.txt\n")
    api, run = rig.start(cc.bash_then_text("make build", FINAL, times=2))
    [ap] = rig.approvals(run)
    assert ap["permissionSuggestions"] == [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "make build *"}],
                                            "behavior": "allow", "destination": "localSettings"}]
    r = rig.client.request("approval.respond", {"requestId": ap["requestId"], "decision": "allow", "alwaysAllow": True})
    assert r["status"] == "accepted"
    code, events, err = run.wait(25)
    assert code == 0, err
    assert run.result()["result"] == FINAL
    with open(os.path.join(rig.project, "out.txt")) as f:
        assert f.read() == "hi\nhi\n"          # both calls ran
    assert len(rig.hook_inputs("PermissionRequest")) == 1     # the second was not asked
    assert len(rig.hook_inputs("PreToolUse")) == 2
    with open(os.path.join(rig.project, ".claude", "settings.local.json")) as f:
        assert "Bash(make build *)" in json.load(f)["permissions"]["allow"]
    assert [t["is_error"] for t in api.tool_results()] == [False, False]


def test_nobody_to_answer_does_not_hold_claude(sockdir):
    """The daemon runs but no phone is connected and no device has push: the
    PermissionRequest hook answers at once with nothing, so `claude -p` goes
    on with its own default (the redirect is denied) in a few seconds instead
    of waiting ~54 s, and no approval is left for a phone to find later."""
    home = tempfile.mkdtemp(prefix="cb-home-")
    cwd = tempfile.mkdtemp(prefix="cb-proj-")
    daemon = start_daemon(sockdir)
    api = cc.FakeAnthropic(cc.bash_then_text("echo hi > out.txt", "OK, not written."))
    run = None
    try:
        record = os.path.join(home, "hook-inputs.jsonl")
        t0 = time.monotonic()
        run = cc.run_claude(CLAUDE, api, cwd, home, cc.hook_settings(binary(), sockdir, record=record))
        code, events, err = run.wait(40)
        secs = time.monotonic() - t0
        assert code == 0, err
        assert secs < 15, f"claude -p took {secs:.1f} s"
        assert not os.path.exists(os.path.join(cwd, "out.txt"))
        [tr] = api.tool_results()
        assert tr["is_error"] is True
        assert run.result()["result"] == "OK, not written."
        assert cc.recorded_hook_inputs(record, "PermissionRequest")
        phone = SocketClient(os.path.join(sockdir, "codingbridge.sock"))
        phone.initialize(deviceId="phone")
        assert phone.request("approval.list")["approvals"] == []
        phone.close()
    finally:
        if run:
            run.kill()
        api.close()
        daemon.terminate()
        daemon.wait(10)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(cwd, ignore_errors=True)


ASK = {"questions": [{"question": "Which CI provider?", "header": "CI", "multiSelect": False,
                      "options": [{"label": "GitHub Actions", "description": "Hosted on GitHub"},
                                  {"label": "GitLab CI", "description": "Hosted on GitLab"}]}]}


def ask_then_text(final):
    def script(body, earlier):
        if not offers_tool(body, "Bash"):
            return [{"type": "text", "text": "Echo test"}]
        if not cc.tool_results_in(body):
            return [{"type": "tool_use", "name": "AskUserQuestion", "input": ASK}]
        return [{"type": "text", "text": final}]
    return script


def offers_tool(body, name):
    return cc.offers_tool(body, name)


def test_question_answered_on_the_phone_reaches_claude(rig):
    """AskUserQuestion: the PreToolUse hook waits for the phone's
    question.answer and answers allow with the answers in updatedInput; the
    next Messages request carries the tool_result with the chosen option."""
    # -p disables AskUserQuestion ("No such tool available") unless a
    # permission prompt tool is given, as the SDK does: stdio.
    api, run = rig.start(ask_then_text("Using GitLab CI."), args=("--permission-prompt-tool", "stdio"))
    deadline = time.monotonic() + 20
    q = None
    while time.monotonic() < deadline and q is None:
        for s in rig.client.request("session.list")["sessions"]:
            full = rig.client.request("session.get", {"sessionId": s["id"]})["session"]
            if full.get("pendingQuestions"):
                q = full["pendingQuestions"][0]
        assert run.proc.poll() is None or q, f"claude exited before asking: {run.events!r}"
        time.sleep(0.05)
    assert q, f"no question reached the phone: {[i['hook_event_name'] for i in rig.hook_inputs()]} {run.events!r}"
    r = rig.client.request("question.answer", {"questionId": q["questionId"], "answers": {"CI": ["GitLab CI"]}})
    assert r["status"] == "accepted"
    code, events, err = run.wait(25)
    assert code == 0, err
    [tr] = api.tool_results()
    assert "GitLab CI" in json.dumps(tr["content"]), tr
    assert tr.get("is_error") in (None, False), tr
    assert run.result()["result"] == "Using GitLab CI."
