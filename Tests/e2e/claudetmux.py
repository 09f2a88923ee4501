"""The real Claude Code CLI interactively, in a tmux pane (see claudecli.py for
the binary and the scripted Messages API). Findings: docs/claude-cli.md.

tmux_unavailable() -> None, or why the interactive tests must skip (no tmux).

pre_accept(home, cwd, api_key="test")  writes HOME/.claude.json so that no
    dialog blocks the start: hasCompletedOnboarding (else a connectivity check
    to api.anthropic.com fails the start), customApiKeyResponses.approved with
    the key's last 20 characters (else "Detected a custom API key ... use
    it?", default No), projects[cwd].hasTrustDialogAccepted (the folder trust
    dialog), a theme. Extra top-level keys with `extra` (for example
    {"messageIdleNotifThresholdMs": 60000}).

TmuxClaude(claude, api, cwd, home, settings, args=(), extra_env=None)
    start()            a private tmux server (`tmux -S <tmp dir>/tmux`, no config
                       file) with one 160x50 pane running `claude --settings FILE
                       ARGS` under `env -i` (HOME, ANTHROPIC_BASE_URL,
                       ANTHROPIC_API_KEY=test, DISABLE_AUTOUPDATER=1,
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, TERM, PATH,
                       LANG), then waits until the prompt box is ready.
    screen()           the pane's text now (`capture-pane -p`).
    wait_for(what, timeout, settle=0) -> the screen once `what` (a string, a
                       compiled regex, or a predicate on the screen text) is on
                       it, after `settle` more seconds; fails with the screen
                       otherwise. A dialog (permission prompt) ignores keys for
                       a moment after it shows: wait_for(DIALOG, settle=DIALOG_SETTLE).
    keys(*names)       `send-keys` names such as "Enter", "Escape", "Down", "4".
    type(text)         literal text (`send-keys -l`).
    submit(prompt)     types the prompt, waits until it shows, presses Enter.
    alive()            whether claude still runs.
    stop()             kills the tmux server (claude gets SIGHUP: SessionEnd
                       reason "other"), then makes sure claude and its process
                       group are gone. Safe to call twice.
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

READY = re.compile(r"(mode on|\? for shortcuts)")
DIALOG = "Do you want to proceed?"
DIALOG_SETTLE = 1.0     # keys sent sooner after a dialog shows can be dropped


def tmux_unavailable():
    if shutil.which("tmux") is None:
        return "needs tmux (scripts/deps.sh --test installs it)"
    return None


def pre_accept(home, cwd, api_key="test", extra=None):
    projects = {}
    for p in {cwd, os.path.realpath(cwd)}:
        projects[p] = {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True, "allowedTools": []}
    config = {"hasCompletedOnboarding": True, "theme": "dark", "numStartups": 1,
              "customApiKeyResponses": {"approved": [api_key.strip()[-20:]], "rejected": []},
              "projects": projects}
    config.update(extra or {})
    with open(os.path.join(home, ".claude.json"), "w") as f:
        json.dump(config, f, indent=1)


class TmuxClaude:
    def __init__(self, claude, api, cwd, home, settings, args=(), extra_env=None, width=160, height=50):
        self.claude, self.api, self.cwd, self.home = claude, api, cwd, home
        self.settings, self.args, self.extra_env = settings, list(args), dict(extra_env or {})
        self.width, self.height = width, height
        self._sockdir = tempfile.mkdtemp(prefix="cb-tmux-", dir="/tmp")
        self.socket = os.path.join(self._sockdir, "tmux")
        self.pid = None
        self.started = False

    def _tmux(self, *a, check=True):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        p = subprocess.run(["tmux", "-S", self.socket, *a], capture_output=True, text=True, env=env, timeout=10)
        if check and p.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(a)}: {p.stderr.strip()}")
        return p.stdout

    def start(self, ready_timeout=30):
        settings_path = os.path.join(self.home, "cb-settings.json")
        with open(settings_path, "w") as f:
            json.dump(self.settings, f, indent=1)
        env = {"HOME": self.home, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color",
               "LANG": "C.UTF-8", "ANTHROPIC_BASE_URL": self.api.url, "ANTHROPIC_API_KEY": "test",
               "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1"}
        env.update(self.extra_env)
        cmd = ("cd " + shlex.quote(self.cwd) + " && exec env -i "
               + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " "
               + " ".join(shlex.quote(x) for x in [self.claude, "--settings", settings_path, *self.args]))
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "claude", "-x", str(self.width), "-y", str(self.height),
                   cmd)
        self.started = True
        self._tmux("set-option", "-t", "claude", "remain-on-exit", "on")
        self.pid = int(self._tmux("display-message", "-p", "-t", "claude", "#{pane_pid}").strip())
        self.wait_for(READY, ready_timeout)
        return self

    def screen(self):
        return self._tmux("capture-pane", "-p", "-t", "claude")

    def wait_for(self, what, timeout=20, settle=0):
        if isinstance(what, str):
            test = lambda s: what in s
        elif hasattr(what, "search"):
            test = lambda s: what.search(s) is not None
        else:
            test = what
        deadline = time.monotonic() + timeout
        s = ""
        while time.monotonic() < deadline:
            s = self.screen()
            if test(s):
                if settle:
                    time.sleep(settle)
                    s = self.screen()
                return s
            if not self.alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"waited {timeout} s for {what!r} on claude's screen; alive={self.alive()}:\n{s}")

    def keys(self, *names):
        self._tmux("send-keys", "-t", "claude", *names)

    def type(self, text):
        self._tmux("send-keys", "-t", "claude", "-l", text)

    def submit(self, prompt, timeout=10):
        self.type(prompt)
        self.wait_for(prompt, timeout)
        time.sleep(0.2)
        self.keys("Enter")

    def alive(self):
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        try:   # a zombie the tmux server has not reaped yet is gone for us
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def stop(self, timeout=10):
        if not self.started:
            shutil.rmtree(self._sockdir, ignore_errors=True)
            return
        self.started = False
        self._tmux("kill-server", check=False)
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive():
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self._sockdir, ignore_errors=True)
