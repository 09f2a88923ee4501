"""elapsed.format and debug.advanceClock over stdio, results checked against the spec."""
import pytest

from conftest import RPCFailure

CASES = [
    # seconds, positional, short, spoken
    (0, "0:00", "0s", "0 seconds"),
    (5, "0:05", "5s", "5 seconds"),
    (59.999, "0:59", "59s", "59 seconds"),
    (165, "2:45", "2m 45s", "2 minutes, 45 seconds"),
    (3599, "59:59", "59m 59s", "59 minutes, 59 seconds"),
    (3600, "1:00:00", "1h", "1 hour"),
    (3780, "1:03:00", "1h 3m", "1 hour, 3 minutes"),
    (86400, "24:00:00", "1d", "1 day"),
    (90187, "25:03:07", "1d 1h", "1 day, 1 hour, 3 minutes, 7 seconds"),
    (-12.5, "0:00", "0s", "0 seconds"),
    (1e308, "277777777777:46:39", "11574074074d 1h", "11574074074 days, 1 hour, 46 minutes, 39 seconds"),
]


@pytest.mark.parametrize("seconds,positional,short,spoken", CASES)
def test_elapsed_format_styles(server, seconds, positional, short, spoken):
    assert server.request("elapsed.format", {"seconds": seconds}) == {"text": positional}
    assert server.request("elapsed.format", {"seconds": seconds, "style": "positional"}) == {"text": positional}
    assert server.request("elapsed.format", {"seconds": seconds, "style": "short"}) == {"text": short}
    assert server.request("elapsed.format", {"seconds": seconds, "style": "spoken"}) == {"text": spoken}


def test_elapsed_format_words_from_the_locale_table(server):
    de = {"seconds": 90187, "locale": "de"}
    assert server.request("elapsed.format", {**de, "style": "spoken"}) == {"text": "1 Tag, 1 Stunde, 3 Minuten, 7 Sekunden"}
    assert server.request("elapsed.format", {**de, "style": "short"}) == {"text": "1T 1h"}
    assert server.request("elapsed.format", {**de, "style": "positional"}) == {"text": "25:03:07"}
    assert server.request("elapsed.format", {"seconds": 1, "style": "spoken", "locale": "de-CH"}) == {"text": "1 Sekunde"}
    # An unknown locale reads English; the default is the settings' locale.
    assert server.request("elapsed.format", {"seconds": 1, "style": "spoken", "locale": "xx"}) == {"text": "1 second"}
    server.request("settings.update", {"locale": "de"})
    assert server.request("elapsed.format", {"seconds": 120, "style": "spoken"}) == {"text": "2 Minuten"}
    assert server.request("elapsed.format", {"seconds": 120, "style": "spoken", "locale": "en"}) == {"text": "2 minutes"}


def test_elapsed_format_over_lsp_framing(lsp_server):
    assert lsp_server.request("elapsed.format", {"seconds": 165}) == {"text": "2:45"}


@pytest.mark.parametrize("params,param", [
    ({}, "seconds"),
    ({"seconds": "165"}, "seconds"),
    ({"seconds": None}, "seconds"),
    ({"seconds": 1, "style": "long"}, "style"),
    ({"seconds": 1, "locale": 7}, "locale"),
    ({"seconds": 1, "style": 3}, "style"),
])
def test_elapsed_format_invalid_params(server, params, param):
    with pytest.raises(RPCFailure) as e:
        server.request("elapsed.format", params)
    assert e.value.code == -32602
    assert e.value.data["param"] == param
    # The server keeps serving after an error.
    assert server.request("elapsed.format", {"seconds": 61}) == {"text": "1:01"}


def test_advance_clock_moves_the_manual_clock(server):
    r1 = server.request("debug.advanceClock", {"ms": 60_000})
    assert r1["now"] == 60_000 and r1["fired"] == 0
    r2 = server.request("debug.advanceClock", {"ms": 3_600_000})
    assert r2["now"] == 3_660_000
    assert r2["wallClockMs"] - r1["wallClockMs"] == 3_600_000
    assert server.request("debug.advanceClock", {"ms": 0})["now"] == 3_660_000


def test_advance_clock_by_a_year_in_one_step_and_no_more(server):
    year = 366 * 86_400_000
    r = server.request("debug.advanceClock", {"ms": year})
    assert r["now"] == year
    with pytest.raises(RPCFailure) as e:
        server.request("debug.advanceClock", {"ms": year + 1})
    assert e.value.code == -32602 and "out of range [0, 31622400000]" in e.value.message
    assert e.value.data["maximum"] == 31_622_400_000
    assert server.request("debug.advanceClock", {"ms": 0})["now"] == year


@pytest.mark.parametrize("params", [{}, {"ms": -1}, {"ms": 1.5}, {"ms": "10"}, {"ms": 2**62}])
def test_advance_clock_invalid_params(server, params):
    with pytest.raises(RPCFailure) as e:
        server.request("debug.advanceClock", params)
    assert e.value.code == -32602
    assert e.value.data["param"] == "ms"


def test_advance_clock_needs_manual_clock(spawn):
    c = spawn("--ephemeral")
    with pytest.raises(RPCFailure) as e:
        c.request("debug.advanceClock", {"ms": 1000})
    assert e.value.code == -32040
    assert "--manual-clock" in e.value.data["reason"]
    assert c.request("elapsed.format", {"seconds": 5}) == {"text": "0:05"}


def test_methods_are_in_the_spec_with_their_errors(server):
    doc = server.request("rpc.discover", validate=False)
    names = {m["name"]: m for m in doc["methods"]}
    assert "elapsed.format" in names and "debug.advanceClock" in names
    refs = [e.get("$ref", "") for e in names["debug.advanceClock"]["errors"]]
    assert "#/components/errors/ManualClockDisabled" in refs
    assert doc["components"]["errors"]["ManualClockDisabled"]["code"] == -32040


def test_advance_clock_fires_an_approval_timeout_exactly_at_60s(server):
    """The 60 s approval timeout runs on the scheduler: nothing fires at
    59.999 s, it fires at 60 s, and its effects are sent before the
    advanceClock answer (same stream, so they are already received)."""
    base = {"sessionId": "s1", "projectName": "MyApp", "projectPath": "~/code/MyApp"}
    server.request("agent.event", {**base, "type": "task_started"})
    server.request("agent.event", {**base, "type": "approval_request", "requestId": "r1",
                                   "toolName": "Bash", "input": {"command": "npm test"}})
    assert server.request("debug.advanceClock", {"ms": 59_999})["fired"] == 0
    assert not [n for n in server.notifications if n["method"] == "approval.resolved"]
    r = server.request("debug.advanceClock", {"ms": 1})
    assert r["fired"] >= 1 and r["now"] == 60_000
    resolved = [n["params"] for n in server.notifications if n["method"] == "approval.resolved"]
    assert [p["requestId"] for p in resolved] == ["r1"]
