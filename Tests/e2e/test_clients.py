"""The client modules (clients/python, clients/js) against the real binary.

Their helpers must match rpc-spec/openrpc.json; their examples (watch
sessions, approve from the terminal) run as a person would run them, next to
a daemon that `codingbridge hook` feeds as Claude Code does; the clients speak
stdio, unix sockets and WebSockets.
"""
import inspect
import json
import os
import queue
import subprocess
import sys
import typing

import pytest

from conftest import ROOT, binary, spec, start_daemon, validate_notification, validate_result
from netharness import net  # noqa: F401  (the fixture)

PY_CLIENT = os.path.join(ROOT, "clients", "python")
JS_CLIENT = os.path.join(ROOT, "clients", "js")
sys.path.insert(0, PY_CLIENT)

import codingbridge  # noqa: E402  (clients/python, put on the path above)
from codingbridge.methods import Methods  # noqa: E402


def spec_params(method):
    m = next((m for m in spec()["methods"] if m["name"] == method), None)
    assert m is not None, f"{method} is not in the spec"
    return {p["name"]: p for p in m.get("params", [])}


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(w.title() for w in rest)


def helper_methods():
    skip = {"call", "notify"}
    return [(n, f) for n, f in inspect.getmembers(Methods, inspect.isfunction)
            if not n.startswith("_") and n not in skip]


def json_types(annotation):
    """The JSON types a Python annotation admits (None: not checked)."""
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return json_types(args[0]) if len(args) == 1 else None
    if typing.get_origin(annotation) is typing.Literal:
        return {"enum": set(typing.get_args(annotation))}
    return {str: "string", bool: "boolean", int: "integer", float: "number",
            dict: "object"}.get(typing.get_origin(annotation) or annotation)


def schema_types(schema):
    if "$ref" in schema:
        schema = spec()["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if "enum" in schema:
        return {"enum": set(schema["enum"]) - {None}}
    return schema.get("type")


def method_of(helper):
    """The naming rule of the helpers: approval_respond -> approval.respond."""
    group, _, rest = helper.partition("_")
    return group + "." + camel(rest) if rest else group


# Not params of the method: the call's own timeout, agent_hook's whole params object.
NOT_PARAMS = {"timeout", "hook_input"}


def test_python_helpers_match_the_spec():
    names = set()
    for name, fn in helper_methods():
        method = method_of(name)
        names.add(method)
        params = spec_params(method)
        for p in list(inspect.signature(fn).parameters.values())[1:]:
            if p.kind is p.VAR_KEYWORD or p.name in NOT_PARAMS:
                continue
            key = camel(p.name)
            assert key in params, f"{name}({p.name}): {method} has no param {key}"
            assert (p.default is p.empty) == params[key].get("required", False), f"{name}({p.name}) required?"
            want = json_types(p.annotation)
            if want is not None:
                assert want == schema_types(params[key]["schema"]), f"{name}({p.name}): {want} vs the spec"
    assert {"session.list", "approval.respond", "question.answer", "agent.event"} <= names


def test_js_helpers_match_the_spec():
    out = subprocess.run(["node", "--input-type=module", "-e",
                          f"import {{ HELPERS }} from '{JS_CLIENT}/codingbridge.js';"
                          "console.log(JSON.stringify(HELPERS))"], capture_output=True, check=True, text=True)
    helpers = json.loads(out.stdout)
    for name, (method, required) in helpers.items():
        params = spec_params(method)
        assert set(required) == {n for n, p in params.items() if p.get("required")}, name
    # The same API in both languages (initialize is a method of its own in JS).
    assert {m for m, _ in helpers.values()} | {"initialize"} == {method_of(n) for n, _ in helper_methods()}


# ---- the examples, as a person runs them -----------------------------------

HOOK_BASE = {"session_id": "clients-session", "cwd": "/home/dev/MyApp", "transcript_path": "/tmp/t.jsonl"}


def hook(state_dir, event, **fields):
    p = subprocess.run([binary(), "hook", "--state-dir", state_dir, "--timeout", "20"],
                       input=json.dumps({**HOOK_BASE, "hook_event_name": event, **fields}).encode(),
                       capture_output=True, timeout=30, check=True)
    return p.stdout.decode()


EXAMPLES = {
    "python": [sys.executable, os.path.join(PY_CLIENT, "examples", "watch.py")],
    "node": ["node", os.path.join(JS_CLIENT, "examples", "watch.mjs")],
}


@pytest.mark.parametrize("lang", EXAMPLES)
def test_example_watches_and_approves(sockdir, lang):
    daemon = start_daemon(sockdir)
    try:
        hook(sockdir, "UserPromptSubmit", prompt="Publish the package")
        ex = subprocess.Popen([*EXAMPLES[lang], "--state-dir", sockdir, "--auto", "allow", "--exit-when-done"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Its first line (the session as it is now) says it is subscribed.
        assert ex.stdout.readline().strip() == "● MyApp · processing · Starting", ex.stderr.read()
        out = hook(sockdir, "PermissionRequest", tool_name="Bash", tool_input={"command": "npm publish"})
        assert json.loads(out)["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        hook(sockdir, "Stop")
        rest, err = ex.communicate(timeout=20)
        assert ex.returncode == 0, err
        assert "Approve Bash: npm publish" in rest and "allow: accepted" in rest, rest
        assert rest.rstrip().endswith("Task Complete: MyApp"), rest
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


# ---- the clients over each transport ---------------------------------------

def flow(cb):
    """One approval denied, then a batch with an error in it: each call's
    (method, result or RPCError), checked by check_calls."""
    calls = [("agent.event", cb.agent_event("c-1", "task_started", projectName="MyApp")),
             ("agent.event", cb.agent_event("c-1", "approval_request", requestId="r1", toolName="Bash",
                                            input={"command": "npm publish"})),
             ("approval.list", cb.approval_list()),
             ("approval.respond", cb.approval_respond("r1", "deny"))]
    batch = cb.batch([("session.list", {}), ("session.get", {"sessionId": "nobody"}), ("ping", None)])
    return calls + list(zip(["session.list", "session.get", "ping"], batch))


def check_calls(calls, notes):
    for method, result in calls:
        if method == "session.get":
            assert result["code"] == -32010, result  # the batch's unknown session
        else:
            validate_result(method, result)
    assert [a["requestId"] for a in dict(calls)["approval.list"]["approvals"]] == ["r1"]
    assert dict(calls)["approval.respond"]["status"] == "accepted"
    for method, params in notes:
        validate_notification(method, params)
    resolved = [p for m, p in notes if m == "approval.resolved"]
    assert resolved and resolved[0]["decision"] == "deny", notes


def recorder(notes, resolved):
    """A "*" callback keeping every notification; approval.resolved also goes to `resolved`."""
    def record(method, params):
        notes.append((method, params))
        if method == "approval.resolved":
            resolved.put(params)
    return record


def test_python_client_over_stdio():
    notes, resolved = [], queue.Queue()
    with codingbridge.connect_stdio(binary(), stderr=subprocess.DEVNULL, device_id="py-test") as cb:
        validate_result("initialize", cb.init_result)
        cb.on("*", recorder(notes, resolved))
        calls = [(m, r.__dict__ if isinstance(r, codingbridge.RPCError) else r) for m, r in flow(cb)]
        assert resolved.get(timeout=5)["by"] == "py-test"
    assert cb.transport.proc.returncode == 0  # EOF on its stdin ended the server
    check_calls(calls, notes)
    with pytest.raises(ConnectionError):
        cb.ping()


def pinned_wss(net):  # noqa: F811
    s = net(ws=False, wss=True)
    return s, s.url("wss") + "/rpc", s.entry("wss")["certSha256"]


def test_python_client_over_websocket_pinned_and_paired(net):  # noqa: F811
    s, url, pin = pinned_wss(net)
    with codingbridge.connect_websocket(url, cert_sha256=pin, initialize=False) as cb:
        paired = cb.device_pair(s.pairing_code(), "py-ws")
    with codingbridge.connect_websocket(url, token=paired["token"], cert_sha256=pin) as cb:
        assert cb.init_result["deviceId"] == paired["deviceId"]
        notes, resolved = [], queue.Queue()
        cb.on("*", recorder(notes, resolved))
        calls = [(m, r.__dict__ if isinstance(r, codingbridge.RPCError) else r) for m, r in flow(cb)]
        assert resolved.get(timeout=5)["by"] == paired["deviceId"]
    check_calls(calls, notes)
    # Another certificate: refused right after the handshake, before the token goes out.
    with pytest.raises(Exception, match="pinned"):
        codingbridge.connect_websocket(url, token=paired["token"], cert_sha256="00" * 32)


def native_websocket_flags():
    """Node's flags for the browser's WebSocket API (built in from Node 22;
    behind a flag in 20; missing in 18, where the WebSocket test skips)."""
    for flags in ([], ["--experimental-websocket"]):
        p = subprocess.run(["node", *flags, "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"],
                           capture_output=True)
        if p.returncode == 0:
            return flags
    pytest.skip("this Node has no WebSocket (Node 20+ has)")


def run_js(*args, flags=()):
    p = subprocess.run(["node", *flags, os.path.join(ROOT, "Tests", "e2e", "clients", "drive.mjs"),
                        *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    calls = [(c["method"], c.get("result", c.get("error"))) for c in out["calls"]]
    validate_result("initialize", calls.pop(0)[1])
    return calls, [(n["method"], n["params"]) for n in out["notes"]]


def test_js_client_over_stdio():
    check_calls(*run_js("stdio", binary()))


def test_js_client_over_native_websocket(net):  # noqa: F811
    # Node's WebSocket is the browser's API (no headers, so the token goes in initialize).
    flags = native_websocket_flags()
    s = net()
    token = s.pair(name="js-ws")["token"]
    check_calls(*run_js("ws", s.url("ws") + "/rpc", token, flags=flags))
