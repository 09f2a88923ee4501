"""The real Claude Code CLI against a scripted local Anthropic Messages API.

The CLI comes from PyPI's `claude-agent-sdk` wheel (pinned: WHEEL_VERSION),
which bundles the `claude` binary as claude_agent_sdk/_bundled/claude. The
wheel is downloaded once with `pip download` into CACHE_DIR
(~/.cache/codingbridge-tests) and only the binary is extracted next to it.

claude_binary() -> path, or None when the wheel cannot be had (no network):
    the tests skip then (reason in claude_unavailable()).
claude_version() -> e.g. "2.1.332 (Claude Code)".

FakeAnthropic(script)  an http.server on 127.0.0.1:<free port>, `url` for
    ANTHROPIC_BASE_URL. POST /v1/messages: `script(body, requests)` returns the
    reply as a list of content blocks ({"type": "text", "text": ...} or
    {"type": "tool_use", "name": ..., "input": {...}}; ids are added); with
    `stream: true` it goes out as Server-Sent Events (message_start,
    content_block_start/delta/stop, input_json_delta for tool input,
    message_delta with stop_reason, message_stop), else as one JSON message.
    /v1/messages/count_tokens answers a count; anything else is answered 200
    `{}` (or 404 for GET of unknown paths) and logged. Every request is kept
    in `log` (method, path, body parsed) for the tests and docs.

bash_then_text(command, final)  the usual script: the main conversation
    (a request offering the Bash tool) gets a Bash tool_use for `command` until
    a tool_result for it came back, then the text `final`; side requests
    (title, summaries, ...) get a short text.

run_claude(claude, api, cwd, home, settings, prompt, timeout) -> ClaudeRun:
    `claude -p PROMPT --output-format stream-json --verbose --settings FILE`
    with a throwaway HOME, DISABLE_AUTOUPDATER=1 and
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, started in the background;
    ClaudeRun.wait() -> (exit code, the stream-json events, stderr).

turns(*steps, final="Done.")  a script for several turns: the main
    conversation's Nth request (N = the assistant messages it carries, so a
    tool result or a Stop hook's block each start the next step) gets
    steps[N] (a list of blocks, see tool_use/text), then `final` as text.
    Side requests get a short text. TASK_TOOLS_STEPS is the plan flow:
    ToolSearch "select:TaskCreate,TaskUpdate,TaskList", two TaskCreate in one
    turn, TaskUpdate 1 in_progress, TaskUpdate 1 completed (task ids are "1",
    "2", ... in creation order, per session).
user_texts(body)  the text of every user message in a request (strings and
    text blocks), e.g. the Stop hook feedback that follows a block.

hook_settings(binary, state_dir, record=None, also=()) -> the settings dict
    that `codingbridge hook --print-settings --state-dir D` prints, with the
    hook command made the binary's absolute path. With `record=PATH` every hook
    input is also appended (one JSON per line) to PATH before the hook reads it.
    `also`: more hook events (e.g. "PostToolUseFailure", "TaskCreated") that
    are only recorded, not given to the daemon (needs `record`); those the
    daemon's settings already have are left as they are.
"""
import glob
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WHEEL_VERSION = "0.2.189"          # bundles Claude Code 2.1.332
CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "codingbridge-tests")
_BIN_REL = os.path.join("claude_agent_sdk", "_bundled", "claude")

_state = {"path": None, "why": None, "tried": False}


def _extract_dir():
    return os.path.join(CACHE_DIR, f"claude-agent-sdk-{WHEEL_VERSION}")


def claude_binary():
    """The bundled `claude`, downloading and extracting the wheel once; None if
    it cannot be had (see claude_unavailable())."""
    if _state["tried"]:
        return _state["path"]
    _state["tried"] = True
    env = os.environ.get("CODINGBRIDGE_CLAUDE_BIN")
    if env:
        _state["path"] = env
        return env
    target = os.path.join(_extract_dir(), _BIN_REL)
    if os.access(target, os.X_OK):
        _state["path"] = target
        return target
    try:
        os.makedirs(CACHE_DIR, exist_ok=True)
        wheels = _wheels()
        if not wheels:
            p = subprocess.run(["python3", "-m", "pip", "download", f"claude-agent-sdk=={WHEEL_VERSION}", "--no-deps",
                                "--only-binary", ":all:", "--timeout", "30", "--retries", "1", "-d", CACHE_DIR, "-q"],
                               capture_output=True, text=True, timeout=600)
            wheels = _wheels()
            if not wheels:
                _state["why"] = f"pip download claude-agent-sdk=={WHEEL_VERSION} failed: {p.stderr.strip()[-300:]}"
                return None
        tmp = tempfile.mkdtemp(prefix="extract-", dir=CACHE_DIR)
        with zipfile.ZipFile(wheels[0]) as z:
            names = [n for n in z.namelist() if n.startswith("claude_agent_sdk/_bundled/")]
            if _BIN_REL.replace(os.sep, "/") not in names:
                _state["why"] = f"{os.path.basename(wheels[0])} has no bundled claude"
                return None
            z.extractall(tmp, members=names)
        os.chmod(os.path.join(tmp, _BIN_REL), 0o755)
        try:
            os.rename(tmp, _extract_dir())
        except OSError:  # another run extracted it first
            shutil.rmtree(tmp, ignore_errors=True)
        _state["path"] = target
        return target
    except Exception as e:  # no network, no pip, disk full: skip, never fail
        _state["why"] = f"claude-agent-sdk=={WHEEL_VERSION} unavailable: {e}"
        return None


def _wheels():
    return sorted(glob.glob(os.path.join(CACHE_DIR, f"claude_agent_sdk-{WHEEL_VERSION}-*.whl")))


def claude_unavailable():
    return _state["why"] or "claude binary unavailable"


def claude_version(claude):
    return subprocess.run([claude, "--version"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOME": tempfile.gettempdir()}).stdout.strip()


# ---- the scripted Messages API ------------------------------------------------

def _sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class FakeAnthropic:
    def __init__(self, script):
        self.script = script
        self.log = []          # [{"method", "path", "body"}]
        self.messages = []     # the POST /v1/messages bodies, in order
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode(errors="replace")

            def _json(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self, body):
                with api._lock:
                    api.log.append({"method": self.command, "path": self.path, "body": body, "headers": dict(self.headers),
                                    "time": time.monotonic()})

            def do_HEAD(self):
                self._record(None)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                self._record(None)
                path = self.path.split("?")[0]
                if path.startswith("/v1/models"):
                    self._json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})
                else:
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})

            def do_POST(self):
                body = self._body()
                self._record(body)
                path = self.path.split("?")[0]
                if path == "/v1/messages/count_tokens":
                    self._json(200, {"input_tokens": 100})
                elif path == "/v1/messages" and isinstance(body, dict):
                    with api._lock:
                        api.messages.append(body)
                        earlier = list(api.messages)
                    blocks = api.script(body, earlier)
                    self._messages(body, blocks)
                else:
                    self._json(200, {})

            def _messages(self, body, blocks):
                blocks = [dict(b) for b in blocks]
                for b in blocks:
                    if b["type"] == "tool_use":
                        b.setdefault("id", "toolu_" + uuid.uuid4().hex[:24])
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                msg = {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
                       "model": body.get("model", "claude-test"), "content": [], "stop_reason": None,
                       "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1}}
                if not body.get("stream"):
                    msg.update(content=blocks, stop_reason=stop, usage={"input_tokens": 100, "output_tokens": 20})
                    self._json(200, msg)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                out = [_sse("message_start", {"type": "message_start", "message": msg})]
                for i, b in enumerate(blocks):
                    if b["type"] == "text":
                        out.append(_sse("content_block_start", {"type": "content_block_start", "index": i,
                                                                "content_block": {"type": "text", "text": ""}}))
                        out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                                "delta": {"type": "text_delta", "text": b["text"]}}))
                    else:
                        out.append(_sse("content_block_start", {"type": "content_block_start", "index": i,
                                                                "content_block": {"type": "tool_use", "id": b["id"],
                                                                                  "name": b["name"], "input": {}}}))
                        js = json.dumps(b["input"])
                        for part in (js[:len(js) // 2], js[len(js) // 2:]):
                            out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                                    "delta": {"type": "input_json_delta",
                                                                              "partial_json": part}}))
                    out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
                out.append(_sse("message_delta", {"type": "message_delta",
                                                  "delta": {"stop_reason": stop, "stop_sequence": None},
                                                  "usage": {"output_tokens": 20}}))
                out.append(_sse("message_stop", {"type": "message_stop"}))
                self.wfile.write(b"".join(out))
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def paths(self):
        return [(r["method"], r["path"]) for r in self.log]

    def tool_results(self):
        """Every tool_result block the CLI sent back, once per tool_use_id, in order
        (later requests repeat them, with other cache_control marks)."""
        out = {}
        for body in self.messages:
            for c in tool_results_in(body):
                out.setdefault(c["tool_use_id"], c)
        return list(out.values())


def offers_tool(body, name):
    return any(t.get("name") == name for t in body.get("tools") or [])


def tool_results_in(body):
    return [c for m in body.get("messages", []) if m.get("role") == "user" and isinstance(m.get("content"), list)
            for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result"]


def bash_then_text(command, final, times=1):
    """Main conversation: `times` Bash tool_use turns for `command` (one per
    turn), then `final` as text. Side requests: a short text."""

    def script(body, earlier):
        if not offers_tool(body, "Bash"):
            return [{"type": "text", "text": "Echo test"}]
        if len(tool_results_in(body)) < times:
            return [{"type": "text", "text": "Running it."},
                    {"type": "tool_use", "name": "Bash", "input": {"command": command, "description": "Write out.txt"}}]
        return [{"type": "text", "text": final}]

    return script


def text(t):
    return {"type": "text", "text": t}


def tool_use(name, input):
    return {"type": "tool_use", "name": name, "input": input}


def turns(*steps, final="Done."):
    def script(body, earlier):
        if not offers_tool(body, "Bash"):
            return [text("Echo test")]
        n = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return list(steps[n]) if n < len(steps) else [text(final)]
    return script


TASK_TOOLS_STEPS = (
    [tool_use("ToolSearch", {"query": "select:TaskCreate,TaskUpdate,TaskList", "max_results": 5})],
    [tool_use("TaskCreate", {"subject": "Write tests", "description": "Add the e2e tests", "activeForm": "Writing tests"}),
     tool_use("TaskCreate", {"subject": "Run tests", "description": "Run them", "activeForm": "Running tests"})],
    [tool_use("TaskUpdate", {"taskId": "1", "status": "in_progress"})],
    [tool_use("TaskUpdate", {"taskId": "1", "status": "completed"})],
)


def user_texts(body):
    out = []
    for m in body.get("messages", []):
        if m.get("role") != "user":
            continue
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out.extend(b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text")
    return out


# ---- running the CLI -----------------------------------------------------------

def recorded_hook_inputs(record, event=None):
    """The hook inputs the recorder wrote to `record` (one JSON per line), of `event` if given."""
    if not os.path.exists(record):
        return []
    with open(record) as f:
        ins = [json.loads(line) for line in f if line.strip()]
    return [i for i in ins if event is None or i.get("hook_event_name") == event]


def _recorder(record):
    return (f"python3 -c 'import sys; d=sys.stdin.read(); "
            f"open(sys.argv[1],\"a\").write(d.strip()+\"\\n\"); sys.stdout.write(d)' {shlex.quote(record)}")


def hook_settings(binary, state_dir, record=None, also=()):
    out = subprocess.run([binary, "hook", "--print-settings", "--state-dir", state_dir],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    settings = json.loads(out)
    hook = shlex.quote(os.path.abspath(binary)) + " hook"
    for groups in settings["hooks"].values():
        for g in groups:
            for h in g["hooks"]:
                assert h["command"].startswith("codingbridge hook"), h
                cmd = hook + h["command"][len("codingbridge hook"):]
                if record:
                    # The input as Claude Code sent it, one line per event, then the hook itself.
                    cmd = f"{_recorder(record)} | {cmd}"
                h["command"] = cmd
    for event in also:
        assert record, "also= needs record="
        if event in settings["hooks"]:     # the daemon's own hook records it already
            continue
        settings["hooks"][event] = [{"matcher": "*", "hooks": [{"type": "command",
                                                                "command": f"{_recorder(record)} >/dev/null"}]}]
    return settings


class ClaudeRun:
    def __init__(self, proc, t0):
        self.proc = proc
        self.t0 = t0
        self.events = []
        self._err = []
        self._rt = threading.Thread(target=self._read, daemon=True)
        self._et = threading.Thread(target=lambda: self._err.append(proc.stderr.read()), daemon=True)
        self._rt.start()
        self._et.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.events.append({"type": "raw", "line": line})

    def wait(self, timeout=30):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._rt.join(5)
        self._et.join(5)
        self.seconds = time.monotonic() - self.t0
        return code, self.events, "".join(self._err)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def result(self):
        return next((e for e in self.events if e.get("type") == "result"), None)


def run_claude(claude, api, cwd, home, settings, prompt="do it", extra_env=None, args=()):
    settings_path = os.path.join(home, "cb-settings.json")
    with open(settings_path, "w") as f:
        json.dump(settings, f, indent=1)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE", "CODINGBRIDGE_", "XDG_"))}
    env.update({
        "HOME": home,
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
    })
    env.update(extra_env or {})
    t0 = time.monotonic()
    p = subprocess.Popen([claude, "-p", prompt, "--output-format", "stream-json", "--verbose",
                          "--settings", settings_path, *args],
                         cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    return ClaudeRun(p, t0)
