"""Faults: SIGTERM in the middle of a batch, kill -9 at random points with a
pending approval and queued messages. Nothing the server acknowledged may be
lost; a batch's reply is all-or-nothing; a signal exits cleanly.

Related fault tests elsewhere: disk full (Tests/BridgeCoreTests/StoreFaultTests.swift,
a real size-limited file system), read-only state dir at startup
(test_store.py::test_read_only_file_system_at_startup) and while serving, kill -9
during a message.send flood (test_store_crash.py).

FAULT_ROUNDS (default 12) and FAULT_SEED (default random, printed) reproduce a run."""
import os
import random
import signal
import time

ROUNDS = int(os.environ.get("FAULT_ROUNDS", "12"))


def seed():
    s = int(os.environ.get("FAULT_SEED", random.randrange(1 << 30)))
    print(f"FAULT_SEED={s}")
    return random.Random(s)


def drain(c, timeout=2):
    """Every reply the server wrote before it went away."""
    out = []
    while True:
        try:
            out.append(c.recv(timeout=timeout))
        except (TimeoutError, EOFError):
            return out


def list_all(c):
    out, after = [], 0
    while True:
        page = c.request("outbox.list", {"status": "all", "afterId": after, "limit": 1000}, timeout=30)
        out += page["messages"]
        if page["nextAfterId"] is None:
            return out
        after = page["nextAfterId"]


def batch(rnd, b, n):
    return [{"jsonrpc": "2.0", "id": f"{rnd}:{b}:{i}", "method": "message.send",
             "params": {"sessionId": f"s{i % 3}", "text": f"{rnd}:{b}:{i}", "idempotencyKey": f"k{rnd}:{b}:{i}"}}
            for i in range(n)]


def test_sigterm_mid_batch_nothing_acknowledged_lost(spawn, tmp_path):
    """Batches of durable writes in flight, SIGTERM at a random moment: exit
    code 0, every batch reply complete (one reply per member, each a result),
    every answered message stored with the id it was given. Resending the
    unanswered batches with the same idempotency keys stores each message
    exactly once."""
    rng = seed()
    state = str(tmp_path / "state")
    answered = {}      # text -> id
    unanswered = []    # batches without a reply
    for rnd in range(ROUNDS):
        c = spawn("--state-dir", state)
        sent = []
        for b in range(rng.randrange(1, 6)):
            msgs = batch(rnd, b, rng.choice([1, 7, 50, 200]))
            sent.append(msgs)
            c.send(msgs)
        time.sleep(rng.choice([0, 0, 0.001, 0.005, 0.02, 0.1]))
        c.proc.send_signal(signal.SIGTERM)
        code = c.wait(timeout=15)
        assert code == 0, f"SIGTERM: exit {code}\n{c.stderr()[-2000:]}"
        replies = drain(c, timeout=0.5)
        got = set()
        for r in replies:
            assert isinstance(r, list), f"a batch must be answered with an array: {r}"
            ids = {m["id"] for m in r}
            # All-or-nothing per batch: the reply carries every member.
            batch_of = [msgs for msgs in sent if msgs[0]["id"] in ids]
            assert len(batch_of) == 1, f"reply matches no batch: {sorted(ids)[:3]}"
            assert ids == {m["id"] for m in batch_of[0]}, "partial batch reply"
            for m in r:
                assert "result" in m, f"member failed: {m}"
                answered[m["id"]] = m["result"]["id"]  # id == text
            got.add(batch_of[0][0]["id"])
        unanswered += [msgs for msgs in sent if msgs[0]["id"] not in got]

    c = spawn("--state-dir", state)
    stored = {m["payload"]["text"]: m for m in list_all(c)}
    lost = [t for t in answered if t not in stored]
    assert not lost, f"{len(lost)} acknowledged messages lost after SIGTERM, e.g. {lost[:5]}"
    moved = [t for t, i in answered.items() if stored[t]["id"] != i]
    assert not moved, f"acknowledged ids changed: {moved[:5]}"
    # The client retries what was never answered: same keys, no duplicates.
    for msgs in unanswered:
        c.send(msgs)
        r = c.recv(timeout=30)
        assert isinstance(r, list) and len(r) == len(msgs)
        for m in r:
            assert "result" in m, m
            text = m["id"]
            if text in stored:
                assert m["result"]["duplicate"] and m["result"]["id"] == stored[text]["id"]
    everything = list_all(c)
    texts = [m["payload"]["text"] for m in everything]
    assert len(texts) == len(set(texts)), "a message stored twice"
    expected = set(answered) | {m["id"] for msgs in unanswered for m in msgs}
    assert expected <= set(texts), f"missing after retry: {sorted(expected - set(texts))[:5]}"
    print(f"answered before SIGTERM: {len(answered)}, retried batches: {len(unanswered)}")
    c.request("shutdown")
    c.notify("exit")
    assert c.wait(timeout=10) == 0


def test_kill9_with_pending_approval_and_queued_messages(spawn, tmp_path):
    """kill -9 at a random point of a session with queued messages, deliveries
    in flight and a pending approval: every answered message.send is there
    after the restart, none delivered twice once acked; a decision the server
    answered is not lost. When the state has recovery of sessions/approvals
    (continuity), the pending approval is pending again or timed out and the
    badge matches."""
    rng = seed()
    state = str(tmp_path / "state")
    answered, acked = {}, set()
    for rnd in range(ROUNDS):
        c = spawn("--state-dir", state, "--manual-clock")
        c.request("connection.update", {"state": "connected"})
        c.request("agent.event", {"sessionId": f"s{rnd}", "type": "task_started"})
        rid = f"r{rnd}"
        c.request("agent.event", {"sessionId": f"s{rnd}", "type": "approval_request", "requestId": rid,
                                  "toolName": "Bash", "input": {"command": "make deploy"}})
        steps = rng.randrange(1, 60)
        decided = None
        for i in range(steps):
            op = rng.random()
            if op < 0.6:
                t = f"{rnd}:{i}"
                r = c.request("message.send", {"sessionId": f"s{rnd}", "text": t})
                answered[t] = r["id"]
            elif op < 0.9:
                for n in list(c.notifications):
                    if n["method"] == "outbox.deliver" and n["params"]["id"] not in acked:
                        try:
                            c.request("outbox.ack", {"id": n["params"]["id"]})
                            acked.add(n["params"]["id"])
                        except Exception:
                            pass  # delivered before the last restart: may be finished already
            elif op < 0.95 or decided:
                c.request("debug.advanceClock", {"ms": rng.choice([100, 1000, 30_000])})
            else:
                r = c.request("approval.respond", {"requestId": rid, "decision": "deny"})
                decided = r["status"]  # accepted (or expired if the clock passed 60 s)
        # Random point: sometimes with requests still in the pipe.
        for j in range(rng.randrange(0, 20)):
            c.send({"jsonrpc": "2.0", "id": f"late{j}", "method": "message.send",
                    "params": {"sessionId": f"s{rnd}", "text": f"{rnd}:late{j}"}})
        os.kill(c.proc.pid, signal.SIGKILL)
        c.proc.wait(timeout=10)
        for r in drain(c, timeout=0.3):
            for m in (r if isinstance(r, list) else [r]):
                if isinstance(m.get("id"), str) and m["id"].startswith("late") and "result" in m:
                    answered[f"{rnd}:{m['id']}"] = m["result"]["id"]

        c = spawn("--state-dir", state, "--manual-clock", initialize=False)
        init = c.initialize()
        rec = init["recovered"]
        stored = {m["payload"]["text"]: m for m in list_all(c)}
        lost = [t for t in answered if t not in stored]
        assert not lost, f"round {rnd}: {len(lost)} answered messages lost after kill -9: {lost[:5]}"
        assert all(stored[t]["id"] == i for t, i in answered.items())
        for mid in acked:
            ms = [m for m in stored.values() if m["id"] == mid]
            assert ms and ms[0]["status"] == "delivered", f"acked message {mid} not delivered after restart"
        if "pendingApprovals" in rec or "approvals" in rec:
            pending = c.request("approval.list", {})["approvals"]
            if decided == "accepted":
                # An answered decision is not lost: not pending again, a second answer is refused.
                assert not any(a["requestId"] == rid for a in pending), f"decided approval {rid} pending after kill -9"
                assert c.request("approval.respond", {"requestId": rid, "decision": "allow"})["status"] == "alreadyResolved"
            else:
                assert any(a["requestId"] == rid for a in pending) or \
                    c.request("approval.respond", {"requestId": rid, "decision": "allow"})["status"] in ("expired", "alreadyResolved")
        c.kill()
