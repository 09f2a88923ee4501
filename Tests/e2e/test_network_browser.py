"""The Origin rule with a real browser: headless chromium loads a page from a
foreign origin (a Python http.server on another port) whose script opens
`new WebSocket("ws://127.0.0.1:PORT/rpc")`, sends a ping and writes the outcome
into document.title and reports it to the page's server (GET /report?OUTCOME):
`--dump-dom` with --virtual-time-budget prints the DOM before a WebSocket settles,
so chromium runs headless until the report arrives. Foreign origin -> the
upgrade is refused (403: the browser reports an error); started with
`--allow-origin http://127.0.0.1:OTHERPORT` -> the ping is answered.
"""
import functools
import http.server
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import urllib.parse

import pytest

from netharness import net  # noqa: F401

PAGE = """<!doctype html><html><head><title>PENDING</title></head><body><script>
const ws = new WebSocket("%(url)s");
const done = t => {
  if (document.title !== "PENDING") return;
  document.title = t;
  fetch("/report?" + encodeURIComponent(t));  // to the page's own server: the test reads it there
};
ws.onopen = () => ws.send(JSON.stringify({jsonrpc: "2.0", id: 1, method: "ping"}));
ws.onmessage = e => { done("OK " + e.data); ws.close(); };
ws.onerror = () => done("ERROR");
ws.onclose = e => { if (!document.title.startsWith("OK")) done("CLOSED " + e.code); };
</script></body></html>
"""


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    pytest.skip("chromium is not installed (scripts/deps.sh --test installs it)")


@pytest.fixture
def page_server():
    """Serves one page (set by the test) from http://127.0.0.1:OTHERPORT/."""
    root = tempfile.mkdtemp(prefix="cbn-www-")
    reports = queue.Queue()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/report?"):
                reports.put(urllib.parse.unquote(self.path.split("?", 1)[1]))
                self.send_response(204)
                self.end_headers()
                return
            super().do_GET()

        def log_message(self, *a):
            pass

    handler = functools.partial(Handler, directory=root)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()

    class Pages:
        port = httpd.server_address[1]
        origin = "http://127.0.0.1:%d" % httpd.server_address[1]
        outcomes = reports

        def put(self, ws_url):
            with open(os.path.join(root, "index.html"), "w") as f:
                f.write(PAGE % {"url": ws_url})
            return self.origin + "/index.html"

    yield Pages()
    httpd.shutdown()
    shutil.rmtree(root, ignore_errors=True)


def browse(pages, url, timeout=20):
    """The page's outcome (what its script put in document.title) once chromium has run it."""
    exe = chromium()
    profile = tempfile.mkdtemp(prefix="cbn-chromium-")
    errf = tempfile.TemporaryFile()
    p = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-extensions", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                          "--remote-debugging-port=0", url],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf)
    try:
        return pages.outcomes.get(timeout=timeout)
    except queue.Empty:
        errf.seek(0)
        pytest.fail(f"the page reported nothing within {timeout}s; chromium: {errf.read()[-2000:]!r}")
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


def test_browser_on_a_foreign_origin_is_refused(net, page_server):
    s = net()
    outcome = browse(page_server, page_server.put(s.url() + "/rpc"))
    assert outcome == "ERROR", outcome  # the 403 at the upgrade: onerror, then close 1006
    assert s.alive()


def test_browser_on_an_allowed_origin_connects(net, page_server):
    s = net("--allow-origin", page_server.origin)
    # (ping is served before authentication, so this holds once devices must pair too)
    outcome = browse(page_server, page_server.put(s.url() + "/rpc"))
    assert outcome.startswith("OK "), outcome
    assert '"result":{}' in outcome and '"id":1' in outcome
