"""Harness for the web app's browser test (test_webapp.py).

browser()      a fixture factory: Debian's chromium, headless, driven through
               Debian's chromium-driver by Selenium (nothing is downloaded: both
               paths are given, and SE_OFFLINE keeps Selenium Manager away),
               the viewport a 375x812 phone unless told otherwise.
Page           one browser on the app: pair, find cards, click, wait.
Proxy          a TCP relay in front of the daemon that the test can cut and
               restore: the browser loses the network, the daemon and the
               agent's hook do not.
hook()/Hook    `codingbridge hook` as Claude Code runs it (test_hook.py's way),
               for one session id; Hook waits in the background (PermissionRequest).
DevTools       a DevTools connection of its own to one target of the browser (the
               page, or the app's service worker): execute_cdp_cmd reaches only
               the page and gives no events.
"""
import json
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import binary

os.environ.setdefault("SE_OFFLINE", "true")

DRIVER = "/usr/bin/chromedriver"
WAIT_S = 10


def _chromium():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.fixture
def browser():
    """Factory: browser(width=375, height=812) -> a Selenium driver; all quit at teardown."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (scripts/deps.sh --test)")
    from selenium.webdriver.chrome.service import Service
    exe = _chromium()
    if not exe or not os.path.exists(DRIVER):
        pytest.skip("chromium and chromium-driver are not installed (scripts/deps.sh --test)")
    made = []

    def make(width=375, height=812):
        o = webdriver.ChromeOptions()
        o.binary_location = exe
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                  "--disable-extensions", f"--window-size={width},{height}"):
            o.add_argument(a)
        d = webdriver.Chrome(options=o, service=Service(executable_path=DRIVER))
        made.append(d)
        # the viewport itself, at 1 CSS pixel per device pixel: screenshots are width x height
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
        return d

    yield make
    for d in made:
        try:
            d.quit()
        except Exception:
            pass


class Page:
    def __init__(self, driver, base):
        self.d = driver
        self.base = base

    def js(self, script, *args):
        return self.d.execute_script(script, *args)

    def wait(self, cond, what, timeout=WAIT_S):
        deadline = time.monotonic() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; page text: {self.text()[:1500]!r}")
            time.sleep(0.02)

    def text(self):
        try:
            return self.js("return document.body.innerText")
        except Exception as e:  # noqa: BLE001 - for a failure message only
            return f"<no text: {e}>"

    def visible(self, selector):
        return self.js("const e = document.querySelector(arguments[0]); return !!e && e.offsetParent !== null;",
                       selector)

    def open_link(self, code):
        self.d.get(f"{self.base}/#pair={code}")
        self.wait(lambda: self.visible("#session-list") or self.visible("#sessions"), "the app after the pair link")

    def pair_with_form(self, code, name):
        self.d.get(self.base + "/")
        self.wait(lambda: self.visible("#pair-code"), "the pairing form")
        from selenium.webdriver.common.by import By
        field = self.d.find_element(By.XPATH, "//label[text()='Pairing code']/following-sibling::input[1]")
        field.send_keys(code)
        self.d.find_element(By.ID, "pair-name").send_keys(name)
        self.button("Pair").click()
        self.wait(lambda: self.visible("#sessions"), "the app after pairing")

    def connected(self):
        self.wait(lambda: self.js("return document.body.dataset.link") == "up", "the connection")

    def button(self, label, within=None):
        from selenium.webdriver.common.by import By
        root = within or self.d
        for b in root.find_elements(By.TAG_NAME, "button"):
            if b.text.strip() == label and b.is_displayed():
                return b
        raise AssertionError(f"no visible button {label!r}: {self.text()[:800]!r}")

    def card(self, sid):
        from selenium.webdriver.common.by import By
        found = self.d.find_elements(By.CSS_SELECTOR, f'.card[data-key="{sid}"]')
        return found[0] if found else None

    def card_text(self, sid):
        return self.js('const c = document.querySelector(`.card[data-key="${arguments[0]}"]`);'
                       "return c ? c.innerText : null;", sid)

    def approval(self, rid):
        from selenium.webdriver.common.by import By
        found = self.d.find_elements(By.CSS_SELECTOR, f'.approval[data-key="{rid}"]')
        return found[0] if found else None

    def watch_for(self, selector):
        """Records Date.now() when an element matching selector appears (a MutationObserver)."""
        self.js("""window.cbSeen = null;
          const sel = arguments[0];
          new MutationObserver((_, o) => {
            if (document.querySelector(sel)) { window.cbSeen = Date.now(); o.disconnect(); }
          }).observe(document.body, {childList: true, subtree: true});""", selector)

    def seen_at(self):
        return self.js("return window.cbSeen")

    def screenshot(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        png = self.d.get_screenshot_as_png()
        with open(path, "wb") as f:
            f.write(png)
        return png


def png_size(png):
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


# ---- the agent: codingbridge hook ---------------------------------------------

def hook_input(sid, cwd, event, **k):
    d = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": cwd,
         "permission_mode": "default", "hook_event_name": event}
    d.update(k)
    return d


def hook(sock, sid, cwd, event, **k):
    p = subprocess.run([binary(), "hook"], input=json.dumps(hook_input(sid, cwd, event, **k)).encode(),
                       capture_output=True, env={**os.environ, "CODINGBRIDGE_SOCKET": sock}, timeout=30)
    assert (p.returncode, p.stdout) == (0, b""), p.stderr


class Hook:
    """A hook that waits for the person's decision (PermissionRequest)."""

    def __init__(self, sock, sid, cwd, event, *args, **k):
        self.started = time.time()
        self.p = subprocess.Popen([binary(), "hook", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env={**os.environ, "CODINGBRIDGE_SOCKET": sock})
        self.p.stdin.write(json.dumps(hook_input(sid, cwd, event, **k)).encode())
        self.p.stdin.close()

    def running(self):
        return self.p.poll() is None

    def decision(self, timeout=15):
        d = self.output(timeout)
        return d["behavior"] if d else None

    def output(self, timeout=15):
        """The hook's decision object ({behavior, updatedPermissions?, message?, interrupt?}), or None."""
        self.p.wait(timeout=timeout)
        out = self.p.stdout.read().decode()
        return json.loads(out)["hookSpecificOutput"]["decision"] if out.strip() else None


def permission(sock, sid, cwd, command="terraform apply -auto-approve", **k):
    return Hook(sock, sid, cwd, "PermissionRequest", "--timeout", "120", tool_name="Bash",
                tool_input={"command": command, "description": "Apply the staging plan"}, **k)


# ---- DevTools, for what Selenium cannot reach --------------------------------------

class DevTools:
    """One target of the driver's browser by its own DevTools WebSocket:
    DevTools(driver, "service_worker").call("Runtime.evaluate", {...})."""

    def __init__(self, driver, kind="page", timeout=WAIT_S):
        import urllib.request
        from websockets.sync.client import connect
        addr = driver.capabilities["goog:chromeOptions"]["debuggerAddress"]
        deadline = time.monotonic() + timeout
        while True:
            with urllib.request.urlopen(f"http://{addr}/json/list", timeout=5) as r:
                found = [t for t in json.load(r) if t["type"] == kind]
            if found:
                break
            assert time.monotonic() < deadline, f"no {kind} target in the browser"
            time.sleep(0.05)
        # entered as a context manager (websockets 17 warns otherwise); closed by close()
        self.ws = connect(found[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=5).__enter__()
        self.next_id = 0
        self.events = []

    def call(self, method, params=None, timeout=WAIT_S):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            m = json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            if m.get("id") == self.next_id:
                assert "error" not in m, (method, m["error"])
                return m["result"]
            self.events.append(m)

    def event(self, method, pred=lambda p: True, timeout=WAIT_S):
        """The params of the first `method` event (seen before or now) for which pred holds."""
        deadline = time.monotonic() + timeout
        while True:
            for m in self.events:
                if m.get("method") == method and pred(m["params"]):
                    return m["params"]
            self.events.append(json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic()))))

    def evaluate(self, expression):
        """An expression's value (a promise is awaited), in the target's context."""
        r = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True})
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    def close(self):
        self.ws.close()


# ---- a network the test can cut ------------------------------------------------

class Proxy:
    """127.0.0.1:port -> the daemon's port. cut() drops every connection and
    refuses new ones; restore() listens again on the same port."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.conns = []
        self.lock = threading.Lock()
        self.port = 0
        self._listen()

    def _listen(self):
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", self.port))
        self.port = self.server.getsockname()[1]
        self.server.listen(64)
        threading.Thread(target=self._accept, args=(self.server,), daemon=True).start()

    def _accept(self, server):
        while True:
            try:
                c, _ = server.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        # shutdown first: a close alone leaves the accept() blocked in the other thread listening
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def restore(self):
        self._listen()
