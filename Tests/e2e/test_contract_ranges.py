"""The contract itself: every number a client sends has a documented range,
and every identifier is the bounded `Id` schema (the server enforces both
from rpc-spec/openrpc.json, see ParamContract.swift)."""
import json

from conftest import SPEC_PATH

SPEC = json.load(open(SPEC_PATH, encoding="utf-8"))
SCHEMAS = SPEC["components"]["schemas"]
ID_NAMES = ("Id", "_id", "idempotencyKey", "handedOffTo")


def walk(schema, path, seen=frozenset()):
    """(path, schema) for every schema reachable from one param."""
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        yield path, schema
        if name not in seen and name != "Id":
            yield from walk(SCHEMAS[name], path, seen | {name})
        return
    yield path, schema
    for k, v in schema.get("properties", {}).items():
        yield from walk(v, f"{path}.{k}", seen)
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[]", seen)
    for k in ("oneOf", "anyOf", "allOf"):
        for x in schema.get(k, []):
            yield from walk(x, path, seen)


def every_param():
    for m in SPEC["methods"]:
        for p in m.get("params", []):
            yield from walk(p["schema"], f"{m['name']}:{p['name']}")


def test_every_number_in_params_has_a_minimum_and_a_maximum():
    missing = [path for path, s in every_param()
               if s.get("type") in ("integer", "number") and ("minimum" not in s or "maximum" not in s)]
    assert missing == []


def test_every_identifier_param_is_an_id():
    wrong = []
    for path, s in every_param():
        name = path.rsplit(".", 1)[-1].split(":")[-1]
        if name.endswith(ID_NAMES) and s.get("type") == "string":
            wrong.append(path)
    assert wrong == []
    assert SCHEMAS["Id"]["maxLength"] == 128 and SCHEMAS["Id"]["pattern"] == "^[^\\u0000-\\u001f\\u007f]+$"


def test_only_agent_adapters_and_echo_take_extra_names():
    open_ended = sorted(m["name"] for m in SPEC["methods"] if m.get("x-additionalParams"))
    assert open_ended == ["agent.claudecodeui", "agent.hook", "agent.streamJson", "debug.echo"]
