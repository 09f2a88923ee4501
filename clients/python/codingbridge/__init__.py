"""A client for CodingBridge Core's JSON-RPC 2.0 server (rpc-spec/openrpc.json).

    from codingbridge import connect_unix
    with connect_unix() as cb:                     # the daemon's socket
        cb.on("session.changed", lambda p: print(p["session"]))
        print(cb.session_list())

Standard library only, except connect_websocket (the `websockets` package).
"""
from .client import Client, RPCError
from .transport import Stdio, Unix, WebSocket, default_socket

__all__ = ["Client", "RPCError", "connect_stdio", "connect_unix", "connect_websocket", "default_socket"]


def _start(transport, initialize, timeout, **init):
    client = Client(transport, timeout=timeout)
    if initialize:
        try:
            client.init_result = client.initialize(**init)
        except BaseException:
            client.close()
            raise
    return client


def connect_stdio(command="codingbridge", args=("--ephemeral",), initialize=True, timeout=30,
                  stderr=None, **init):
    """Starts `command serve *args` and talks to it on its stdin/stdout; the
    server ends when the client closes. `init`: initialize's params."""
    return _start(Stdio(command, args, stderr=stderr), initialize, timeout, **init)


def connect_unix(path=None, state_dir=None, initialize=True, timeout=30, **init):
    """Connects to a daemon's socket: `path`, else <state_dir>/codingbridge.sock,
    else the default one (XDG_STATE_HOME or ~/.local/state)."""
    return _start(Unix(path, state_dir), initialize, timeout, **init)


def connect_websocket(url, token=None, cert_sha256=None, ssl=None, initialize=True, timeout=30, **init):
    """Connects to `ws[s]://HOST:PORT/rpc` as a paired device (token), pinning
    a self-signed certificate by its SHA-256 (cert_sha256)."""
    return _start(WebSocket(url, token=token, cert_sha256=cert_sha256, ssl=ssl), initialize, timeout, **init)
