#!/usr/bin/env python3
"""Black-box fuzzing of the real binary over stdio, generated from the contract.

Each round starts `codingbridge serve --ephemeral --manual-clock`, sets up a
working session with an approval and a question pending, then sends requests
whose params are built from rpc-spec/openrpc.json (refs resolved, nested
properties, enums, boundary numbers, strings at and past maxLength, odd
unicode, wrong types, unknown names). The oracle: the process never dies,
every request gets exactly one well-formed response (a PermissionRequest hook
once the clock passes its timeout), errors use JSON-RPC's codes or
-32099..-32000 with a data object, and `ping` still answers at the end.

A failing round is written to regressions/ as JSON lines (the exact requests)
and replayed first on every run.
"""
import argparse, hashlib, json, os, random, select, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SPEC = json.load(open(os.path.join(ROOT, "rpc-spec", "openrpc.json"), encoding="utf-8"))
SCHEMAS = SPEC["components"]["schemas"]
PARAMS = {m["name"]: m.get("params", []) for m in SPEC["methods"]}
STOPPERS = {"exit", "shutdown"}  # end the round early; the oracle wants a long-lived server
STANDARD = {-32700, -32600, -32601, -32602, -32603, -32002}
INTS = [0, -1, 1, 59, 60, 86400, 86401, 2**31 - 1, 2**31, -2**31, 2**53, 2**53 + 1, -2**53,
        2**63 - 1, -2**63, 2**63 - 2]
FLOATS = [0.5, -0.0, 1e308, -1e308, 5e-324, 9.3e18, -9.3e18, 86400.5]
ODD = ["", "a" * 5000, "a\u0000b", "\u0001\u007f", "\u202eevil", "👩‍👩‍👧‍👦", "\u0301", "\ufffd",
       "e\u0301\u0302\u0303", "\"\\", "line\nbreak", "s1", "phone"]
LIVE = ["live", "r0", "q0"]


class Fail(Exception):
    pass


def resolve(s):
    ref = s.get("$ref") if isinstance(s, dict) else None
    return SCHEMAS.get(ref.split("/")[-1], {}) if ref else (s if isinstance(s, dict) else {})


def anything(rng, depth=0):
    """Any JSON value, nested a little."""
    k = rng.randrange(7 if depth < 2 else 5)
    if k == 0:
        return None
    if k == 1:
        return rng.random() < 0.5
    if k == 2:
        return rng.choice(INTS)
    if k == 3:
        return rng.choice(FLOATS)
    if k == 4:
        return rng.choice(ODD)
    if k == 5:
        return [anything(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(ODD + ["x"]): anything(rng, depth + 1)}


def gen(rng, schema, depth=0):
    s = resolve(schema)
    if rng.random() < 0.1 or depth > 4:
        return anything(rng)
    if s.get("enum") and rng.random() < 0.9:
        return rng.choice(s["enum"])
    t = s.get("type")
    t = rng.choice(t) if isinstance(t, list) else t
    if t == "string":
        r = rng.random()
        if r < 0.25:
            return rng.choice(ODD)
        if r < 0.4:
            return "é" * (s.get("maxLength", 200) + rng.randrange(2))
        return rng.choice(LIVE + ["Bash", "npm test", "allow", "deny", "A", "Which?"])
    if t in ("integer", "number"):
        lo, hi = s.get("minimum"), s.get("maximum")
        r = rng.random()
        if r < 0.3:
            return rng.choice(INTS)
        if r < 0.45:
            return rng.choice(FLOATS)
        if r < 0.6 and lo is not None:
            return lo - rng.randrange(2)
        if r < 0.75 and hi is not None:
            return hi + rng.randrange(2)
        return rng.randrange(-1000, 100000)
    if t == "boolean":
        return rng.random() < 0.5
    if t == "array":
        return [gen(rng, s.get("items", {}), depth + 1) for _ in range(rng.randrange(4))]
    props = s.get("properties")
    if props:
        o = {k: gen(rng, v, depth + 1) for k, v in props.items() if rng.random() < 0.7}
        if rng.random() < 0.05:
            o["unknownName"] = 1
        return o
    return anything(rng)


def params_for(rng, method):
    if rng.random() < 0.05:
        return anything(rng)
    o = {p["name"]: gen(rng, p["schema"]) for p in PARAMS.get(method, []) if p.get("required") or rng.random() < 0.6}
    if rng.random() < 0.05:
        o[rng.choice(["timeoutSecond", "sessionID", "x"])] = 1
    # A year of manual clock fires ~700k connection retries: seconds each (a
    # minute under ASan). Keep a few, so the budget goes to everything else.
    ms = o.get("ms") if method == "debug.advanceClock" else None
    if isinstance(ms, (int, float)) and ms > 86_400_000 and rng.random() < 0.95:
        o["ms"] = 86_400_000
    return o


def setup_requests():
    """A working session in the background with an approval and a question pending."""
    return [
        ("app.update", {"phase": "background"}),
        ("agent.event", {"sessionId": "live", "type": "task_started", "projectName": "MyApp", "projectPath": "/tmp/a"}),
        ("agent.event", {"sessionId": "live", "type": "approval_request", "requestId": "r0", "toolName": "Bash",
                         "input": {"command": "npm test"}, "timeoutSeconds": 3600}),
        ("agent.event", {"sessionId": "live", "type": "question", "questionId": "q0",
                         "questions": [{"question": "Which?", "options": [{"label": "A"}, {"label": "B"}]}]}),
    ]


class Server:
    def __init__(self, binary):
        self.p = subprocess.Popen([binary, "serve", "--ephemeral", "--manual-clock", "--log-level", "error"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.buf = b""
        self.sent = []

    def send(self, msg):
        line = json.dumps(msg, ensure_ascii=False)
        self.sent.append(line)
        try:
            self.p.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise Fail("the server closed its input (it died)")

    def reply(self, rid, timeout=10.0):
        """The response with id `rid`, or None after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    raise Fail(f"the server wrote invalid JSON: {line[:300]!r}")
                if "method" not in msg and msg.get("id") == rid:
                    return msg
                if msg.get("id") is None and msg.get("error", {}).get("code") == -32700:
                    return msg  # one request in flight: it was the unparseable one (jansson: NUL in a key)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.p.stdout], [], [], left)
            if ready:
                chunk = os.read(self.p.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise Fail(f"the server exited (status {self.p.wait()}): {self.p.stderr.read()[-2000:]!r}")
                self.buf += chunk

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def check(msg, what):
    if msg is None:
        raise Fail(f"no response to {what}")
    if msg.get("jsonrpc") != "2.0" or ("result" in msg) == ("error" in msg):
        raise Fail(f"malformed response {msg} to {what}")
    e = msg.get("error")
    if e is not None:
        code = e.get("code")
        if not isinstance(code, int) or not isinstance(e.get("message"), str):
            raise Fail(f"bad error {e} to {what}")
        if code not in STANDARD and not -32099 <= code <= -32000:
            raise Fail(f"bad error code {code} to {what}")
        if -32099 <= code <= -32000 and not isinstance(e.get("data"), dict):
            raise Fail(f"application error without data {e} to {what}")


def call(srv, rid, method, params):
    msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    srv.send(msg)
    what = json.dumps(msg, ensure_ascii=False)[:300]
    # A year of manual clock fires every retry and reminder due in it (~1M timers).
    r = srv.reply(rid, timeout={"agent.hook": 2.0, "debug.advanceClock": 120.0}.get(method, 10.0))
    if r is None and method == "agent.hook":
        # A PermissionRequest answers when its approval resolves: past the
        # longest approval timeout it must have timed out.
        srv.send({"jsonrpc": "2.0", "id": f"clock{rid}", "method": "debug.advanceClock", "params": {"ms": 86_401_000}})
        r = srv.reply(rid)
    check(r, what)


def run_round(binary, requests):
    """Sends `requests` ([(method, params)]) to a fresh server; raises Fail."""
    srv = Server(binary)
    try:
        srv.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
        check(srv.reply(0), "initialize")
        for i, (method, params) in enumerate(requests, start=1):
            call(srv, i, method, params)
        srv.send({"jsonrpc": "2.0", "id": "alive", "method": "ping"})
        check(srv.reply("alive"), "the final ping")
    except Fail as f:
        raise Fail(f"{f}\n(after {len(srv.sent)} messages)") from None
    finally:
        srv.close()
    return len(requests)


def save(requests):
    text = "".join(json.dumps({"method": m, "params": p}, ensure_ascii=False) + "\n" for m, p in requests)
    path = os.path.join(HERE, "regressions", "crash-" + hashlib.sha1(text.encode()).hexdigest()[:16] + ".jsonl")
    open(path, "w", encoding="utf-8").write(text)
    return path


def replay(binary):
    files = sorted(f for f in os.listdir(os.path.join(HERE, "regressions")) if f.endswith(".jsonl"))
    for f in files:
        lines = open(os.path.join(HERE, "regressions", f), encoding="utf-8").read().splitlines()
        run_round(binary, [(d["method"], d["params"]) for d in map(json.loads, lines)])
    return len(files)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--per-round", type=int, default=300, help="requests per server")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    methods = sorted(set(PARAMS) - STOPPERS - {"initialize"})
    print(f"blackbox fuzz: seed {seed}; replayed {replay(a.binary)} regression(s)", file=sys.stderr)
    deadline, sent, rounds = time.monotonic() + a.seconds, 0, 0
    while time.monotonic() < deadline:
        reqs = setup_requests() + [(m, params_for(rng, m)) for m in
                                   (rng.choice(methods) for _ in range(a.per_round))]
        try:
            sent += run_round(a.binary, reqs)
        except Fail as f:
            print(f"blackbox fuzz: FAILED (seed {seed}): {f}\nsaved {save(reqs)}", file=sys.stderr)
            return 1
        rounds += 1
    print(f"blackbox fuzz: ok: {sent} requests over {rounds} servers in {a.seconds:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
