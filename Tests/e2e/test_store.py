"""The durable store over JSON-RPC: message.send, outbox.*, draft.*,
connection.update and the outbox.deliver / outbox.undeliverable notifications,
plus state-directory faults at startup. Results are validated against the spec."""
import os
import stat
import subprocess

import pytest

from conftest import RPCFailure, binary, validate_notification


def deliver(c, timeout=5, predicate=None):
    return validate_notification("outbox.deliver", c.wait_notification("outbox.deliver", timeout=timeout, predicate=predicate))


def outbox_notes(c):
    return [n for n in c.notifications if n["method"].startswith("outbox.")]


def failure(c, method, params):
    with pytest.raises(RPCFailure) as e:
        c.request(method, params)
    return e.value


@pytest.fixture
def state_dir(tmp_path):
    return str(tmp_path / "state")


def test_send_list_and_survive_restart(spawn, state_dir):
    c = spawn("--state-dir", state_dir)
    ids = [c.request("message.send", {"sessionId": "s1", "text": f"hello {i}"}) for i in range(3)]
    assert [r["status"] for r in ids] == ["queued"] * 3
    assert all(not r["duplicate"] for r in ids)
    other = c.request("message.send", {"sessionId": "s2", "text": "elsewhere"})
    assert [r["id"] for r in ids] == sorted(r["id"] for r in ids)
    listed = c.request("outbox.list", {"sessionId": "s1"})
    assert [m["payload"]["text"] for m in listed["messages"]] == ["hello 0", "hello 1", "hello 2"]
    assert listed["nextAfterId"] is None
    c.kill()  # SIGKILL: only what was answered counts, and all of it was
    c = spawn("--state-dir", state_dir, initialize=False)
    init = c.initialize()
    assert init["recovered"]["queuedMessages"] == 4
    allm = c.request("outbox.list", {})["messages"]
    assert [m["id"] for m in allm] == [r["id"] for r in ids] + [other["id"]]
    assert all(m["status"] == "queued" and m["attempts"] == 0 for m in allm)
    # Files are private to the user.
    assert stat.S_IMODE(os.stat(state_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(state_dir, "codingbridge.db")).st_mode) == 0o600


def test_paging(server):
    for i in range(5):
        server.request("message.send", {"sessionId": "p", "text": str(i)})
    page1 = server.request("outbox.list", {"limit": 2})
    assert [m["payload"]["text"] for m in page1["messages"]] == ["0", "1"]
    page2 = server.request("outbox.list", {"limit": 2, "afterId": page1["nextAfterId"]})
    page3 = server.request("outbox.list", {"limit": 2, "afterId": page2["nextAfterId"]})
    assert [m["payload"]["text"] for m in page2["messages"] + page3["messages"]] == ["2", "3", "4"]
    assert page3["nextAfterId"] is None


def test_idempotency_key(server):
    a = server.request("message.send", {"sessionId": "s", "text": "once", "idempotencyKey": "k-1"})
    b = server.request("message.send", {"sessionId": "s", "text": "once", "idempotencyKey": "k-1"})
    assert b == {"id": a["id"], "status": "queued", "duplicate": True}
    assert len(server.request("outbox.list", {"sessionId": "s"})["messages"]) == 1
    e = failure(server, "message.send", {"sessionId": "s", "text": "something else", "idempotencyKey": "k-1"})
    assert e.code == -32053 and e.data["id"] == a["id"] and e.data["idempotencyKey"] == "k-1"
    # Same key inside one batch (one loop turn, one transaction): still one message.
    server.send([{"jsonrpc": "2.0", "id": 100 + i, "method": "message.send",
                  "params": {"sessionId": "b", "text": "batched", "idempotencyKey": "k-2"}} for i in range(3)])
    replies = server.recv()
    assert sorted(r["id"] for r in replies) == [100, 101, 102]
    assert len({r["result"]["id"] for r in replies}) == 1
    assert sorted(r["result"]["duplicate"] for r in replies) == [False, True, True]


def test_invalid_params_are_explained(server):
    e = failure(server, "message.send", {"text": "no session"})
    assert e.code == -32602 and e.data["param"] == "sessionId"
    e = failure(server, "message.send", {"sessionId": "", "text": "x"})
    assert e.code == -32602 and e.data["param"] == "sessionId"
    e = failure(server, "message.send", {"sessionId": "s", "text": 5})
    assert e.code == -32602 and e.data == {"param": "text", "expected": "string", "got": "integer"}
    e = failure(server, "outbox.ack", {"id": "7"})
    assert e.code == -32602 and e.data["param"] == "id"
    e = failure(server, "outbox.list", {"status": "lost"})
    assert e.code == -32602 and "pending" in e.data["expected"]
    e = failure(server, "connection.update", {"state": "maybe"})
    assert e.code == -32602 and e.data["param"] == "state"


def test_unknown_and_finished_ids(server):
    e = failure(server, "outbox.ack", {"id": 4242})
    assert e.code == -32051 and e.data["id"] == 4242 and "4242" in e.data["reason"]
    e = failure(server, "outbox.fail", {"id": 4242, "error": "x"})
    assert e.code == -32051 and e.data["id"] == 4242
    m = server.request("message.send", {"sessionId": "s", "text": "x"})
    assert server.request("outbox.ack", {"id": m["id"]}) == {"id": m["id"], "status": "delivered"}
    e = failure(server, "outbox.ack", {"id": m["id"]})
    assert e.code == -32052 and "already delivered" in e.data["reason"]
    assert server.request("outbox.list", {"status": "delivered"})["messages"][0]["id"] == m["id"]
    # Delivered messages keep their idempotency: a late retry does not resend.
    assert server.request("outbox.list", {})["messages"] == []


def test_delivery_fifo_per_session_ack_fail_and_backoff(server):
    a1 = server.request("message.send", {"sessionId": "a", "text": "a1"})["id"]
    a2 = server.request("message.send", {"sessionId": "a", "text": "a2"})["id"]
    b1 = server.request("message.send", {"sessionId": "b", "text": "b1"})["id"]
    server.expect_silence(0.2)  # nothing is delivered while disconnected
    assert not outbox_notes(server)
    assert server.request("connection.update", {"state": "connected"}) == {"state": "connected", "pending": 3}
    got = {deliver(server)["id"], deliver(server)["id"]}
    assert got == {a1, b1}  # one per session: a2 waits for a1
    server.expect_silence(0.2)
    assert [n["method"] for n in outbox_notes(server)] == ["outbox.deliver"] * 2
    server.request("outbox.ack", {"id": a1})
    d = deliver(server)
    assert d == {"id": a2, "sessionId": "a", "kind": "message", "payload": {"text": "a2"}, "attempt": 1}
    # A failed attempt is retried after the backoff (500 ms with full jitter for the first retry).
    f = server.request("outbox.fail", {"id": b1, "error": "websocket closed"})
    assert f["status"] == "queued" and f["attempts"] == 1 and f["nextAttemptAt"] is not None
    server.request("debug.advanceClock", {"ms": 501})
    d = deliver(server, predicate=lambda p: p["id"] == b1)
    assert d["attempt"] == 2
    listed = server.request("outbox.list", {"sessionId": "b"})["messages"][0]
    assert listed["status"] == "inflight" and listed["lastError"] == "websocket closed"
    # Giving up: failed, and the client is told.
    f = server.request("outbox.fail", {"id": b1, "error": "rejected", "retry": False})
    assert f == {"id": b1, "status": "failed", "attempts": 2, "nextAttemptAt": None}
    e = failure(server, "outbox.ack", {"id": b1})
    assert e.code == -32052 and "failed" in e.data["reason"]


def test_finished_history_is_pruned_after_a_week(server):
    """Delivered messages stay listable for 7 days, then go (hourly pruning), so
    a daemon's database does not grow with every message it ever sent; a
    queued message is never pruned, however old."""
    done = server.request("message.send", {"sessionId": "a", "text": "sent", "idempotencyKey": "k1"})["id"]
    waiting = server.request("message.send", {"sessionId": "b", "text": "still waiting"})["id"]
    server.request("connection.update", {"state": "connected"})
    for _ in range(2):
        deliver(server)
    server.request("outbox.ack", {"id": done})
    server.request("connection.update", {"state": "disconnected"})
    week = 7 * 24 * 3_600_000

    def ids():
        return [m["id"] for m in server.request("outbox.list", {"status": "all"})["messages"]]

    server.request("debug.advanceClock", {"ms": week - 3_600_000})
    assert ids() == [done, waiting]
    server.request("debug.advanceClock", {"ms": 2 * 3_600_000})
    assert ids() == [waiting]
    # Its idempotency key is free again.
    again = server.request("message.send", {"sessionId": "a", "text": "sent", "idempotencyKey": "k1"})
    assert again["duplicate"] is False and again["id"] > waiting
    # The week counts from when a message finished, not from when it was sent:
    # `waiting`, queued for over a week, is delivered now and kept another week.
    server.request("connection.update", {"state": "connected"})
    got = {deliver(server)["id"], deliver(server)["id"]}
    assert got == {waiting, again["id"]}
    for i in got:
        server.request("outbox.ack", {"id": i})
    server.request("debug.advanceClock", {"ms": 2 * 3_600_000})
    assert ids() == [waiting, again["id"]]
    server.request("debug.advanceClock", {"ms": week})
    assert ids() == []


def test_missing_ack_counts_as_failed_attempt(server):
    m = server.request("message.send", {"sessionId": "s", "text": "x"})["id"]
    server.request("connection.update", {"state": "connected"})
    assert deliver(server)["attempt"] == 1
    server.request("debug.advanceClock", {"ms": 30_000})  # ack deadline
    msg = server.request("outbox.list", {})["messages"][0]
    assert msg["status"] == "queued" and msg["lastError"].startswith("no ack within")
    server.request("debug.advanceClock", {"ms": 1_000})  # first backoff is at most 500 ms
    assert deliver(server, predicate=lambda p: p["id"] == m)["attempt"] == 2


def test_disconnect_requeues_and_reconnect_redelivers(server):
    m = server.request("message.send", {"sessionId": "s", "text": "x"})["id"]
    server.request("connection.update", {"state": "connected"})
    assert deliver(server)["id"] == m
    r = server.request("connection.update", {"state": "failed"})
    assert r == {"state": "failed", "pending": 1}
    assert server.request("outbox.list", {})["messages"][0]["status"] == "queued"
    server.request("connection.update", {"state": "connected"})
    d = deliver(server)
    assert d["id"] == m and d["attempt"] == 2


def test_expiry_tells_the_client(server):
    m = server.request("message.send", {"sessionId": "s", "text": "stale", "ttlMs": 1000})["id"]
    server.request("debug.advanceClock", {"ms": 2000})
    server.request("connection.update", {"state": "connected"})
    u = validate_notification("outbox.undeliverable", server.wait_notification("outbox.undeliverable"))
    assert u["id"] == m and u["status"] == "expired"
    assert server.request("outbox.list", {"status": "expired"})["messages"][0]["id"] == m
    e = failure(server, "message.send", {"sessionId": "s", "text": "x", "ttlMs": 0})
    assert e.code == -32602 and e.data["param"] == "ttlMs"


def test_drafts_persist(spawn, state_dir):
    c = spawn("--state-dir", state_dir, framing="lsp")
    assert c.request("draft.get", {"sessionId": "s"}) == {"sessionId": "s", "text": None, "savedAt": None}
    saved = c.request("draft.save", {"sessionId": "s", "text": "half-typed 🚧 message"})
    c.request("draft.save", {"sessionId": "t", "text": "other"})
    c.kill()
    c = spawn("--state-dir", state_dir)
    got = c.request("draft.get", {"sessionId": "s"})
    assert got == {"sessionId": "s", "text": "half-typed 🚧 message", "savedAt": saved["savedAt"]}
    assert c.request("draft.clear", {"sessionId": "s"}) == {"sessionId": "s", "cleared": True}
    assert c.request("draft.clear", {"sessionId": "s"}) == {"sessionId": "s", "cleared": False}
    assert c.request("draft.get", {"sessionId": "t"})["text"] == "other"


def run_serve(*args, timeout=10):
    p = subprocess.run([binary(), "serve", *args], input=b"", capture_output=True, timeout=timeout)
    return p.returncode, p.stderr.decode("utf-8", "replace")


def test_second_server_on_same_directory_is_refused(spawn, state_dir):
    first = spawn("--state-dir", state_dir)
    code, err = run_serve("--state-dir", state_dir)
    assert code != 0
    assert "in use by another codingbridge process" in err and f"pid {first.proc.pid}" in err, err
    # The first one is unaffected.
    assert first.request("message.send", {"sessionId": "s", "text": "still here"})["status"] == "queued"


def test_unreadable_database_is_refused_and_kept(tmp_path):
    d = tmp_path / "state"
    d.mkdir()
    junk = b"not a database at all\n" * 200
    (d / "codingbridge.db").write_bytes(junk)
    code, err = run_serve("--state-dir", str(d))
    assert code != 0 and "not a readable SQLite database" in err and "left untouched" in err, err
    assert (d / "codingbridge.db").read_bytes() == junk


def test_newer_schema_is_refused(spawn, tmp_path):
    import sqlite3
    d = str(tmp_path / "state")
    c = spawn("--state-dir", d)
    c.request("message.send", {"sessionId": "s", "text": "keep"})
    c.close_stdin()
    assert c.wait() == 0
    db = sqlite3.connect(os.path.join(d, "codingbridge.db"))
    db.execute("PRAGMA user_version=42")
    db.commit()
    db.close()
    code, err = run_serve("--state-dir", d)
    assert code != 0 and "schema version 42" in err and "newer" in err, err


def test_unwritable_state_directory(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    code, err = run_serve("--state-dir", str(f / "state"))
    assert code != 0 and "cannot create state directory" in err, err


def _mount_tmpfs(path, size):
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                          capture_output=True).returncode == 0


def test_full_disk_is_an_error_on_the_call_and_the_server_keeps_serving(spawn, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if not _mount_tmpfs(str(mnt), "320k"):
        pytest.skip("needs permission to mount a tmpfs (a real full disk)")
    try:
        c = spawn("--state-dir", str(mnt))
        answered, err = [], None
        for i in range(200):
            try:
                answered.append(c.request("message.send", {"sessionId": "s", "text": f"{i}:" + "x" * 16_000})["id"])
            except RPCFailure as e:
                err = e
                break
        assert err is not None, "the disk never filled up"
        assert err.code == -32050 and err.data["kind"] == "diskFull", err
        assert "full" in err.data["reason"]
        assert answered, "nothing fit before the disk was full"
        # Still serving: reads work, and small writes fail cleanly or succeed, never crash.
        assert [m["id"] for m in c.request("outbox.list", {"limit": 1000})["messages"]] == answered
        subprocess.run(["mount", "-o", "remount,size=8m", str(mnt)], check=True)
        more = c.request("message.send", {"sessionId": "s", "text": "after freeing space"})["id"]
        c.kill()
        c = spawn("--state-dir", str(mnt))
        assert [m["id"] for m in c.request("outbox.list", {"limit": 1000})["messages"]] == answered + [more]
        c.kill()
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_read_only_state_directory_is_a_clear_startup_error(spawn, tmp_path):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if not _mount_tmpfs(str(mnt), "4m"):
        pytest.skip("needs permission to mount a tmpfs (a real read-only file system)")
    try:
        c = spawn("--state-dir", str(mnt / "state"))
        c.request("message.send", {"sessionId": "s", "text": "written before ro"})
        c.close_stdin()
        assert c.wait() == 0
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        code, err = run_serve("--state-dir", str(mnt / "state"))
        assert code == 2 and "is not writable" in err and "Read-only file system" in err, err
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True)
        c = spawn("--state-dir", str(mnt / "state"))
        assert [m["payload"]["text"] for m in c.request("outbox.list", {})["messages"]] == ["written before ro"]
        c.kill()
    finally:
        subprocess.run(["umount", "-l", str(mnt)])
