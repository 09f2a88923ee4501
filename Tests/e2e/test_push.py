"""Pushes to devices that are away (issue: reach a locked phone): the real
daemon against a local APNs server that checks what Apple checks
(apnsserver.py) and a local Web Push service that checks VAPID and decrypts
(webpushserver.py). The daemon runs on a manual clock that starts now; both
services judge token ages by that clock."""
import os
import signal
import subprocess
import time

import pytest

from apnsserver import APNsServer
from conftest import Client, Steps, only, validate_notification
from rpcclient import SocketClient
from webpushserver import WebPushService

TOPIC = "com.example.codingbridge"
TOKEN_A = "a1" * 32
TOKEN_B = "b2" * 32
LIVE = "c3" * 32
START = "d4" * 32
BASH = {"toolName": "Bash", "input": {"command": "npm test"}}


class Harness:
    """The daemon (stdio: the agent side and the clock), its unix socket for
    the phones, the APNs server and the Web Push service."""

    def __init__(self, state_dir, sock, apns=None, webpush=None):
        self.state_dir, self.sock = state_dir, sock
        self.start_ms = int(time.time() * 1000)
        self.advanced_ms = 0
        self.apns = apns or APNsServer(bundle_id=TOPIC, clock=self.now_s)
        self.webpush = webpush or WebPushService()
        self.phones = []
        self.agent = None
        self.launch()

    def now_s(self):
        return (self.start_ms + self.advanced_ms) / 1000

    def args(self):
        return ["serve", "--state-dir", self.state_dir, "--listen", "unix:" + self.sock, "--manual-clock",
                "--manual-clock-start", str(self.start_ms + self.advanced_ms), "--log-level", "debug",
                "--apns-key", self.apns.key_file, "--apns-key-id", self.apns.key_id, "--apns-team-id",
                self.apns.team_id, "--apns-topic", TOPIC, "--apns-endpoint", self.apns.url, "--apns-ca",
                self.apns.ca_file, "--vapid-subject", "mailto:ops@codingbridge.example"]

    def launch(self):
        self.agent = Client(self.args()[1:])
        self.agent.initialize(deviceId="agent-host")
        self.steps = Steps(self.agent)

    def phone(self, device, background=True, **register):
        p = SocketClient(self.sock)
        p.initialize(deviceId=device)
        self.phones.append(p)
        if register:
            p.request("push.register", register)
        if background:
            p.request("app.update", {"phase": "background"})
        return p

    def ev(self, sid, type_, **kw):
        return self.steps.ev(sid, type_, **kw)

    def advance(self, ms):
        self.advanced_ms += ms
        return self.steps.advance(ms)

    def kill9(self):
        self.agent.proc.send_signal(signal.SIGKILL)
        self.agent.proc.wait(10)
        for p in self.phones:
            p.close()
        self.phones = []

    def close(self):
        for p in self.phones:
            p.close()
        self.agent.kill()
        self.apns.stop()
        self.webpush.close()


@pytest.fixture
def h(sockdir):
    h = Harness(sockdir, os.path.join(sockdir, "s"))
    yield h
    h.close()


def alerts(h, token=TOKEN_A):
    return [r for r in h.apns.accepted() if r.token == token and r.headers.get("apns-push-type") == "alert"]


def metric(h, pred, timeout=5):
    """push metrics once pred holds (a 200 is counted when the daemon reads it, after the server sent it)."""
    deadline = time.time() + timeout
    while True:
        m = h.agent.request("metrics.get")["push"]
        if pred(m) or time.time() > deadline:
            return m
        time.sleep(0.02)


def wait_apns(h, pred, timeout=5):
    return h.apns.wait_for(lambda reqs: [r for r in reqs if r.accepted and pred(r)] or None, timeout=timeout)


def test_an_approval_reaches_a_phone_in_background_as_a_time_sensitive_apns_alert(h):
    h.phone("iphone", platform="apns", kind="alert", token=TOKEN_A, environment="sandbox")
    h.ev("s1", "task_started", prompt="fix the tests")
    _, notes = h.ev("s1", "approval_request", requestId="r1", **BASH)
    posted = only(notes, "notification.post")
    assert posted, notes
    r = wait_apns(h, lambda r: r.payload["aps"].get("category") == "APPROVAL")[0]
    aps = r.payload["aps"]
    assert r.headers["apns-push-type"] == "alert" and r.headers["apns-priority"] == "10"
    assert r.headers["apns-topic"] == TOPIC
    assert r.headers["apns-collapse-id"] == posted[0]["id"]
    assert aps["interruption-level"] == "time-sensitive" and aps["relevance-score"] == 1
    assert aps["thread-id"] == "s1" and aps["badge"] == 1 and aps["sound"] == "default"
    assert aps["alert"]["title"] == posted[0]["title"] and aps["alert"]["body"] == posted[0]["body"]
    assert r.payload["deepLink"] == posted[0]["deepLink"]
    assert r.jwt["iss"] == h.apns.team_id  # the server also verified the ES256 signature and kid
    m = metric(h, lambda m: m["apns"]["sent"] == 1)["apns"]
    assert m["sent"] == 1 and m["latencyMs"]["count"] == 1


def test_nothing_is_pushed_to_a_phone_connected_in_the_foreground(h):
    phone = h.phone("iphone", background=False, platform="apns", token=TOKEN_A)
    h.ev("s1", "task_started")
    h.ev("s1", "approval_request", requestId="r1", **BASH)
    h.ev("s1", "task_completed", summary="done")
    phone.request("ping")
    time.sleep(0.3)
    assert h.apns.requests == []


def test_a_disconnected_phone_gets_pushes_and_no_secret_reaches_apple(h):
    secret = "AKIA" + "QWERTYUIOPASDFGH"
    phone = h.phone("iphone", background=False, platform="apns", token=TOKEN_A)
    phone.close()
    h.phones.remove(phone)
    h.agent.request("settings.update", {"showNotificationDetails": True})
    h.ev("s1", "task_started")
    h.ev("s1", "approval_request", requestId="r1", toolName="Bash",
         input={"command": f"AWS_ACCESS_KEY_ID={secret} aws s3 ls"})
    r = wait_apns(h, lambda r: r.payload["aps"].get("category") == "APPROVAL")[0]
    assert secret not in r.body.decode()
    assert "aws s3 ls" in r.payload["aps"]["alert"]["body"]


def test_a_decision_on_one_device_clears_the_notification_on_the_other(h):
    h.phone("iphone", platform="apns", token=TOKEN_A)
    ipad = h.phone("ipad", background=False)
    h.ev("s1", "task_started")
    _, notes = h.ev("s1", "approval_request", requestId="r1", **BASH)
    nid = only(notes, "notification.post")[0]["id"]
    wait_apns(h, lambda r: r.headers["apns-push-type"] == "alert")
    answer = {"requestId": "r1", "decision": "allow", "source": "notification"}
    assert ipad.request("approval.respond", answer)["status"] == "accepted"
    r = wait_apns(h, lambda r: r.headers["apns-push-type"] == "background")[0]
    assert r.headers["apns-priority"] == "5" and r.payload["aps"] == {"content-available": 1}
    assert nid in r.payload["clear"]


def test_live_activity_progress_is_coalesced_and_the_latest_state_goes_last(h):
    phone = h.phone("iphone")
    h.ev("s1", "task_started")
    phone.request("push.register", {"platform": "apns", "kind": "liveActivity", "token": LIVE, "activityId": "s1"})
    todos = lambda done: [{"content": f"step {i}", "status": "completed" if i < done else "pending",
                           "activeForm": f"Doing step {i}"} for i in range(5)]
    for done in range(1, 5):
        h.ev("s1", "progress", todos=todos(done))
    first = wait_apns(h, lambda r: r.token == LIVE)
    time.sleep(0.3)
    live = [r for r in h.apns.accepted() if r.token == LIVE]
    assert len(live) == 1, "progress within 5 s is coalesced"
    assert live[0].headers["apns-topic"] == TOPIC + ".push-type.liveactivity"
    assert live[0].headers["apns-push-type"] == "liveactivity" and live[0].headers["apns-priority"] == "5"
    assert live[0].payload["aps"]["event"] == "update"
    h.advance(5000)
    latest = wait_apns(h, lambda r: r.token == LIVE and r.payload["aps"]["content-state"]["progress"]["completed"] == 4)
    assert latest and first
    _, _ = h.ev("s1", "approval_request", requestId="r1", **BASH)
    urgent = wait_apns(h, lambda r: r.token == LIVE and r.headers["apns-priority"] == "10")[0]
    assert urgent.payload["aps"]["content-state"]["status"] == "awaitingApproval"
    h.agent.request("approval.respond", {"requestId": "r1", "decision": "allow"})
    h.ev("s1", "task_completed", summary="all green")
    end = wait_apns(h, lambda r: r.token == LIVE and r.payload["aps"]["event"] == "end")[0]
    urgent_states = ("awaitingApproval", "awaitingAnswer", "awaitingInput", "completed", "error")
    assert "dismissal-date" in end.payload["aps"]
    assert end.headers["apns-priority"] == ("10" if end.payload["aps"]["content-state"]["status"] in urgent_states else "5")
    n = len([r for r in h.apns.requests if r.token == LIVE])
    h.ev("s2", "task_started")
    h.ev("s1", "task_started")
    time.sleep(0.3)
    assert len([r for r in h.apns.requests if r.token == LIVE]) == n, "an ended activity's token gets nothing more"
    reg = [x for x in h.agent.request("device.list")["localPush"] if x["kind"] == "liveActivity"][0]
    assert reg["ended"] is True


def test_push_to_start_starts_a_live_activity_when_no_activity_token_exists(h):
    h.phone("iphone", platform="apns", kind="pushToStart", token=START)
    h.ev("s1", "task_started", projectName="payments")
    r = wait_apns(h, lambda r: r.token == START)[0]
    aps = r.payload["aps"]
    assert aps["event"] == "start" and aps["attributes-type"] == "CodingBridgeAttributes"
    assert aps["attributes"]["sessionId"] == "s1" and aps["alert"]["title"] == "payments"
    assert r.headers["apns-topic"] == TOPIC + ".push-type.liveactivity"


def test_an_unregistered_token_is_removed_and_the_device_told_when_it_next_connects(h):
    h.apns.script(TOKEN_A, [(410, "Unregistered")])
    phone = h.phone("iphone", platform="apns", token=TOKEN_A)
    phone.close()
    h.phones.remove(phone)
    h.ev("s1", "task_started")
    h.ev("s1", "approval_request", requestId="r1", **BASH)
    h.apns.wait_for(lambda reqs: [r for r in reqs if r.status == 410] or None)
    deadline = time.time() + 5
    while h.agent.request("device.list")["localPush"] and time.time() < deadline:
        time.sleep(0.05)
    assert h.agent.request("device.list")["localPush"] == []
    again = h.phone("iphone", background=False)
    note = again.wait_notification("push.unregistered")
    validate_notification("push.unregistered", note)
    assert note["reason"] == "Unregistered" and note["platform"] == "apns"
    assert metric(h, lambda m: m["apns"]["failed"] == 1)["apns"]["failed"] == 1


def test_an_expired_provider_token_gets_a_new_jwt_and_one_retry(h):
    h.apns.script(TOKEN_A, [(403, "ExpiredProviderToken")])
    h.phone("iphone", platform="apns", token=TOKEN_A)
    h.ev("s1", "task_started")
    h.ev("s1", "approval_request", requestId="r1", **BASH)
    wait_apns(h, lambda r: True)
    reqs = [r for r in h.apns.requests if r.token == TOKEN_A]
    assert [r.status for r in reqs] == [403, 200]
    assert reqs[0].headers["authorization"] != reqs[1].headers["authorization"]
    assert reqs[0].headers["apns-id"] == reqs[1].headers["apns-id"]


def test_429_and_5xx_are_retried_with_backoff_and_one_jwt_serves_every_push(h):
    h.apns.script(TOKEN_A, [(429, "TooManyRequests"), (500, "InternalServerError")])
    h.phone("iphone", platform="apns", token=TOKEN_A)
    h.ev("s1", "task_started")
    h.ev("s1", "approval_request", requestId="r1", **BASH)
    for k in (1, 2):
        # The retry is timed from when the daemon read the answer: wait for that, then let time pass.
        assert metric(h, lambda m: m["apns"]["retried"] == k)["apns"]["retried"] == k
        h.advance(60_000)
    wait_apns(h, lambda r: True)
    for sid in ("s2", "s3", "s4"):
        h.ev(sid, "task_started")
        h.ev(sid, "task_completed", summary="ok")
    h.apns.wait_for(lambda reqs: len([r for r in reqs if r.accepted]) >= 4)
    assert len({r.headers["authorization"] for r in h.apns.requests}) == 1, "one JWT per refresh, not per push"
    assert h.apns.connections == 1
    m = metric(h, lambda m: m["apns"]["sent"] >= 4)["apns"]
    assert m["retried"] == 2 and m["sent"] >= 4


def test_the_provider_token_is_renewed_after_thirty_minutes_of_server_time(h):
    h.phone("iphone", platform="apns", token=TOKEN_A)
    h.ev("s1", "task_started")
    h.ev("s1", "task_completed")
    wait_apns(h, lambda r: True)
    h.advance(31 * 60_000)
    h.ev("s2", "task_started")
    h.ev("s2", "task_completed")
    h.apns.wait_for(lambda reqs: len([r for r in reqs if r.accepted]) >= 2)
    iats = [r.jwt["iat"] for r in h.apns.accepted()]
    assert iats[1] - iats[0] >= 31 * 60


def test_a_long_task_sends_reminder_pushes(h):
    h.phone("iphone", platform="apns", token=TOKEN_A)
    h.ev("s1", "task_started")
    h.advance(3_600_000 + 1000)
    r = wait_apns(h, lambda r: r.payload["aps"].get("category") == "LONG_TASK")[0]
    assert r.payload["aps"]["thread-id"] == "s1"


def test_web_push_is_encrypted_vapid_signed_and_decrypts_to_the_notification(h):
    sub = h.webpush.subscription("browser")
    key = h.agent.request("push.vapidPublicKey")
    assert key["enabled"] is True
    h.phone("browser", platform="webpush", subscription=sub)
    h.ev("s1", "task_started")
    _, notes = h.ev("s1", "approval_request", requestId="r1", **BASH)
    m = h.webpush.wait_for(lambda m: m["plaintext"]["method"] == "notification.post")
    posted = only(notes, "notification.post")[0]
    assert m["plaintext"]["params"] == posted
    assert m["headers"]["urgency"] == "high" and int(m["headers"]["ttl"]) > 0
    assert f"k={key['publicKey']}" in m["headers"]["authorization"]
    assert m["claims"]["sub"] == "mailto:ops@codingbridge.example"


def test_a_gone_web_push_subscription_is_removed(h):
    sub = h.webpush.subscription("browser")
    h.webpush.script("browser", [410])
    h.phone("browser", platform="webpush", subscription=sub)
    h.ev("s1", "task_started")
    h.ev("s1", "approval_request", requestId="r1", **BASH)
    deadline = time.time() + 5
    while h.agent.request("device.list")["localPush"] and time.time() < deadline:
        time.sleep(0.05)
    assert h.agent.request("device.list")["localPush"] == []


def test_bad_registrations_get_a_clear_error(h):
    from conftest import RPCFailure
    phone = h.phone("iphone", background=False)
    bad = [
        {"platform": "apns", "token": "zz" * 32},
        {"platform": "apns", "token": "ab" * 10},
        {"platform": "apns", "kind": "liveActivity", "token": TOKEN_A},
        {"platform": "webpush", "subscription": {"endpoint": "http://push.example.com/x",
                                                  "keys": {"p256dh": "AAAA", "auth": "AAAA"}}},
        {"platform": "webpush", "subscription": {"endpoint": "https://push.example.com/x",
                                                  "keys": {"p256dh": "AAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}},
        {"platform": "webpush", "subscription": {"endpoint": "http://localhost.attacker.example/push",
                                                  "keys": {"p256dh": "AAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}},
        {"platform": "fcm", "token": TOKEN_A},
    ]
    for params in bad:
        with pytest.raises(RPCFailure) as e:
            phone.request("push.register", params)
        assert e.value.code == -32602, params
    assert phone.request("ping") == {}


def test_pushes_survive_kill_9_and_none_is_sent_twice_after_its_200(h):
    """The service is stalled: pushes wait in the durable queue; kill -9; the
    restarted daemon sends each once. Then the same with half answered before
    the kill: those are never sent again."""
    h.phone("iphone", platform="apns", token=TOKEN_A)
    h.apns.script(TOKEN_A, [(200, "")] * 10 + ["stall"] * 30)
    for i in range(40):
        h.ev(f"s{i}", "task_started")
        h.ev(f"s{i}", "task_completed", summary="ok")
    h.apns.wait_for(lambda reqs: len(reqs) >= 40, timeout=10)
    # The 200s were read (and their pushes' removal committed in the same turn).
    assert metric(h, lambda m: m["apns"]["sent"] == 10)["apns"]["sent"] == 10
    answered = {r.headers["apns-id"] for r in h.apns.accepted()}
    assert len(answered) == 10
    h.kill9()
    h.launch()
    h.apns.wait_for(lambda reqs: len([r for r in reqs if r.accepted]) >= 40, timeout=15)
    time.sleep(0.3)
    ok = [r.headers["apns-id"] for r in h.apns.accepted()]
    assert len(ok) == 40 and len(set(ok)) == 40, "every push delivered exactly once"
    assert not answered & {r.headers["apns-id"] for r in h.apns.accepted()[10:]}


def test_apns_settings_may_come_from_push_json_in_the_state_directory(h):
    import json
    h.agent.kill()
    with open(os.path.join(h.state_dir, "push.json"), "w") as f:
        json.dump({"apnsKey": h.apns.key_file, "apnsKeyId": h.apns.key_id, "apnsTeamId": h.apns.team_id,
                   "apnsTopic": TOPIC, "apnsEndpoint": h.apns.url, "apnsCA": h.apns.ca_file}, f)
    args = [a for a in h.args()[1:] if True]
    cut = args.index("--apns-key")
    h.agent = Client(args[:cut])
    h.agent.initialize(deviceId="agent-host")
    h.steps = Steps(h.agent)
    h.phone("iphone", platform="apns", token=TOKEN_A)
    h.ev("s1", "task_started")
    h.ev("s1", "approval_request", requestId="r1", **BASH)
    assert wait_apns(h, lambda r: r.payload["aps"].get("category") == "APPROVAL")


@pytest.mark.parametrize("extra, message", [
    (["--apns-key", "/nonexistent.p8", "--apns-key-id", "K", "--apns-team-id", "T", "--apns-topic", "x"],
     "--apns-key /nonexistent.p8: No such file or directory"),
    (["--apns-key", "/etc/hostname", "--apns-key-id", "K", "--apns-team-id", "T", "--apns-topic", "x"],
     "--apns-key /etc/hostname:"),
    (["--apns-key", "/etc/hostname"], "APNs needs all four"),
    (["--vapid-subject", "mailto:"], "--vapid-subject 'mailto:' must be"),
    (["--push-coalesce", "-1"], "--push-coalesce -1 is out of range"),
])
def test_bad_push_settings_stop_serve_with_a_clear_message(extra, message, sockdir):
    from conftest import binary
    p = subprocess.run([binary(), "serve", "--state-dir", sockdir, *extra], input=b"", capture_output=True, timeout=30)
    assert p.returncode in (2, 64), p.stderr  # 64: the options are wrong; 2: serving could not start
    assert message in p.stderr.decode(), p.stderr.decode()


def test_an_activity_token_gets_updates_never_a_start_and_a_late_retry_never_lands_after_the_end(h):
    phone = h.phone("iphone")
    h.ev("s1", "task_started")
    phone.request("push.register", {"platform": "apns", "kind": "liveActivity", "token": LIVE, "activityId": "s1"})
    h.apns.script(LIVE, [(429, "TooManyRequests")])
    h.ev("s1", "approval_request", requestId="r1", **BASH)
    metric(h, lambda m: m["apns"]["retried"] == 1)
    h.agent.request("approval.respond", {"requestId": "r1", "decision": "deny"})
    h.ev("s1", "task_started")          # the same session starts again: an update, not a start
    wait_apns(h, lambda r: r.token == LIVE)
    h.ev("s1", "task_completed", summary="done")
    wait_apns(h, lambda r: r.token == LIVE and r.payload["aps"]["event"] == "end")
    h.advance(300_000)                  # the 429'd update's retry time passes
    time.sleep(0.3)
    live = [r for r in h.apns.requests if r.token == LIVE]
    assert all(r.payload["aps"]["event"] != "start" for r in live)
    assert live[-1].payload["aps"]["event"] == "end", [(r.status, r.payload["aps"]["event"]) for r in live]


def test_an_expired_provider_token_is_replaced_once_for_all_pushes_in_flight(h):
    tokens = ["%02x" % i * 32 for i in range(6)]
    for i, t in enumerate(tokens):
        h.apns.script(t, [(403, "ExpiredProviderToken")])
        h.phone(f"phone{i}", platform="apns", token=t)
    h.ev("s1", "task_started")
    h.ev("s1", "approval_request", requestId="r1", **BASH)
    h.apns.wait_for(lambda reqs: len([r for r in reqs if r.accepted]) >= 6)
    assert len({r.headers["authorization"] for r in h.apns.requests}) == 2
