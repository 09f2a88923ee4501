"""Continuity end to end: the real server with --state-dir, killed
with SIGKILL and restarted; offline decisions through the durable outbox;
the reconnect policy and "Connection Lost" timing on the manual clock; the
missed-notification banner across a restart. Results are validated against
rpc-spec/openrpc.json (conftest's request() does it), notifications against
their params schemas.

Clocks: `--manual-clock` starts at 2026-01-01T00:00Z on every start, so a
restart *before* an approval's deadline restarts with --manual-clock again,
and a restart *after* it starts the manual clock later (`--manual-clock-start`)."""
import pytest

from conftest import Steps, only, validate_notification, validate_result

BASH = {"toolName": "Bash", "input": {"command": "npm test"}}

LATER = "2026-01-01T02:00:00Z"  # two hours after the manual clock's default start


def start(spawn, state, at=None, device=None):
    args = ["--state-dir", state, "--manual-clock"] + (["--manual-clock-start", at] if at else [])
    c = spawn(*args, initialize=False)
    init = c.initialize(clientInfo={"name": "pytest"}, **({"deviceId": device} if device else {}))
    validate_result("initialize", init)
    return Steps(c), init["recovered"]


def kill9(c):
    c.c.kill()  # SIGKILL: no flush, no exit hooks


# --- recovery ----------------------------------------------------------------

def test_kill9_with_pending_approval_restart_after_deadline_resolves_timed_out(spawn, tmp_path):
    state = str(tmp_path / "state")
    a, rec = start(spawn, state)
    assert rec.get("restored") is False
    a.ev("s1", "task_started", prompt="fix the tests")
    a.ev("s1", "approval_request", requestId="r1", timeoutSeconds=60, **BASH)
    a.advance(1000)
    kill9(a)

    # Two hours later, far past r1's deadline.
    b, rec = start(spawn, state, at=LATER)
    assert rec["restored"] is True
    assert rec["sessions"] == 1
    assert rec["processingSessions"] == ["s1"]  # "Claude was working when the app closed"
    assert rec["expiredApprovals"] == 1
    assert rec["pendingApprovals"] == 0
    assert b.req("approval.list")[0]["approvals"] == []
    r, _ = b.req("approval.respond", {"requestId": "r1", "decision": "allow"})
    assert r["status"] == "expired" and r["resolution"] == "timedOut"
    s, _ = b.req("session.get", {"sessionId": "s1"})
    assert s["session"]["history"][-1]["kind"] == "timedOut"
    m, _ = b.req("metrics.get")
    assert m["missedApprovals"] == 1
    assert m["counters"]["backgroundRecoveryAttempted"] == 1
    assert m["recoveryRate"] == 1.0


def test_kill9_before_deadline_keeps_the_approval_and_its_timer(spawn, tmp_path):
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.req("app.update", {"phase": "background"})
    a.ev("s1", "task_started")
    a.ev("s1", "approval_request", requestId="r1", timeoutSeconds=60, **BASH)
    kill9(a)

    b, rec = start(spawn, state)  # manual clock again: back at the epoch, before the deadline
    assert rec["pendingApprovals"] == 1 and rec["expiredApprovals"] == 0
    (ap,) = b.req("approval.list")[0]["approvals"]
    assert ap["requestId"] == "r1"
    _, n = b.advance(59_999)
    assert only(n, "approval.resolved") == []
    _, n = b.advance(1)
    assert [p["decision"] for p in only(n, "approval.resolved")] == ["timedOut"]
    assert "approval:r1" in only(n, "notification.clear")[0]["ids"]


def test_settings_drafts_outbox_survive_kill9(spawn, tmp_path):
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.req("settings.update", {"locale": "de", "showNotificationDetails": True,
                              "customRedactionRules": [{"name": "host", "pattern": "internal-[a-z]+"}]})
    a.req("draft.save", {"sessionId": "s1", "text": "half a thought"})
    a.req("message.send", {"sessionId": "s1", "text": "queued while offline"})
    kill9(a)

    b, rec = start(spawn, state)
    assert rec["queuedMessages"] == 1
    assert rec["drafts"] == 1
    s, _ = b.req("settings.get")
    assert s["settings"]["locale"] == "de" and s["settings"]["showNotificationDetails"] is True
    assert s["settings"]["customRedactionRules"][0]["pattern"] == "internal-[a-z]+"
    # The recovered custom rule is live in `redact` too.
    assert "internal-db" not in b.req("redact", {"text": "ssh internal-db"})[0]["text"]
    assert b.req("draft.get", {"sessionId": "s1"})[0]["text"] == "half a thought"
    (msg,) = b.req("outbox.list")[0]["messages"]
    assert msg["payload"] == {"text": "queued while offline"}


def test_missed_notifications_banner_survives_a_restart(spawn, tmp_path):
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.req("app.update", {"phase": "background", "permissions": {"notifications": "denied"}})
    a.ev("s1", "task_started")
    _, n = a.ev("s1", "task_completed")
    a.ev("s2", "task_started")
    _, n2 = a.ev("s2", "task_failed", error="boom")
    assert only(n + n2, "notification.post") == []
    kill9(a)

    b, _ = start(spawn, state)
    _, n = b.req("app.update", {"phase": "foreground"})
    banners = [p for p in only(n, "banner.show") if p["deepLink"] == "codingbridge://settings/notifications"]
    assert len(banners) == 1
    assert banners[0]["body"].startswith("2 notifications could not be shown: Task Complete (1), Task Failed (1).")
    _, n = b.req("app.update", {"phase": "background"})
    _, n = b.req("app.update", {"phase": "foreground"})
    assert [p for p in only(n, "banner.show") if p["deepLink"] == "codingbridge://settings/notifications"] == []


# --- offline decisions -------------------------------------------------------

def test_offline_approve_then_reconnect_delivers_once_in_order(spawn, tmp_path):
    a, _ = start(spawn, str(tmp_path / "state"))
    a.ev("s1", "task_started")
    a.ev("s1", "approval_request", requestId="r1", **BASH)
    a.ev("s1", "approval_request", requestId="r2", toolName="Edit", input={"file_path": "src/app.ts"})
    a.req("connection.update", {"state": "disconnected"})

    r, n = a.req("approval.respond", {"requestId": "r2", "decision": "deny", "deviceId": "watch"})
    assert r["status"] == "queued" and r["resolution"] == "deny"
    assert any("will be sent" in b["body"] for b in only(n, "banner.show"))
    assert only(n, "approval.resolved") == []
    r, _ = a.req("approval.respond", {"requestId": "r1", "decision": "allow", "deviceId": "phone"})
    assert r["status"] == "queued"
    # A second tap while offline changes nothing.
    r, _ = a.req("approval.respond", {"requestId": "r1", "decision": "deny"})
    assert r["status"] == "alreadyResolved" and r["resolution"] == "allow"
    assert len(a.req("approval.list")[0]["approvals"]) == 2  # still open until sent
    msgs = a.req("outbox.list")[0]["messages"]
    assert [m["payload"]["requestId"] for m in msgs] == ["r2", "r1"]
    assert all(m["kind"] == "approval.respond" for m in msgs)

    a.advance(5000)
    _, n = a.req("connection.update", {"state": "connected"})
    n += a.since()
    assert [(p["requestId"], p["decision"]) for p in only(n, "approval.resolved")] == [("r2", "deny"), ("r1", "allow")]
    # Delivered in order, one at a time per session, each exactly once.
    delivered = []
    for _ in range(2):
        d = a.c.wait_notification("outbox.deliver")
        delivered.append(d["payload"]["requestId"])
        a.req("outbox.ack", {"id": d["id"]})
    assert delivered == ["r2", "r1"]
    a.advance(120_000)
    a.since()
    assert [n for n in a.c.notifications if n["method"] == "outbox.deliver"].__len__() == 2
    assert a.req("approval.list")[0]["approvals"] == []


def test_offline_approve_of_a_request_that_expires_before_reconnect(spawn, tmp_path):
    a, _ = start(spawn, str(tmp_path / "state"))
    a.req("app.update", {"phase": "background"})
    a.ev("s1", "task_started")
    a.ev("s1", "approval_request", requestId="r1", timeoutSeconds=60, **BASH)
    a.req("connection.update", {"state": "disconnected"})
    r, _ = a.req("approval.respond", {"requestId": "r1", "decision": "allow", "source": "notification"})
    assert r["status"] == "queued"
    _, n = a.advance(60_000)
    assert [p["decision"] for p in only(n, "approval.resolved")] == ["timedOut"]
    told = [p for p in only(n, "notification.post") if p["category"] == "decisionNotSent"]
    assert len(told) == 1 and told[0]["userInfo"]["requestId"] == "r1"
    _, n = a.req("connection.update", {"state": "connected"})
    a.advance(10)
    n += a.since()
    assert only(n, "outbox.deliver") == []
    assert only(n, "approval.resolved") == []
    (m,) = a.req("outbox.list", {"status": "all"})[0]["messages"]
    assert m["status"] in ("failed", "expired")


def test_offline_decision_survives_kill9_and_is_sent_after_restart(spawn, tmp_path):
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.ev("s1", "task_started")
    a.ev("s1", "approval_request", requestId="r1", timeoutSeconds=600, **BASH)
    a.req("connection.update", {"state": "disconnected"})
    assert a.req("approval.respond", {"requestId": "r1", "decision": "allow"})[0]["status"] == "queued"
    kill9(a)

    b, rec = start(spawn, state)
    assert rec["queuedDecisions"] == 1 and rec["queuedMessages"] == 1 and rec["pendingApprovals"] == 1
    _, n = b.req("connection.update", {"state": "connected"})
    n += b.since()
    assert [(p["requestId"], p["decision"]) for p in only(n, "approval.resolved")] == [("r1", "allow")]
    d = b.c.wait_notification("outbox.deliver")
    assert d["kind"] == "approval.respond" and d["payload"]["requestId"] == "r1"


def test_offline_decision_whose_request_expired_while_down_is_not_sent_and_the_user_is_told(spawn, tmp_path):
    """kill -9 with a decision queued offline; the restart comes after the
    request's deadline. The restart settles it before any client is there: the
    first client to initialize gets the notice, and nothing is delivered."""
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.req("app.update", {"phase": "background"})
    a.ev("s1", "task_started")
    a.ev("s1", "approval_request", requestId="r1", timeoutSeconds=60, **BASH)
    a.req("connection.update", {"state": "disconnected"})
    assert a.req("approval.respond", {"requestId": "r1", "decision": "allow", "source": "notification"})[0]["status"] == "queued"
    kill9(a)

    b, rec = start(spawn, state, at=LATER)
    assert rec["expiredApprovals"] == 1 and rec["pendingApprovals"] == 0
    assert rec["queuedDecisions"] == 0  # settled by the restart, not waiting
    told = validate_notification("notification.post", b.c.wait_notification(
        "notification.post", predicate=lambda p: p["category"] == "decisionNotSent"))
    assert told["userInfo"]["requestId"] == "r1"
    b.req("ping")
    assert len([n for n in b.c.notifications if n["method"] == "notification.post"
                and n["params"]["category"] == "decisionNotSent"]) == 1  # told once
    _, n = b.req("connection.update", {"state": "connected"})
    b.advance(10)
    n += b.since()
    assert only(n, "outbox.deliver") == [] and only(n, "approval.resolved") == []
    (m,) = b.req("outbox.list", {"status": "all"})[0]["messages"]
    assert m["status"] in ("failed", "expired")


# --- reconnect policy ----------------------------------------------------------

def lost(notes):
    return [p for p in only(notes, "notification.post") if p["category"] == "connectionLost"]


def test_connection_lost_at_30s_in_background_not_29_9(spawn, tmp_path):
    a, _ = start(spawn, str(tmp_path / "state"))
    a.req("app.update", {"phase": "background"})
    a.ev("s1", "task_started")
    _, n = a.req("connection.update", {"state": "disconnected"})
    assert only(n, "notification.post") == [] and only(n, "banner.show") == []
    _, n = a.advance(29_900)
    retries = only(n, "connection.retry")
    assert [r["attempt"] for r in retries] == list(range(1, len(retries) + 1)) and len(retries) >= 3
    assert lost(n) == []
    _, n = a.advance(100)
    (p,) = lost(n)
    assert p["title"] == "Connection Lost" and p["id"] == "connection-lost"
    _, n = a.advance(120_000)
    assert lost(n) == []  # once per outage
    _, n = a.req("connection.update", {"state": "connected"})
    assert ["connection-lost"] in [c["ids"] for c in only(n, "notification.clear")]
    _, n = a.advance(600_000)
    assert only(n, "connection.retry") == []


def test_foreground_is_silent_until_the_attempt_limit(spawn, tmp_path):
    a, _ = start(spawn, str(tmp_path / "state"))
    a.req("connection.update", {"state": "failed"})
    seen = []
    for _ in range(200):  # 200 s in 1 s steps
        _, n = a.advance(1000)
        seen += n
        if any(x["method"] == "banner.show" for x in n):
            break
    assert only(seen, "notification.post") == []
    banners = only(seen, "banner.show")
    assert len(banners) == 1 and banners[0]["title"] == "Connection Lost"
    i = next(k for k, x in enumerate(seen) if x["method"] == "banner.show")
    before = [x["params"]["attempt"] for x in seen[:i] if x["method"] == "connection.retry"]
    assert before == [1, 2, 3, 4, 5]
    # Each delay is the backoff with equal jitter: [nominal/2, nominal].
    for r in only(seen, "connection.retry"):
        nominal = min(60_000, 1000 * 2 ** (r["attempt"] - 1))
        assert nominal // 2 <= r["delayMs"] <= nominal


def test_retry_schedule_resumes_after_kill9(spawn, tmp_path):
    """Killed in the middle of an outage: the restarted server goes on with
    attempt 4 (not 1), and the foreground attempt limit still counts the
    attempts made before the restart: the banner comes when retry 6 is due."""
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.req("connection.update", {"state": "disconnected"})
    seen = []
    while len(only(seen, "connection.retry")) < 3:
        seen += a.advance(500)[1]
    assert [r["attempt"] for r in only(seen, "connection.retry")] == [1, 2, 3]
    # app.update answers only once its snapshot (which holds retry 3) is committed.
    a.req("app.update", {"phase": "foreground"})
    kill9(a)

    b, _ = start(spawn, state)  # manual clock: back at the epoch, before retry 4 was due
    seen = []
    for _ in range(200):
        _, n = b.advance(1000)
        seen += n
        if only(n, "banner.show"):
            break
    retries = [r["attempt"] for r in only(seen, "connection.retry")]
    assert retries == [4, 5, 6]
    (banner,) = only(seen, "banner.show")
    assert banner["title"] == "Connection Lost"
    assert only(seen, "notification.post") == []


def test_session_handoff_event_ends_the_live_activity_and_tells_the_person_away(spawn, tmp_path):
    """EDGE-CASES "Session Handoff": the agent says the session moved."""
    a, _ = start(spawn, str(tmp_path / "state"), device="iphone")
    a.req("app.update", {"phase": "background"})
    _, n = a.ev("s1", "task_started", prompt="fix the tests")
    (started,) = only(n, "activity.start")
    assert started["device"] == "iphone"
    _, n = a.ev("s1", "session_handoff", handedOffTo="laptop")
    (end,) = only(n, "activity.end")
    assert end["sessionId"] == "s1" and end["message"] == "Session continued on another device"
    assert end["device"] == "iphone"
    (post,) = only(n, "notification.post")
    assert post["category"] == "sessionHandoff" and post["interruptionLevel"] == "passive"
    assert post["userInfo"]["handedOffTo"] == "laptop"
    s = a.req("session.get", {"sessionId": "s1"})[0]["session"]
    assert s["activeDevice"] == "laptop" and s["message"] == "Session continued on another device"
    assert s["status"] != "processing"  # it runs elsewhere now
    assert a.req("activity.get")[0]["activity"] is None


# --- metrics -----------------------------------------------------------------------

def test_notification_latency_is_measured_and_survives_kill9(spawn, tmp_path):
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.req("app.update", {"phase": "background"})
    now = a.advance(0)[0]["wallClockMs"]
    a.ev("s1", "task_started", sentAt=now - 300)
    _, n = a.ev("s1", "approval_request", requestId="r1", sentAt=now - 1200, **BASH)
    assert len(only(n, "notification.post")) == 1
    _, n = a.ev("s2", "task_started", sentAt=now - 100)
    lat = a.req("metrics.get")[0]["notificationLatencyMs"]
    assert lat["count"] >= 1 and lat["max"] == 1200
    kill9(a)  # agent.event answers after its snapshot is committed

    b, _ = start(spawn, state)
    assert b.req("metrics.get")[0]["notificationLatencyMs"] == lat


# --- background limits -----------------------------------------------------------

def test_background_expiry_posts_task_paused_and_the_checkpoint_survives_kill9(spawn, tmp_path):
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.ev("s1", "task_started", prompt="refactor the parser")
    a.ev("s1", "tool_use", toolName="Bash", input={"command": "npm test"})
    a.req("app.update", {"phase": "background"})
    _, n = a.req("app.update", {"backgroundTimeExpired": True})
    (p,) = only(n, "notification.post")
    assert p["title"] == "Task Paused" and p["category"] == "taskPaused"
    (upd,) = only(n, "activity.update")
    assert "Paused - open app to continue" in upd["rendered"]["lockScreen"]
    kill9(a)  # app.update answered after its checkpoint was committed

    b, rec = start(spawn, state)
    assert rec["processingSessions"] == ["s1"]
    s = b.req("session.get", {"sessionId": "s1"})[0]["session"]
    assert s["status"] == "processing" and s["operation"] == "Running tests"
    assert s["message"] == "Paused - open app to continue"  # the checkpoint, not just the state before it
    shown = b.req("activity.get")[0]["activity"]
    assert shown["sessionId"] == "s1" and "Paused - open app to continue" in shown["rendered"]["lockScreen"]
    m = b.req("metrics.get")[0]
    assert m["counters"]["backgroundTaskExpired"] == 1


def test_low_power_in_background_ends_extended_work_once(spawn, tmp_path):
    a, _ = start(spawn, str(tmp_path / "state"))
    a.ev("s1", "task_started")
    a.req("app.update", {"phase": "background"})
    _, n = a.req("app.update", {"lowPowerMode": True})
    assert only(n, "background.end") == [{"reason": "lowPowerMode", "sessionId": "s1"}]
    (p,) = only(n, "notification.post")
    assert p["title"] == "Low Power Mode" and p["category"] == "lowPowerMode"
    _, n = a.req("app.update", {"lowPowerMode": True})
    assert only(n, "background.end") == [] and only(n, "notification.post") == []
    # A new episode (off, then on again) is told again; with the setting on, never.
    a.req("app.update", {"lowPowerMode": False})
    _, n = a.req("app.update", {"lowPowerMode": True})
    assert len(only(n, "background.end")) == 1
    a.req("app.update", {"lowPowerMode": False})
    a.req("settings.update", {"backgroundInLowPowerMode": True})
    _, n = a.req("app.update", {"lowPowerMode": True})
    assert only(n, "background.end") == [] and only(n, "notification.post") == []


def test_task_over_an_hour_ends_the_live_activity_and_reminds(spawn, tmp_path):
    a, _ = start(spawn, str(tmp_path / "state"))
    a.req("app.update", {"phase": "background"})
    _, n = a.ev("s1", "task_started", prompt="migrate the database")
    assert len(only(n, "activity.start")) == 1
    _, n = a.advance(3_599_999)
    assert only(n, "activity.end") == [] and only(n, "notification.post") == []
    _, n = a.advance(1)
    assert len(only(n, "activity.end")) == 1
    (p,) = only(n, "notification.post")
    assert p["title"] == "Claude is still working" and p["category"] == "longTask"
    _, n = a.advance(3_600_000)  # periodic: another reminder an hour later
    assert [x["title"] for x in only(n, "notification.post")] == ["Claude is still working"]
    _, n = a.ev("s1", "tool_use", toolName="Read", input={"file_path": "a.py"})
    assert only(n, "activity.start") == []  # no Live Activity again for this long task


def test_finished_sessions_are_forgotten_after_a_week(spawn, tmp_path):
    state = str(tmp_path / "state")
    a, _ = start(spawn, state)
    a.ev("old", "task_started")
    a.ev("old", "task_completed", summary="done")
    a.ev("busy", "task_started")
    week = 7 * 24 * 3_600_000
    a.advance(week - 3_600_000)
    assert {s["id"] for s in a.req("session.list")[0]["sessions"]} == {"old", "busy"}
    a.advance(2 * 3_600_000)
    assert [s["id"] for s in a.req("session.list")[0]["sessions"]] == ["busy"]
    with pytest.raises(Exception) as e:
        a.c.request("session.get", {"sessionId": "old"})
    assert e.value.code == -32010
    a.req("app.update", {"phase": "foreground"})  # answered after the turn's commit
    kill9(a)

    b, rec = start(spawn, state)
    assert rec["sessions"] == 1  # the forgotten one's document is gone too
    assert [s["id"] for s in b.req("session.list")[0]["sessions"]] == ["busy"]
