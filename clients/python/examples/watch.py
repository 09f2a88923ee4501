#!/usr/bin/env python3
"""Watch sessions and approve from the terminal.

    python3 examples/watch.py                      # the daemon's default socket
    python3 examples/watch.py --state-dir DIR      # a daemon started with --state-dir DIR
    python3 examples/watch.py --auto allow --exit-when-done   # unattended (tests, scripts)

Prints a line whenever a session changes; for each approval it asks
"Allow? [y/N]" (or answers --auto at once).
"""
import argparse
import os
import queue
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from codingbridge import RPCError, connect_unix  # noqa: E402

MARKS = {"processing": "●", "awaitingApproval": "◆", "awaitingAnswer": "◆", "awaitingInput": "◆", "completed": "✓", "error": "✗"}


def name(s):
    return s["projectName"] or os.path.basename(s["projectPath"] or "") or s["id"]


def line(s):
    parts = [f"{MARKS.get(s['status'], '○')} {name(s)}", s["status"]]
    if s["operation"]:
        parts.append(s["operation"])
    if s["progress"]:
        parts.append(f"{s['progress']['completed']}/{s['progress']['total']}")
    return " · ".join(parts)


def watch(cb, events):
    """Feeds `events` from the client's notification thread: ("approval", a)
    for each new approval, ("done", session) when a task completes."""
    seen = set()

    def changed(params):
        s = params["session"]
        if s is None:
            return
        print(line(s), flush=True)
        if s["pendingApprovalCount"]:
            for a in cb.approval_list(s["id"])["approvals"]:
                if a["requestId"] not in seen:
                    seen.add(a["requestId"])
                    events.put(("approval", a))
        if s["status"] == "completed":
            events.put(("done", s))

    cb.on("session.changed", changed)
    for s in cb.session_list()["sessions"]:
        changed({"session": s})


def decide(cb, a, auto):
    prompt = f"Approve {a['toolName']}: {a['summary']} ({int(a['remainingSeconds'])} s left)? [y/N] "
    if auto:
        print(prompt + auto, flush=True)
        decision = auto
    else:
        decision = "allow" if input(prompt).strip().lower() in ("y", "yes") else "deny"
    r = cb.approval_respond(a["requestId"], decision)
    print(f"{decision}: {r['status']}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", help="the daemon's socket (default: from --state-dir or XDG_STATE_HOME)")
    ap.add_argument("--state-dir")
    ap.add_argument("--auto", choices=["allow", "deny"], help="answer every approval without asking")
    ap.add_argument("--exit-when-done", action="store_true", help="exit after the first completed task")
    args = ap.parse_args()
    events = queue.Queue()
    try:
        cb = connect_unix(args.socket, args.state_dir, device_id="terminal")
    except OSError as e:
        sys.exit(f"no daemon: {e} (start one: codingbridge serve --listen unix --no-stdio)")
    with cb:
        watch(cb, events)
        threading.Thread(target=lambda: (cb.closed.wait(), events.put(("closed", None))), daemon=True).start()
        while True:
            kind, item = events.get()
            if kind == "approval":
                try:
                    decide(cb, item, args.auto)
                except RPCError as e:
                    print(f"not sent: {e}", flush=True)
            elif kind == "closed":
                sys.exit("the server closed the connection")
            elif args.exit_when_done:
                print(f"Task Complete: {name(item)}", flush=True)
                return


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
