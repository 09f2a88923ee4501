"""`codingbridge hook --print-settings`: the settings.json block for Claude Code,
command hooks or http hooks, as a person pastes it; and the hook token that
`serve` keeps in the state directory for the http hooks.
"""
import json
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import binary

EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest",
          "Notification", "Stop", "SubagentStop", "SessionEnd"]
MATCHED = {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"}


@pytest.fixture
def statedir():
    d = tempfile.mkdtemp(prefix="cbs", dir="/tmp")
    yield d
    shutil.rmtree(d)


def settings(*args):
    p = subprocess.run([binary(), "hook", "--print-settings", *args], capture_output=True, timeout=10)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def hooks_of(out):
    block = json.loads(out)
    assert list(block) == ["hooks"]
    assert list(block["hooks"]) == EVENTS
    for event, groups in block["hooks"].items():
        assert len(groups) == 1
        assert groups[0].get("matcher") == ("*" if event in MATCHED else None)
        assert len(groups[0]["hooks"]) == 1
    return {event: groups[0]["hooks"][0] for event, groups in block["hooks"].items()}


def test_command_hooks():
    code, out, _ = settings()
    assert code == 0
    for event, h in hooks_of(out).items():
        if event == "PermissionRequest":
            assert h == {"type": "command", "command": "codingbridge hook --timeout 55", "timeout": 60}
        else:
            assert h == {"type": "command", "command": "codingbridge hook"}


def test_command_hooks_name_a_state_directory_quoted():
    code, out, _ = settings("--state-dir", "/tmp/my state")
    assert code == 0
    assert hooks_of(out)["Stop"]["command"] == "codingbridge hook --state-dir '/tmp/my state'"


def write_listen(d, *urls):
    with open(os.path.join(d, "listen.json"), "w") as f:
        json.dump({"listen": [{"url": u, "certSha256": None} for u in urls]}, f)


def check_http(out, url):
    for event, h in hooks_of(out).items():
        assert h == {"type": "http", "url": url,
                     "headers": {"Authorization": "Bearer $CODINGBRIDGE_HOOK_TOKEN"},
                     "allowedEnvVars": ["CODINGBRIDGE_HOOK_TOKEN"],
                     "timeout": 60 if event == "PermissionRequest" else 10}


def test_http_hooks_take_the_first_loopback_ws_listener(statedir):
    write_listen(statedir, "wss://0.0.0.0:443", "ws://192.0.2.7:80", "ws://127.0.0.1:41234", "ws://[::1]:9")
    code, out, err = settings("--http", "--state-dir", statedir)
    assert code == 0, err
    check_http(out, "http://127.0.0.1:41234/hooks/claude")
    assert f"export CODINGBRIDGE_HOOK_TOKEN=$(cat {statedir}/hook-token)" in err


def test_http_hooks_with_an_explicit_url(statedir):
    code, out, _ = settings("--http", "--url", "http://127.0.0.1:9999/hooks/claude", "--state-dir", statedir)
    assert code == 0
    check_http(out, "http://127.0.0.1:9999/hooks/claude")


@pytest.mark.parametrize("listen", [None, [], ["wss://127.0.0.1:1"], ["ws://192.0.2.7:80"]],
                         ids=["no-file", "empty", "tls-only", "not-loopback"])
def test_http_hooks_without_a_loopback_listener_say_how_to_start_one(statedir, listen):
    if listen is not None:
        write_listen(statedir, *listen)
    code, out, err = settings("--http", "--state-dir", statedir)
    assert code != 0 and out == ""
    assert "codingbridge serve --listen ws://127.0.0.1:PORT" in err


def test_http_and_url_need_print_settings():
    for args in (["--http"], ["--print-settings", "--url", "http://127.0.0.1:1/hooks/claude"]):
        p = subprocess.run([binary(), "hook", *args], capture_output=True, timeout=10, input=b"{}")
        assert p.returncode != 0 and p.stdout == b""


def serve_once(d):
    p = subprocess.run([binary(), "serve", "--state-dir", d], input=b"", capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr.decode()


def test_serve_creates_the_hook_token_once(statedir):
    serve_once(statedir)
    path = os.path.join(statedir, "hook-token")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    token = open(path).read().strip()
    assert len(token) == 43 and all(c.isalnum() or c in "-_" for c in token)
    serve_once(statedir)
    assert open(path).read().strip() == token


def test_serve_refuses_a_damaged_hook_token(statedir):
    with open(os.path.join(statedir, "hook-token"), "w") as f:
        f.write("short\n")
    p = subprocess.run([binary(), "serve", "--state-dir", statedir], input=b"", capture_output=True, timeout=30)
    assert p.returncode == 2
    assert "hook-token" in p.stderr.decode()
