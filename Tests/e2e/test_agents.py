"""Real agent inputs through the real server: every case in Tests/e2e/agents/
(Claude Code hook inputs, stream-json lines, claudecodeui frames, written by
us from the published formats) is sent to its adapter method on a fresh
`serve --ephemeral --manual-clock`, and the engine effect is checked: the
result (validated against rpc-spec/openrpc.json), the session afterwards
(session.get), and for PermissionRequest the decision after approval.respond.

Case file: {"method", "before": [{method, params}], "input", "expect": {
  status, events, sessionStatus, ignoredContains, session: {subset of session.get},
  error: {code, param, got}, respond: {decision, deviceId}, decision, by, hookOutput}}
The same files drive the Swift unit tests (Tests/BridgeRPCTests/AgentsTests.swift).
"""
import glob
import json
import os

import pytest

from conftest import RPCFailure, validate_result

CASES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "agents", "*.json")))


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_cases_cover_every_event_kind():
    """Every hook event, stream-json type and claudecodeui frame we map has a case."""
    seen = {"agent.hook": set(), "agent.streamJson": set(), "agent.claudecodeui": set()}
    for p in CASES:
        c = load(p)
        i = c["input"]
        kind = i.get("hook_event_name") or i.get("type") or i.get("kind")
        seen[c["method"]].add(kind)
    hooks = {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest", "Notification",
             "Stop", "SubagentStop", "SessionEnd"}
    assert hooks <= seen["agent.hook"], hooks - seen["agent.hook"]
    assert {"system", "assistant", "user", "result"} <= seen["agent.streamJson"]
    frames = {"session-created", "claude-permission-request", "claude-permission-cancelled", "claude-complete",
              "claude-error", "claude-response", "permission_request", "permission_cancelled", "complete", "error",
              "tool_use", "session_created"}
    assert frames <= seen["agent.claudecodeui"], frames - seen["agent.claudecodeui"]


def session_id(c):
    i = c["input"]
    return i.get("session_id") or i.get("sessionId") or i.get("newSessionId")


def check_result(c, r):
    e = c["expect"]
    validate_result(c["method"], r)
    assert r["status"] == e["status"], r
    assert r["events"] == e["events"], r
    if "sessionStatus" in e:
        assert r["sessionStatus"] == e["sessionStatus"], r
    if "ignoredContains" in e:
        assert any(e["ignoredContains"] in why for why in r["ignored"]), r
    if r["status"] == "ignored":
        assert r["ignored"], "an ignored message says why"


@pytest.mark.parametrize("path", CASES, ids=[os.path.basename(p)[:-5] for p in CASES])
def test_case(spawn, path):
    c = load(path)
    e = c["expect"]
    # One client here both asks (as the hook) and answers (as the phone):
    # nobody else is connected, so the approvals wait only on request.
    waits = "respond" in e or any(b.get("async") for b in c.get("before", []))
    s = spawn("--ephemeral", "--manual-clock", *(["--always-wait-for-approval"] if waits else []))
    stash = {}  # replies that arrived while waiting for another id
    waiting = []
    for i, b in enumerate(c.get("before", [])):
        if b.get("async"):
            # A call that stays open (a hook waiting for a decision).
            waiting.append(f"before-{i}")
            s.send({"jsonrpc": "2.0", "id": f"before-{i}", "method": b["method"], "params": b["params"]})
            s.request("approval.list")  # it has been applied once this answers
        else:
            s.request(b["method"], b["params"])
    if waiting:
        s.send({"jsonrpc": "2.0", "id": "main", "method": c["method"], "params": c["input"]})
        while "main" not in stash:
            m = s.recv()
            stash[m["id"]] = m
        r = stash["main"]["result"]
        check_result(c, r)
        for i, d in zip(waiting, e["asyncDecisions"]):
            while i not in stash:
                m = s.recv()
                stash[m["id"]] = m
            validate_result(c["method"], stash[i]["result"])
            assert stash[i]["result"]["decision"] == d, stash[i]
        return

    if "error" in e:
        with pytest.raises(RPCFailure) as err:
            s.request(c["method"], c["input"])
        assert err.value.code == e["error"]["code"]
        assert err.value.data["param"] == e["error"]["param"], err.value.data
        if "got" in e["error"]:
            assert err.value.data["got"] == e["error"]["got"], err.value.data
        assert s.request("ping") == {}  # the server keeps serving
        return

    if "respond" in e:
        # The hook's call stays open until someone decides.
        s.send({"jsonrpc": "2.0", "id": "hook", "method": c["method"], "params": c["input"]})
        pending = s.request("approval.list", {"sessionId": session_id(c)})["approvals"]
        assert len(pending) == 1, pending
        s.expect_silence(0.2)
        s.send({"jsonrpc": "2.0", "id": "respond", "method": "approval.respond",
                "params": {"requestId": pending[0]["requestId"], **e["respond"]}})
        replies = {}
        for _ in range(2):
            m = s.recv()
            replies[m["id"]] = m
        assert replies["respond"]["result"]["status"] == "accepted"
        r = replies["hook"]["result"]
        check_result(c, r)
        assert r["requestId"] == pending[0]["requestId"]
        assert r["decision"] == e["decision"] and r["by"] == e["by"], r
        assert r["hookOutput"] == e["hookOutput"], r
        return

    r = s.request(c["method"], c["input"])
    check_result(c, r)
    for k in ("decision", "hookOutput"):
        if k in e:
            assert r[k] == e[k], r
    if "session" in e:
        got = s.request("session.get", {"sessionId": r["sessionId"]})["session"]
        for k, v in e["session"].items():
            if isinstance(v, dict):
                assert {kk: got[k][kk] for kk in v} == v, (k, got[k])
            else:
                assert got[k] == v, (k, got[k])


def test_not_an_object_is_invalid_params(server):
    for method in ("agent.hook", "agent.streamJson", "agent.claudecodeui"):
        r = server.call(method, ["not", "an", "object"])
        assert r["error"]["code"] == -32602, r
    assert server.request("ping") == {}


def test_permission_request_times_out_on_the_engine_clock(spawn):
    """No answer: the engine's approval timeout resolves the hook call with
    decision timeout and no output (Claude Code then asks itself)."""
    s = spawn("--ephemeral", "--manual-clock", "--always-wait-for-approval")
    s.request("agent.hook", {"session_id": "s-t", "cwd": "/w/p", "hook_event_name": "UserPromptSubmit", "prompt": "go"})
    s.send({"jsonrpc": "2.0", "id": "hook", "method": "agent.hook",
            "params": {"session_id": "s-t", "cwd": "/w/p", "hook_event_name": "PermissionRequest",
                       "tool_name": "Bash", "tool_input": {"command": "make deploy"}, "timeoutSeconds": 30}})
    a = s.request("approval.list", {"sessionId": "s-t"})["approvals"][0]
    assert a["expiresAt"] - a["createdAt"] == 30_000  # min(timeoutSeconds, settings' 60 s)
    s.send({"jsonrpc": "2.0", "id": "tick", "method": "debug.advanceClock", "params": {"ms": 29_999}})
    assert s.recv()["id"] == "tick"
    s.expect_silence(0.2)
    s.send({"jsonrpc": "2.0", "id": "tick2", "method": "debug.advanceClock", "params": {"ms": 1}})
    replies = {}
    for _ in range(2):
        m = s.recv()
        replies[m["id"]] = m
    r = replies["hook"]["result"]
    validate_result("agent.hook", r)
    assert r["decision"] == "timeout" and r["hookOutput"] is None, r
    # A late tap on the phone is told it expired.
    late = s.request("approval.respond", {"requestId": a["requestId"], "decision": "allow"})
    assert late["status"] == "expired"


def test_permission_request_cancelled_when_the_turn_stops(spawn):
    """Stop while the hook waits (the person answered in the terminal and
    Claude finished): the hook call ends with decision cancelled."""
    s = spawn("--ephemeral", "--manual-clock", "--always-wait-for-approval")
    base = {"session_id": "s-c", "cwd": "/w/p"}
    s.request("agent.hook", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go"})
    s.send({"jsonrpc": "2.0", "id": "hook", "method": "agent.hook",
            "params": {**base, "hook_event_name": "PermissionRequest", "tool_name": "Edit",
                       "tool_input": {"file_path": "/w/p/a.txt"}}})
    s.request("approval.list")
    s.send({"jsonrpc": "2.0", "id": "stop", "method": "agent.hook", "params": {**base, "hook_event_name": "Stop"}})
    replies = {}
    for _ in range(2):
        m = s.recv()
        replies[m["id"]] = m
    assert replies["hook"]["result"]["decision"] == "cancelled"
    assert replies["hook"]["result"]["hookOutput"] is None
    assert replies["stop"]["result"]["sessionStatus"] == "completed"


def test_timeout_seconds_out_of_range(server):
    with pytest.raises(RPCFailure) as err:
        server.request("agent.hook", {"session_id": "s", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
                                      "tool_input": {}, "timeoutSeconds": 0})
    assert err.value.code == -32602 and err.value.data["param"] == "timeoutSeconds"
