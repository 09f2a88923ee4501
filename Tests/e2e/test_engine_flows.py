"""The engine end to end over stdio (`serve --manual-clock --ephemeral`): the
five PRD user flows, approval timing, double answers, privacy, foreground vs
background, two sessions and the one Live Activity. Every result is checked
against rpc-spec/openrpc.json, every server->client notification against its
params schema."""
import json

import pytest

from conftest import RPCFailure, Steps, only

SECRET = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4Y5z6" + "AA"

def methods(notes):
    return [n["method"] for n in notes]


@pytest.fixture
def flow(server):
    return Steps(server)


BASH_NPM_TEST = {"toolName": "Bash", "input": {"command": "npm test"}}


# --- the five PRD user flows -------------------------------------------------

def test_flow1_happy_path_task_completes_while_away(flow):
    _, n = flow.ev("s1", "task_started", prompt="fix the login bug")
    assert only(n, "notification.post") == [] and only(n, "banner.show") == []   # foreground: nothing
    _, n = flow.app(phase="background")                                            # locks the phone
    (act,) = only(n, "activity.start")
    assert act["rendered"]["compact"] == "MyApp · working · 0:00"
    # details off (the default): the name, not the path
    assert act["rendered"]["lockScreen"].startswith("MyApp\n") and act["projectPath"] is None
    flow.advance(165_000)
    r, _ = flow.req("activity.get")
    assert "Elapsed: 2:45" in r["activity"]["rendered"]["lockScreen"]
    assert r["activity"]["elapsedSeconds"] == 165
    _, n = flow.ev("s1", "task_completed", summary="Fixed")
    (post,) = only(n, "notification.post")
    assert post["title"] == "Task Complete" and post["body"] == "Claude finished working"
    assert post["sound"] is True and post["interruptionLevel"] == "active"
    assert post["threadId"] == "s1" and post["deepLink"] == "codingbridge://session/s1"
    (end,) = only(n, "activity.end")
    assert end["status"] == "completed"
    r, _ = flow.req("deeplink.parse", {"url": post["deepLink"]})
    assert r == {"route": "session", "url": "codingbridge://session/s1", "sessionId": "s1"}
    r, _ = flow.req("session.get", {"sessionId": "s1"})
    assert r["session"]["status"] == "completed"


def test_flow2_permission_request_while_away(flow):
    flow.req("settings.update", {"showNotificationDetails": True})
    flow.ev("s1", "task_started")
    flow.app(phase="background")
    _, n = flow.ev("s1", "approval_request", requestId="r1", **BASH_NPM_TEST)
    (post,) = only(n, "notification.post")
    assert post["title"] == "Approval Needed" and post["body"] == "Run: npm test"
    assert [a["id"] for a in post["actions"]] == ["approve", "deny"]
    assert post["interruptionLevel"] == "timeSensitive" and post["badge"] == 1
    assert post["deepLink"] == "codingbridge://session/s1/approval/r1"
    assert only(n, "badge.update") == [{"count": 1}]
    upd = only(n, "activity.update")[-1]
    assert upd["status"] == "awaitingApproval" and upd["approval"]["requestId"] == "r1"
    assert upd["rendered"]["lockScreen"].endswith("Bash: npm test\nApprove | Deny")
    flow.advance(12_000)
    r, n = flow.respond("r1", "allow", deviceId="iphone", source="notification")
    assert r == {"status": "accepted", "requestId": "r1", "sessionId": "s1", "resolution": "allow"}
    assert only(n, "notification.clear") == [{"ids": ["approval:r1"]}]
    assert only(n, "approval.resolved") == [{"requestId": "r1", "sessionId": "s1", "decision": "allow", "by": "iphone",
                                             "alwaysAllow": False, "interrupt": False}]
    assert only(n, "badge.update") == [{"count": 0}]
    upd = only(n, "activity.update")[-1]
    assert upd["status"] == "processing" and upd["operation"] == "Running tests"   # "Running tests..."
    _, n = flow.ev("s1", "task_completed", summary="All tests passed")
    assert only(n, "notification.post")[0]["body"] == "All tests passed"
    r, _ = flow.req("metrics.get")
    assert r["counters"]["approvalFromNotification"] == 1


def test_flow3_user_misses_permission_request(flow):
    flow.ev("s1", "task_started")
    flow.app(phase="background")
    flow.ev("s1", "approval_request", requestId="r1", **BASH_NPM_TEST)
    _, n = flow.advance(60_000)
    assert only(n, "notification.clear") == [{"ids": ["approval:r1"]}]
    assert only(n, "approval.resolved")[0]["decision"] == "timedOut"
    upd = only(n, "activity.update")[-1]
    assert upd["message"] == "Approval timed out - Claude continued"
    assert upd["status"] == "processing"
    r, _ = flow.req("session.get", {"sessionId": "s1"})
    assert r["session"]["history"][-1]["kind"] == "timedOut"
    assert r["session"]["message"] == "Approval timed out - Claude continued"
    r, _ = flow.req("metrics.get")
    assert r["missedApprovals"] == 1


def test_flow4_user_denies_permission(flow):
    flow.ev("s1", "task_started")
    flow.app(phase="background")
    flow.ev("s1", "approval_request", requestId="r1", toolName="Bash", input={"command": "rm -rf tests/"})
    r, n = flow.respond("r1", "deny", source="notification")
    assert r["status"] == "accepted" and r["resolution"] == "deny"
    assert only(n, "approval.resolved")[0]["decision"] == "deny"
    _, n = flow.ev("s1", "tool_use", toolName="Edit", input={"file_path": "src/app.ts"})
    assert only(n, "activity.update")[-1]["operation"] == "Editing files"   # Claude continues
    r, _ = flow.req("session.get", {"sessionId": "s1"})
    assert [h["kind"] for h in r["session"]["history"]] == ["denied"]
    r, _ = flow.req("metrics.get")
    assert r["counters"]["denialFromNotification"] == 1


def test_flow5_long_running_task_with_progress(flow):
    flow.req("settings.update", {"showNotificationDetails": True})
    flow.ev("s1", "task_started", prompt="Run all tests and fix any failures")
    items = ["Run unit tests", "Fix auth test", "Fix api test", "Run e2e", "Final check"]
    forms = ["Running unit tests", "Fixing auth test", "Fixing api test", "Running e2e", "Checking"]

    def todos(done):
        return [{"content": c, "activeForm": f,
                 "status": "completed" if i < done else ("in_progress" if i == done else "pending")}
                for i, (c, f) in enumerate(zip(items, forms))]

    flow.ev("s1", "progress", todos=todos(0))
    _, n = flow.app(phase="background")
    (act,) = only(n, "activity.start")
    assert act["progressText"] == "0 of 5 tasks"
    for done in (1, 2, 3):
        flow.advance(120_000)
        _, n = flow.ev("s1", "progress", todos=todos(done))
        (upd,) = only(n, "activity.update")
        assert upd["progressText"] == f"{done} of 5 tasks"
        assert f"{done} of 5 tasks complete · {forms[done]}" in upd["rendered"]["lockScreen"]
        assert only(n, "notification.post") == []        # silent
    flow.advance(120_000)
    _, n = flow.ev("s1", "task_completed", summary="All tests passing")
    (post,) = only(n, "notification.post")
    assert (post["title"], post["body"]) == ("Task Complete", "All tests passing")
    (end,) = only(n, "activity.end")
    assert end["elapsedSeconds"] == 480                 # 8 minutes


# --- approvals: timing and double answers -----------------------------------

@pytest.mark.parametrize("ms,status", [(59_900, "accepted"), (60_000, "expired")])
def test_approval_at_59_9s_vs_60s(flow, ms, status):
    flow.ev("s1", "task_started")
    flow.ev("s1", "approval_request", requestId="r1", **BASH_NPM_TEST)
    flow.advance(ms)
    r, _ = flow.respond("r1", "allow")
    assert r["status"] == status
    assert r["resolution"] == ("allow" if status == "accepted" else "timedOut")


def test_double_answer_and_answer_after_timeout(flow):
    flow.ev("s1", "task_started")
    flow.ev("s1", "approval_request", requestId="r1", **BASH_NPM_TEST)
    r, _ = flow.respond("r1", "allow", deviceId="iphone")
    assert r["status"] == "accepted"
    before, _ = flow.req("session.get", {"sessionId": "s1"})
    r, n = flow.respond("r1", "deny", deviceId="ipad")
    assert r["status"] == "alreadyResolved" and r["resolution"] == "allow"
    assert n == []                                        # changes nothing, tells nobody
    after, _ = flow.req("session.get", {"sessionId": "s1"})
    assert after == before
    flow.ev("s1", "approval_request", requestId="r2", **BASH_NPM_TEST)
    flow.advance(61_000)
    r, n = flow.respond("r2", "allow")
    assert r["status"] == "expired" and n == []
    r, _ = flow.respond("never-asked", "allow")
    assert r["status"] == "unknown"


def test_approval_queue_badge_and_list(flow):
    flow.app(phase="background")
    flow.ev("s1", "task_started")
    flow.ev("s1", "approval_request", requestId="r1", **BASH_NPM_TEST)
    flow.advance(1000)
    _, n = flow.ev("s1", "approval_request", requestId="r2", toolName="Write", input={"file_path": "src/a.ts"})
    assert only(n, "badge.update") == [{"count": 2}]
    assert only(n, "activity.update")[-1]["approval"]["requestId"] == "r2"   # newest shown
    r, _ = flow.req("approval.list")
    assert [a["requestId"] for a in r["approvals"]] == ["r1", "r2"]
    assert r["approvals"][0]["remainingSeconds"] == 59
    _, n = flow.advance(59_000)
    assert only(n, "approval.resolved") == [{"requestId": "r1", "sessionId": "s1", "decision": "timedOut", "by": None,
                                             "alwaysAllow": False, "interrupt": False}]
    r, _ = flow.req("approval.list", {"sessionId": "s1"})
    assert [a["requestId"] for a in r["approvals"]] == ["r2"]


# --- privacy ------------------------------------------------------------------

@pytest.mark.parametrize("details", [False, True])
def test_details_on_off_with_a_secret_in_the_command(flow, details):
    flow.req("settings.update", {"showNotificationDetails": details})
    flow.ev("s1", "task_started")
    flow.app(phase="background")
    cmd = f"curl -H 'x-api-key: {SECRET}' https://api.anthropic.com/v1/messages"
    _, n = flow.ev("s1", "approval_request", requestId="r1", toolName="Bash", input={"command": cmd})
    (post,) = only(n, "notification.post")
    act = only(n, "activity.update")[-1]
    everything = repr(n)
    assert SECRET not in everything
    if details:
        assert post["body"].startswith("Run: curl -H 'x-api-key: ")
        assert "[REDACTED" in post["body"]
        assert "[REDACTED" in act["approval"]["summary"]
    else:
        assert post["body"] == "Claude needs permission to continue"
        assert act["approval"]["summary"] == "Claude needs permission to continue"
    r, _ = flow.req("approval.list")                        # in-app: details, still redacted
    assert SECRET not in r["approvals"][0]["summary"] and "curl" in r["approvals"][0]["summary"]


def test_details_are_capped_at_200_characters(flow):
    flow.req("settings.update", {"showNotificationDetails": True})
    flow.ev("s1", "task_started")
    flow.app(phase="background")
    _, n = flow.ev("s1", "task_failed", error="é🙂" * 400)
    (post,) = only(n, "notification.post")
    assert len(post["body"]) == 200 and post["body"].endswith("…")


GHP = "ghp_" + "R8s2Kq9VwX4mLt7Zp1Nc6Hy3Jd5Fb0Ge8Ua2"


@pytest.mark.parametrize("details", [False, True])
def test_lock_screen_shows_no_secret_and_with_details_off_no_path_or_todo_text(flow, details):
    """A TodoWrite through the real hook path once put "Rotating key ghp_..." and the
    project path on the lock screen with default settings, and 11 KB of content."""
    flow.req("settings.update", {"showNotificationDetails": details})
    flow.app(phase="background")
    todos = [{"content": f"Rotating key {GHP} step {i} " + "x" * 200, "status": "in_progress" if i == 0 else "pending",
              "activeForm": f"Rotating key {GHP}"} for i in range(40)]
    hook = {"session_id": "s9", "cwd": f"/home/alice/acme-{GHP}", "transcript_path": "/tmp/t.jsonl"}
    flow.req("agent.hook", {**hook, "hook_event_name": "UserPromptSubmit", "prompt": f"rotate {GHP}"})
    _, n = flow.req("agent.hook", {**hook, "hook_event_name": "PreToolUse", "tool_name": "TodoWrite",
                                   "tool_input": {"todos": todos}})
    _, n2 = flow.req("agent.hook", {**hook, "hook_event_name": "Stop", "last_assistant_message": f"done {GHP}"})
    shown = [x for x in n + n2 if x["method"] == "notification.post" or x["method"].startswith("activity.")]
    assert any(x["method"] == "activity.update" for x in shown) and any(x["method"] == "notification.post" for x in shown)
    for x in shown:
        text = json.dumps(x["params"], ensure_ascii=False)
        assert GHP not in text and len(text.encode()) <= 4096, x
        if not details:
            assert "Rotating key" not in text and "/home/alice" not in text, x
    act = [x["params"] for x in shown if x["method"] == "activity.update"][-1]
    assert act["progressText"] == "0 of 40 tasks"
    if details:
        assert act["progress"]["current"].startswith("Rotating key [REDACTED") and act["projectPath"].startswith("/home/alice/acme-")


def test_custom_redaction_rule_and_bad_pattern(flow):
    with pytest.raises(RPCFailure) as e:
        flow.req("settings.update", {"customRedactionRules": [{"name": "ticket", "pattern": "TICKET-(\\d+"}]})
    assert e.value.code == -32602
    assert e.value.data["param"] == "customRedactionRules[0].pattern"
    assert e.value.data["offset"] == 11 and "parenthesis" in e.value.data["message"]
    r, _ = flow.req("settings.get")
    assert r["settings"]["customRedactionRules"] == []     # nothing changed
    flow.req("settings.update", {"showNotificationDetails": True,
                                 "customRedactionRules": [{"name": "ticket", "pattern": "TICKET-\\d+"}]})
    flow.app(phase="background")
    _, n = flow.ev("s1", "task_completed", summary="Closed TICKET-4242")
    assert only(n, "notification.post")[0]["body"] == "Closed [REDACTED]"


# --- foreground vs background ------------------------------------------------

def test_foreground_vs_background(flow):
    flow.ev("s1", "task_started")
    _, n = flow.ev("s1", "tool_use", **BASH_NPM_TEST)
    assert [m for m in methods(n) if m.startswith(("notification", "activity", "banner"))] == []
    _, n = flow.ev("s1", "approval_request", requestId="r1", **BASH_NPM_TEST)
    assert only(n, "notification.post") == []
    (b,) = only(n, "banner.show")
    assert b["style"] == "approval" and b["title"] == "Approval Needed"
    flow.respond("r1", "allow")
    _, n = flow.ev("s1", "question", questionId="q1",
                   questions=[{"question": "Which database should we use?", "header": "DB",
                               "options": [{"label": "Postgres"}, {"label": "SQLite"}], "multiSelect": False}])
    assert only(n, "banner.show")[0]["style"] == "question" and only(n, "notification.post") == []
    r, _ = flow.req("question.answer", {"questionId": "q1", "answers": {"DB": "SQLite"}})
    assert r == {"status": "accepted", "questionId": "q1", "sessionId": "s1"}
    r, _ = flow.req("question.answer", {"questionId": "q1", "answers": {"DB": "SQLite"}})
    assert r["status"] == "alreadyResolved"
    _, n = flow.ev("s1", "task_failed", error="Build error occurred")
    assert only(n, "banner.show")[0]["style"] == "alert" and only(n, "notification.post") == []
    flow.ev("s2", "task_started")
    _, n = flow.ev("s2", "task_completed")
    assert only(n, "notification.post") == [] and only(n, "banner.show") == []
    # The same in background: pushes, and the question is a push.
    flow.app(phase="background")
    flow.ev("s3", "task_started")
    _, n = flow.ev("s3", "question", questionId="q2", questions=[{"question": "Proceed?"}])
    (post,) = only(n, "notification.post")
    assert post["title"] == "Claude has a question" and post["category"] == "question"
    assert post["deepLink"] == "codingbridge://session/s3/question/q2"


def test_permission_denied_then_banner_on_return(flow):
    flow.app(phase="background", permissions={"notifications": "denied"})
    flow.ev("s1", "task_started")
    _, n = flow.ev("s1", "task_completed")
    assert only(n, "notification.post") == []
    _, n = flow.app(phase="foreground")
    (b,) = only(n, "banner.show")
    assert b["deepLink"] == "codingbridge://settings/notifications"
    assert b["body"].startswith("1 notifications could not be shown: Task Complete (1).")


def test_two_sessions_compete_for_the_one_live_activity(flow):
    flow.app(phase="background")
    _, n = flow.ev("a", "task_started", projectName="Alpha", projectPath="~/code/alpha")
    assert [x["sessionId"] for x in only(n, "activity.start")] == ["a"]
    flow.advance(1000)
    _, n = flow.ev("b", "task_started", projectName="Beta", projectPath="~/code/beta")
    assert [x["sessionId"] for x in only(n, "activity.end")] == ["a"]
    assert [x["sessionId"] for x in only(n, "activity.start")] == ["b"]
    _, n = flow.ev("a", "tool_use", projectName="Alpha", **BASH_NPM_TEST)
    assert only(n, "activity.start") == [] and only(n, "activity.update") == []
    _, n = flow.ev("a", "approval_request", projectName="Alpha", requestId="ra", **BASH_NPM_TEST)
    assert [x["sessionId"] for x in only(n, "activity.start")] == ["a"]
    assert len(only(n, "notification.post")) == 1
    r, _ = flow.req("session.list")
    assert [s["id"] for s in r["sessions"]] == ["a", "b"]
    flow.respond("ra", "allow")
    _, n = flow.ev("a", "task_completed", projectName="Alpha")
    assert [x["sessionId"] for x in only(n, "activity.end")] == ["a"]
    assert [x["sessionId"] for x in only(n, "activity.start")] == ["b"]
    r, _ = flow.req("activity.get")
    assert r["activity"]["sessionId"] == "b" and r["activity"]["projectName"] == "Beta"


def test_live_activities_disabled_means_notifications_only(flow):
    flow.req("settings.update", {"enableLiveActivities": False})
    _, n = flow.app(phase="background")
    flow.ev("s1", "task_started")
    r, _ = flow.req("activity.get")
    assert r == {"activity": None, "liveActivityStatus": "disabledInApp"}
    _, n = flow.ev("s1", "task_completed")
    assert len(only(n, "notification.post")) == 1


# --- errors say what was wrong ----------------------------------------------

@pytest.mark.parametrize("params,param", [
    ({"type": "task_started"}, "sessionId"),
    ({"sessionId": "s", "type": "bogus"}, "type"),
    ({"sessionId": "s", "type": "progress", "todos": [{"content": "x", "status": "done"}]}, "todos[0].status"),
    ({"sessionId": "s", "type": "approval_request", "toolName": "Bash"}, "requestId"),
    ({"sessionId": "s", "type": "tool_use", "toolName": "Bash", "input": {"command": 5}}, "input.command"),
    ({"sessionId": "", "type": "task_started"}, "sessionId"),
])
def test_agent_event_invalid_params(flow, params, param):
    with pytest.raises(RPCFailure) as e:
        flow.req("agent.event", params)
    assert e.value.code == -32602 and e.value.data["param"] == param


def test_settings_and_queries_errors(flow):
    for bad, param in [({"approvalTimeoutSeconds": 0}, "approvalTimeoutSeconds"), ({"locale": "xx"}, "locale"),
                       ({"nope": True}, "nope"), ({"showNotificationDetails": "yes"}, "showNotificationDetails")]:
        with pytest.raises(RPCFailure) as e:
            flow.req("settings.update", bad)
        assert e.value.code == -32602 and e.value.data["param"] == param
    with pytest.raises(RPCFailure) as e:
        flow.req("session.get", {"sessionId": "missing"})
    assert e.value.code == -32010 and e.value.data["sessionId"] == "missing"
    with pytest.raises(RPCFailure) as e:
        flow.req("deeplink.parse", {"url": "codingbridge://nowhere"})
    assert e.value.code == -32602 and "unknown route" in e.value.data["reason"]
    r, _ = flow.req("deeplink.parse", {"url": "codingbridge://session/a%2Fb/approval/r%201"})
    assert r["sessionId"] == "a/b" and r["requestId"] == "r 1"
    r, _ = flow.req("settings.get")
    assert r["settings"] == {"enableLiveActivities": True, "enableBackgroundNotifications": True,
                             "showNotificationDetails": False, "backgroundInLowPowerMode": False,
                             "enableTimeSensitiveNotifications": True, "approvalTimeoutSeconds": 60,
                             "customRedactionRules": [], "locale": "en"}


def test_settings_timeout_and_locale_apply(flow):
    flow.req("settings.update", {"approvalTimeoutSeconds": 30, "locale": "de"})
    flow.app(phase="background")
    flow.ev("s1", "task_started")
    _, n = flow.ev("s1", "approval_request", requestId="r1", **BASH_NPM_TEST)
    assert only(n, "notification.post")[0]["title"] == "Freigabe nötig"
    _, n = flow.advance(30_000)
    assert only(n, "approval.resolved")[0]["decision"] == "timedOut"


def test_lsp_framing_flow(lsp_server):
    f = Steps(lsp_server)
    f.app(phase="background")
    f.ev("s1", "task_started")
    _, n = f.ev("s1", "approval_request", requestId="r1", **BASH_NPM_TEST)
    assert only(n, "notification.post")[0]["id"] == "approval:r1"
    r, _ = f.respond("r1", "allow")
    assert r["status"] == "accepted"


def test_metrics_record_app_side_counters(flow):
    r, _ = flow.req("metrics.record", {"metric": "notificationTapped"})
    assert r["counters"]["notificationTapped"] == 1
    r, _ = flow.req("metrics.record", {"metric": "backgroundRecoveryAttempted", "count": 4})
    r, _ = flow.req("metrics.record", {"metric": "backgroundRecoverySucceeded", "count": 3})
    assert r["recoveryRate"] == 0.75
    for bad, param in [({"metric": "notificationSent"}, "metric"), ({"metric": "notificationTapped", "count": 0}, "count")]:
        with pytest.raises(RPCFailure) as e:
            flow.req("metrics.record", bad)
        assert e.value.code == -32602 and e.value.data["param"] == param


def test_demo_runs_without_a_tty_and_shows_the_story():
    import subprocess
    from conftest import binary
    r = subprocess.run([binary(), "demo", "--instant"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert out.isascii()                                  # not a terminal: plain ASCII
    for expected in ["Live Activity started", "Notification: Approval Needed (timeSensitive, sound)",
                     "Run: NPM_TOKEN=[REDACTED] npm install jsonwebtoken@9", "[Approve] [Deny]",
                     "offers [Always allow] Bash(npm install:*)",
                     "approval.respond -> accepted", "answers 'alreadyResolved'", "4 of 4 tasks complete",
                     "Notification: Task Complete (active, sound)", "( MyApp - done - 3:44 )"]:
        assert expected in out, expected
    assert "npm_Zq8xV4mB2nK7pR1sT9wY3cD6fH0jL5gA" not in out    # the secret never reaches a screen
    r = subprocess.run([binary(), "demo", "--instant", "--private-details"], capture_output=True, timeout=60)
    assert "Claude needs permission to continue" in r.stdout.decode()
