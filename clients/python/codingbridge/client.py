"""The JSON-RPC 2.0 client: requests, notifications both ways, batches.

One reader thread takes every message off the transport: replies complete the
waiting call, server->client notifications are queued for a second thread that
runs the callbacks, so a callback may itself call the server.
"""
import itertools
import json
import queue
import threading
import traceback
from concurrent.futures import Future

from .methods import Methods


class RPCError(Exception):
    """An error response: code, message, data (what was wrong)."""

    def __init__(self, error):
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")
        super().__init__(f"{self.code} {self.message}" + (f" {json.dumps(self.data)}" if self.data else ""))


class Client(Methods):
    """A connection to the server. `transport`: see codingbridge.transport (or
    use connect_stdio / connect_unix / connect_websocket)."""

    def __init__(self, transport, timeout=30):
        self.transport = transport
        self.timeout = timeout
        self.init_result = None  # initialize's result, when connect_* initialized
        self._ids = itertools.count(1)
        self._pending = {}
        self._lock = threading.Lock()
        self._callbacks = {}
        self._notes = queue.Queue()
        self.closed = threading.Event()
        threading.Thread(target=self._read, name="codingbridge-reader", daemon=True).start()
        threading.Thread(target=self._run_callbacks, name="codingbridge-callbacks", daemon=True).start()

    # -- sending --------------------------------------------------------
    def call_async(self, method, params=None):
        """Sends a request; -> a Future of its result (RPCError on an error reply)."""
        fut, msg = self._request(method, params)
        self._send(msg)
        return fut

    def call(self, method, params=None, timeout=None):
        """The result of `method`; raises RPCError on an error reply."""
        return self.call_async(method, params).result(self.timeout if timeout is None else timeout)

    def notify(self, method, params=None):
        self._send(self._message(method, params))

    def batch(self, calls, timeout=None):
        """Sends [(method, params), ...] as one batch; -> a list in the same
        order, each the result or the RPCError of that call."""
        pairs = [self._request(m, p) for m, p in calls]
        self._send([msg for _, msg in pairs])
        out = []
        for fut, _ in pairs:
            try:
                out.append(fut.result(self.timeout if timeout is None else timeout))
            except RPCError as e:
                out.append(e)
        return out

    def _message(self, method, params):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return msg

    def _request(self, method, params):
        msg = self._message(method, params)
        msg["id"] = next(self._ids)
        fut = Future()
        with self._lock:
            if self.closed.is_set():
                raise ConnectionError("the connection is closed")
            self._pending[msg["id"]] = fut
        return fut, msg

    def _send(self, msg):
        self.transport.send(json.dumps(msg, separators=(",", ":")))

    # -- notifications from the server -----------------------------------
    def on(self, method, callback):
        """callback(params) for every `method` notification ("*": every one,
        called as callback(method, params)). Runs on the client's callback
        thread, in arrival order."""
        self._callbacks.setdefault(method, []).append(callback)
        return callback

    def _run_callbacks(self):
        while True:
            note = self._notes.get()
            if note is None:
                return
            method, params = note
            calls = [(cb, (params,)) for cb in self._callbacks.get(method, [])]
            calls += [(cb, (method, params)) for cb in self._callbacks.get("*", [])]
            for cb, args in calls:
                try:
                    cb(*args)
                except Exception:  # one bad callback must not silence the others for good
                    traceback.print_exc()

    # -- receiving -------------------------------------------------------
    def _read(self):
        try:
            while True:
                text = self.transport.recv()
                if text is None:
                    break
                msg = json.loads(text)
                for m in msg if isinstance(msg, list) else [msg]:
                    self._deliver(m)
        except (OSError, ValueError):
            pass
        finally:
            self._fail_pending()

    def _deliver(self, m):
        if "method" in m and "id" not in m:
            self._notes.put((m["method"], m.get("params")))
            return
        with self._lock:
            fut = self._pending.pop(m.get("id"), None)
        if fut is None:
            return  # an error about something unparseable (id null): nothing waits for it
        if "error" in m:
            fut.set_exception(RPCError(m["error"]))
        else:
            fut.set_result(m.get("result"))

    def _fail_pending(self):
        with self._lock:
            self.closed.set()
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(ConnectionError("the server closed the connection"))
        self._notes.put(None)

    # -- lifecycle -------------------------------------------------------
    def close(self):
        """Closes the connection (a server started by connect_stdio ends with it)."""
        self.transport.close()
        self.closed.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
