"""Every example of JSON-RPC 2.0 specification section 7, adapted to this server.

The spec's `subtract`/`sum`/`get_data` become `debug.echo` (returns its named
params) and `ping`; `update`/`notify_hello` become notifications of existing
methods; `foobar` stays unknown. This server takes named params only (as the
spec allows), so the positional example gets a precise -32602.
Every result is validated against rpc-spec/openrpc.json.
"""
import json

import pytest

from conftest import validate_error, validate_response, validate_result


def send_line(c, text):
    c.send_raw(text.encode() + b"\n")


def test_call_with_positional_parameters_is_rejected_precisely(server):
    r = server.call("debug.echo", [42, 23], id=1)
    assert r["id"] == 1
    assert r["error"]["code"] == -32602
    assert r["error"]["data"]["expected"] == "object"
    assert r["error"]["data"]["got"] == "array"


@pytest.mark.parametrize("params", [{"subtrahend": 23, "minuend": 42}, {"minuend": 42, "subtrahend": 23}])
def test_call_with_named_parameters(server, params):
    r = server.call("debug.echo", params, id=3)
    assert r == {"jsonrpc": "2.0", "id": 3, "result": params}
    validate_result("debug.echo", r["result"])


def test_notifications_get_no_reply(server):
    server.notify("debug.echo", {"values": [1, 2, 3, 4, 5]})
    server.notify("foobar")  # unknown method, but a notification: still silent
    server.expect_silence()
    assert server.request("ping") == {}


def test_non_existent_method(server):
    r = server.call("foobar", id="1")
    assert r["id"] == "1"
    assert r["error"]["code"] == -32601
    assert r["error"]["message"] == "Method not found"
    assert r["error"]["data"] == {"method": "foobar"}


def test_invalid_json(server):
    send_line(server, '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
    r = server.recv()
    validate_response(r)
    assert r["id"] is None
    assert r["error"]["code"] == -32700
    assert "reason" in r["error"]["data"]


def test_invalid_request_object(server):
    send_line(server, '{"jsonrpc": "2.0", "method": 1, "params": "bar"}')
    r = server.recv()
    validate_response(r)
    assert r["id"] is None
    assert r["error"]["code"] == -32600
    assert r["error"]["data"]["member"] == "method"


def test_batch_invalid_json(server):
    send_line(server, '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method"]')
    r = server.recv()
    assert isinstance(r, dict)  # a single error, not an array
    assert r["error"]["code"] == -32700 and r["id"] is None


def test_empty_array(server):
    send_line(server, "[]")
    r = server.recv()
    assert isinstance(r, dict)
    assert r["error"]["code"] == -32600 and r["id"] is None
    assert r["error"]["data"]["reason"] == "empty batch"


def test_invalid_batch_but_not_empty(server):
    send_line(server, "[1]")
    r = server.recv()
    assert isinstance(r, list) and len(r) == 1
    validate_response(r[0])
    assert r[0]["error"]["code"] == -32600 and r[0]["id"] is None


def test_invalid_batch(server):
    send_line(server, "[1,2,3]")
    r = server.recv()
    assert isinstance(r, list) and len(r) == 3
    for e in r:
        validate_response(e)
        assert e["error"]["code"] == -32600 and e["id"] is None


def test_mixed_batch(server):
    batch = [
        {"jsonrpc": "2.0", "method": "debug.echo", "params": {"sum": [1, 2, 4]}, "id": "1"},
        {"jsonrpc": "2.0", "method": "debug.echo", "params": {"hello": [7]}},
        {"jsonrpc": "2.0", "method": "debug.echo", "params": {"subtract": [42, 23]}, "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "ping", "id": "9"},
    ]
    send_line(server, json.dumps(batch))
    r = server.recv()
    assert isinstance(r, list) and len(r) == 5
    for e in r:
        validate_response(e)
    by_id = {e["id"]: e for e in r if e["id"] is not None}
    assert by_id["1"]["result"] == {"sum": [1, 2, 4]}
    assert by_id["2"]["result"] == {"subtract": [42, 23]}
    assert by_id["5"]["error"]["code"] == -32601
    assert by_id["9"]["result"] == {}
    validate_result("debug.echo", by_id["1"]["result"])
    validate_result("ping", by_id["9"]["result"])
    invalid = [e for e in r if e["id"] is None]
    assert len(invalid) == 1 and invalid[0]["error"]["code"] == -32600


def test_batch_all_notifications_gets_nothing(server):
    send_line(server, json.dumps([
        {"jsonrpc": "2.0", "method": "debug.echo", "params": {"x": [1, 2, 4]}},
        {"jsonrpc": "2.0", "method": "debug.echo", "params": {"y": [7]}},
    ]))
    server.expect_silence()
    assert server.request("ping") == {}


@pytest.mark.parametrize("id", ["abc", "", 0, -7, 2**53, 1.5, None, "\u00e9\u2603"])
def test_id_kinds_are_echoed_exactly(server, id):
    r = server.call("ping", id=id)
    assert r["id"] == id and type(r["id"]) is type(id)
    validate_result("ping", r["result"])


def test_batch_over_lsp(lsp_server):
    lsp_server.send([{"jsonrpc": "2.0", "method": "ping", "id": 1},
                     {"jsonrpc": "2.0", "method": "debug.echo", "params": {"a": 1}, "id": 2}])
    r = lsp_server.recv()
    assert sorted(e["id"] for e in r) == [1, 2]
    assert lsp_server.frames[-1] == "lsp"


def test_errors_are_well_formed(server):
    r = server.call("foobar", id=5)
    validate_error(r["error"])


def test_rpc_discover_is_exactly_the_spec_file(raw_server):
    from conftest import SPEC_PATH
    with open(SPEC_PATH, encoding="utf-8") as f:
        on_disk = json.load(f)
    assert raw_server.request("rpc.discover") == on_disk  # embedded at build time, fresh
