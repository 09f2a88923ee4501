"""Framing: detected from the first bytes, replies in the peer's framing, and
the stdio transport on pipes, files, /dev/null and a TTY."""
import json
import os
import pty
import select
import subprocess
import time
import tty

import pytest

from conftest import binary, validate_response, validate_result

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


def lsp(body: bytes, name=b"Content-Length") -> bytes:
    return name + b": %d\r\n\r\n" % len(body) + body


def test_lsp_round_trip_answers_in_lsp(lsp_server):
    assert lsp_server.request("ping") == {}
    assert lsp_server.request("debug.echo", {"k": "v"}) == {"k": "v"}
    assert set(lsp_server.frames) == {"lsp"}


def test_ndjson_round_trip_answers_in_ndjson(server):
    assert server.request("debug.echo", {"k": "v"}) == {"k": "v"}
    assert set(server.frames) == {"ndjson"}


@pytest.mark.parametrize("name", [b"content-length", b"CONTENT-LENGTH", b"Content-length"])
def test_lsp_header_names_are_case_insensitive(raw_server, name):
    raw_server.send_raw(lsp(PING, name))
    r = raw_server.recv()
    assert r["result"] == {} and raw_server.frames == ["lsp"]


def test_lsp_content_type_accepted_in_any_order(raw_server):
    body = PING
    raw_server.send_raw(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    raw_server.send_raw(b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(body) + body)
    assert raw_server.recv()["result"] == {}
    assert raw_server.recv()["result"] == {}


def test_lsp_bare_newline_headers_and_leading_blank_lines(raw_server):
    raw_server.send_raw(b"\r\n\nContent-Length: %d\n\n" % len(PING) + PING)
    assert raw_server.recv()["result"] == {}


def test_lsp_split_across_writes_byte_by_byte(raw_server):
    data = lsp(PING) * 2
    for i in range(len(data)):
        raw_server.send_raw(data[i:i + 1])
        if i % 16 == 0:
            time.sleep(0.001)
    assert raw_server.recv()["id"] == 1
    assert raw_server.recv()["id"] == 1


def test_many_messages_in_one_write_both_framings(spawn):
    for framing in ("lsp", "ndjson"):
        c = spawn(framing=framing, initialize=False)
        msgs = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}).encode() for i in range(300)]
        c.send_raw(b"".join(c.frame(m) for m in msgs))
        assert [c.recv()["id"] for _ in range(300)] == list(range(300))
        assert set(c.frames) == {framing}


def test_ndjson_crlf_blank_lines_and_bom(raw_server):
    raw_server.send_raw(b"\xef\xbb\xbf\r\n\n  " + PING + b"\r\n\r\n   \n" + PING + b"\n")
    assert raw_server.recv()["id"] == 1
    assert raw_server.recv()["id"] == 1
    raw_server.expect_silence()


def test_ndjson_last_line_without_newline_is_answered_at_eof(raw_server):
    raw_server.send_raw(PING)
    raw_server.close_stdin()
    assert raw_server.recv()["result"] == {}
    assert raw_server.wait() == 0


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
def test_large_message_under_the_limit(spawn, framing):
    c = spawn(framing=framing)
    blob = "x" * (3 << 20)
    assert c.request("debug.echo", {"blob": blob}, timeout=20) == {"blob": blob}
    assert c.request("ping") == {}


def run_with_files(tmp_path, stdin_bytes, stdout_path=None):
    inp = tmp_path / "in"
    inp.write_bytes(stdin_bytes)
    out = stdout_path or (tmp_path / "out")
    with open(inp, "rb") as i, open(out, "wb") as o:
        p = subprocess.run([binary(), "serve", "--ephemeral"], stdin=i, stdout=o, stderr=subprocess.PIPE, timeout=20)
    return p.returncode, (open(out, "rb").read() if stdout_path is None else b""), p.stderr


def test_stdin_and_stdout_regular_files(tmp_path):
    reqs = b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}).encode() + b"\n" for i in range(2000))
    rc, out, err = run_with_files(tmp_path, reqs)
    assert rc == 0, err
    lines = out.splitlines()
    assert [json.loads(l)["id"] for l in lines] == list(range(2000))


def test_stdin_file_in_lsp_framing(tmp_path):
    rc, out, err = run_with_files(tmp_path, lsp(PING) + lsp(b'{"jsonrpc":"2.0","id":2,"method":"rpc.discover"}'))
    assert rc == 0, err
    assert out.startswith(b"Content-Length: ")
    assert out.count(b"Content-Length: ") == 2


def test_stdout_dev_null(tmp_path):
    rc, _, err = run_with_files(tmp_path, PING + b"\n", stdout_path="/dev/null")
    assert rc == 0, err


def test_stdin_dev_null_exits_cleanly():
    p = subprocess.run([binary(), "serve", "--ephemeral"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    assert p.returncode == 0
    assert p.stdout == b""


def test_stdin_closed_fd_exits_cleanly():
    p = subprocess.run(["sh", "-c", f"exec '{binary()}' serve --ephemeral <&-"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b""


def test_tty_stdin_and_stdout():
    master, slave = pty.openpty()
    tty.setraw(slave)  # no echo, no line editing: bytes pass as written
    p = subprocess.Popen([binary(), "serve", "--ephemeral"], stdin=slave, stdout=slave,
                         stderr=subprocess.PIPE)
    os.close(slave)
    try:
        os.write(master, PING + b"\n")
        buf = b""
        deadline = time.time() + 10
        while b"\n" not in buf and time.time() < deadline:
            r, _, _ = select.select([master], [], [], 0.5)
            if r:
                buf += os.read(master, 4096)
        msg = json.loads(buf.split(b"\n")[0])
        validate_response(msg)
        validate_result("ping", msg["result"])
        assert msg["id"] == 1
    finally:
        p.terminate()
        assert p.wait(timeout=10) == 0
        os.close(master)


def test_socketpair_stdio():
    import socket
    a, b = socket.socketpair()
    p = subprocess.Popen([binary(), "serve", "--ephemeral"], stdin=b.fileno(), stdout=b.fileno(),
                         stderr=subprocess.PIPE)
    b.close()
    try:
        a.sendall(PING + b"\n")
        a.settimeout(10)
        buf = b""
        while b"\n" not in buf:
            buf += a.recv(4096)
        assert json.loads(buf)["id"] == 1
        a.shutdown(socket.SHUT_WR)
        assert p.wait(timeout=10) == 0
    finally:
        a.close()
        if p.poll() is None:
            p.kill()
