"""`codingbridge devices pair|list|revoke` against a running daemon
(`serve --state-dir D --listen unix --no-stdio`): the code, the URL built from
the daemon's listen.json, the QR code, listing and revoking, and the exit
codes (0 ok, 1 failure, 2 usage)."""
import json
import os
import re
import socket
import subprocess
import time
import pytest
from conftest import binary, validate_result

CODE = re.compile(r"Pairing code: ([0-9A-HJKMNP-TV-Z]{5}-[0-9A-HJKMNP-TV-Z]{5})")


class Daemon:
    def __init__(self, state):
        self.state = state
        self.sock = os.path.join(state, "codingbridge.sock")
        self.proc = subprocess.Popen([binary(), "serve", "--state-dir", state, "--listen", "unix", "--no-stdio"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.sock):
            assert self.proc.poll() is None, self.proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the daemon's socket never appeared"
            time.sleep(0.02)

    def call(self, method, params):
        """One request on a fresh local connection (initialize first)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(self.sock)
            s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}) + "\n" +
                       json.dumps({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}) + "\n").encode())
            buf = b""
            while True:
                chunk = s.recv(65536)
                assert chunk, "connection closed before the reply"
                buf += chunk
                for line in buf.split(b"\n")[:-1]:
                    m = json.loads(line)
                    if m.get("id") == 2:
                        return m

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def state(sockdir):
    return sockdir


@pytest.fixture
def daemon(state):
    d = Daemon(state)
    yield d
    d.close()


def devices(*args, state):
    p = subprocess.run([binary(), "devices", *args, "--state-dir", state], capture_output=True, timeout=30)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_pair_prints_a_code_and_says_there_is_no_network_listener(daemon):
    rc, out, err = devices("pair", "--name", "phone", state=daemon.state)
    assert rc == 0, err
    assert CODE.search(out)
    assert "no network listener" in out


def test_pair_prints_the_url_of_the_first_listener_and_its_qr_code(daemon):
    with open(os.path.join(daemon.state, "listen.json"), "w") as f:
        json.dump({"listen": [{"url": "ws://127.0.0.1:41234", "certSha256": None}]}, f)
    rc, out, err = devices("pair", state=daemon.state)
    assert rc == 0, err
    code = CODE.search(out).group(1)
    assert f"http://127.0.0.1:41234/#pair={code}" in out
    assert "\u2588" in out and ("\u2580" in out or "\u2584" in out), "no QR code drawn"
    assert "Certificate" not in out


def test_a_wss_listener_gives_an_https_url_and_the_certificate_fingerprint(daemon):
    with open(os.path.join(daemon.state, "listen.json"), "w") as f:
        json.dump({"listen": [{"url": "wss://192.0.2.10:8443/rpc", "certSha256": "AB:CD:EF"}]}, f)
    rc, out, _ = devices("pair", state=daemon.state)
    code = CODE.search(out).group(1)
    assert rc == 0 and f"https://192.0.2.10:8443/#pair={code}" in out
    assert "AB:CD:EF" in out


def test_the_url_is_one_a_phone_can_reach(daemon):
    # a LAN listener wins over a loopback one; a wildcard address becomes an
    # address of this machine
    with open(os.path.join(daemon.state, "listen.json"), "w") as f:
        json.dump({"listen": [{"url": "ws://127.0.0.1:41234", "certSha256": None},
                              {"url": "wss://0.0.0.0:8443", "certSha256": "ab"}]}, f)
    rc, out, err = devices("pair", state=daemon.state)
    assert rc == 0, err
    url = re.search(r"Open on the device: (\S+)", out).group(1)
    assert url.startswith("https://") and ":8443/#pair=" in url, url
    assert "127.0.0.1" not in url
    host = url[len("https://"):].split(":")[0]
    if host != "0.0.0.0":  # (a machine without any interface but loopback keeps it)
        socket.inet_aton(host)


def test_a_paired_device_is_listed_and_revoked(daemon):
    _, out, _ = devices("pair", state=daemon.state)
    code = CODE.search(out).group(1)
    paired = daemon.call("device.pair", {"code": code.lower().replace("-", ""), "name": "tablet"})
    dev = paired["result"]["deviceId"]
    rc, out, _ = devices("list", state=daemon.state)
    assert rc == 0 and dev in out and "tablet" in out and "paired" in out and "never" in out
    rc, out, _ = devices("list", "--json", state=daemon.state)
    listed = json.loads(out)
    validate_result("device.list", listed)
    assert [d["deviceId"] for d in listed["devices"]] == [dev]
    rc, out, err = devices("revoke", dev, state=daemon.state)
    assert rc == 0 and dev in out, err
    _, out, _ = devices("list", state=daemon.state)
    assert "revoked" in out
    audit = daemon.call("audit.list", {})["result"]["entries"]
    assert [e["kind"] for e in audit] == ["device.pair", "device.revoke"]
    assert all(e["connection"] == "socket" and e["address"] is None for e in audit)


def test_a_code_works_once(daemon):
    _, out, _ = devices("pair", state=daemon.state)
    code = CODE.search(out).group(1)
    assert "result" in daemon.call("device.pair", {"code": code, "name": "a"})
    again = daemon.call("device.pair", {"code": code, "name": "b"})
    assert again["error"]["code"] == -32001 and again["error"]["data"]["reason"]


def test_revoking_an_unknown_device_fails_with_exit_1(daemon):
    rc, _, err = devices("revoke", "dev-0000000000000000", state=daemon.state)
    assert rc == 1 and "Unknown device" in err


def test_usage_errors_exit_2(daemon):
    rc, _, err = devices("revoke", state=daemon.state)
    assert rc == 2 and "Missing expected argument" in err
    rc, _, _ = devices("pair", "--bogus", state=daemon.state)
    assert rc == 2


def test_no_daemon_is_a_clear_failure(state):
    rc, _, err = devices("list", state=state)
    assert rc == 1 and "no codingbridge daemon" in err
