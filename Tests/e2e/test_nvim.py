"""The Neovim plugin (editors/nvim) in headless Neovim against the real binary.

The scenarios live in nvim/drive.lua: `codingbridge hook` run as Claude Code
runs it changes a session; the statusline, vim.notify and :CodingBridge must
follow. This file starts Neovim per scenario (and, for one, a daemon first) and
checks what outlives Neovim: a server the plugin started ends with it, a
daemon it only connected to keeps serving.
"""
import json
import os
import shutil
import subprocess

import pytest

from conftest import ROOT, binary, start_daemon

# Another Neovim (a current release, say): CODINGBRIDGE_NVIM=/path/to/nvim.
NVIM = os.environ.get("CODINGBRIDGE_NVIM") or shutil.which("nvim")
pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim is not installed (scripts/deps.sh --test installs it)")

PLUGIN = os.path.join(ROOT, "editors", "nvim")
DRIVER = os.path.join(ROOT, "Tests", "e2e", "nvim", "drive.lua")


def run_nvim(scenario, state_dir, timeout=60, **env):
    env = {**os.environ, **env, "CB_BIN": binary(), "CB_STATE": state_dir, "CB_SCENARIO": scenario,
           "XDG_STATE_HOME": os.path.join(state_dir, "xdg"), "XDG_CONFIG_HOME": os.path.join(state_dir, "xdg")}
    p = subprocess.run([NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-n",
                        "--cmd", f"set rtp^={PLUGIN}", "-c", "runtime plugin/codingbridge.lua",
                        "-c", f"luafile {DRIVER}"],
                       env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 0 and "PASS" in err, f"nvim exited {p.returncode}:\n{err}"
    return err


def test_approval_in_statusline_approve_and_task_complete(sockdir):
    run_nvim("approve", sockdir)
    # The server the plugin started took shutdown/exit when Neovim quit.
    assert not os.path.exists(os.path.join(sockdir, "codingbridge.sock"))


def test_deny_and_answer_a_question(sockdir):
    run_nvim("deny_and_answer", sockdir)


def test_uses_a_running_daemon_then_its_own_server(sockdir):
    daemon = start_daemon(sockdir)
    try:
        hook = {"session_id": "daemon-session", "cwd": "/home/dev/MyApp", "transcript_path": "/tmp/t.jsonl",
                "hook_event_name": "UserPromptSubmit", "prompt": "Refactor"}
        subprocess.run([binary(), "hook", "--state-dir", sockdir], input=json.dumps(hook).encode(),
                       check=True, timeout=10)
        run_nvim("daemon", sockdir, CB_DAEMON_PID=str(daemon.pid))
        assert daemon.wait(timeout=10) == 0  # the scenario stopped it (SIGTERM)
        # The server the plugin started when the daemon went away ended with Neovim.
        assert not os.path.exists(os.path.join(sockdir, "codingbridge.sock"))
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=10)
