"""The APNs test server (apnsserver.py) checks what Apple checks: proven here
with a small HTTP/2 client on the `h2` package, so the daemon's push tests can
trust its verdicts."""
import json
import socket
import ssl
import time
import uuid

import h2.config
import h2.connection
import h2.events
import pytest

from apnsserver import APNsServer, apns_server, generate_p8, make_jwt  # noqa: F401 (apns_server: fixture)

TOKEN = "a1" * 32
ALERT = {"aps": {"alert": {"title": "Approval needed", "body": "Bash: rm -rf build"}}}


class H2Client:
    """One HTTP/2 connection to the server; requests may overlap."""

    def __init__(self, srv, alpn=("h2",)):
        ctx = ssl.create_default_context(cafile=srv.ca_file)
        ctx.set_alpn_protocols(list(alpn))
        self.sock = ctx.wrap_socket(socket.create_connection((srv.host, srv.port), timeout=5),
                                    server_hostname="localhost")
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.done, self.partial, self.terminated = {}, {}, None

    def send(self, path, headers, body):
        sid = self.conn.get_next_available_stream_id()
        base = [(":method", "POST"), (":scheme", "https"), (":authority", "localhost"), (":path", path)]
        self.conn.send_headers(sid, base + list(headers.items()))
        self.conn.send_data(sid, body, end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        self.partial[sid] = [None, {}, b""]
        return sid

    def wait(self, sids, timeout=5):
        deadline = time.monotonic() + timeout
        while not all(s in self.done for s in sids) and self.terminated is None:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            if not data:
                break
            for ev in self.conn.receive_data(data):
                self._event(ev)
            self.sock.sendall(self.conn.data_to_send())
        return [self.done.get(s) for s in sids]

    def _event(self, ev):
        if isinstance(ev, h2.events.ResponseReceived):
            headers = dict(ev.headers)
            self.partial[ev.stream_id][0] = int(headers.pop(":status"))
            self.partial[ev.stream_id][1] = headers
        elif isinstance(ev, h2.events.DataReceived):
            self.partial[ev.stream_id][2] += ev.data
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            status, headers, body = self.partial.pop(ev.stream_id)
            self.done[ev.stream_id] = (status, headers, json.loads(body) if body else None)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.terminated = ev

    def post(self, path, headers, body, timeout=5):
        return self.wait([self.send(path, headers, body)], timeout)[0]

    def close(self):
        self.sock.close()


def push(srv, client=None, token=TOKEN, payload=ALERT, jwt=None, drop=(), **headers):
    """One push with valid defaults; headers override (apns_topic= -> apns-topic), drop removes."""
    h = {"authorization": f"bearer {jwt or srv.jwt()}", "apns-topic": srv.bundle_id,
         "apns-push-type": "alert", "apns-priority": "10"}
    h.update({k.replace("_", "-"): v for k, v in headers.items()})
    for name in drop:
        h.pop(name)
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    own = client is None
    client = client or H2Client(srv)
    try:
        return client.post(f"/3/device/{token}", h, body)
    finally:
        if own:
            client.close()


def reason(answer):
    return answer[0], (answer[2] or {}).get("reason")


def test_valid_push_is_accepted_and_recorded(apns_server):
    status, headers, body = push(apns_server, apns_expiration="0", apns_collapse_id="session-1")
    assert status == 200 and body is None
    assert uuid.UUID(headers["apns-id"])
    rec = apns_server.wait_for(lambda reqs: reqs)[0]
    assert rec.accepted and rec.token == TOKEN and rec.payload == ALERT and rec.apns_id == headers["apns-id"]
    assert rec.jwt["iss"] == apns_server.team_id and rec.headers["apns-collapse-id"] == "session-1"
    assert rec.wall == pytest.approx(time.time(), abs=5) and rec.mono <= time.monotonic()
    sent = str(uuid.uuid4())
    assert push(apns_server, apns_id=sent)[1]["apns-id"] == sent  # the client's id comes back


def test_provider_token_checks(apns_server):
    srv = apns_server
    other_key = generate_p8()
    assert reason(push(srv, jwt=make_jwt(other_key, srv.key_id, srv.team_id))) == (403, "InvalidProviderToken")
    assert reason(push(srv, jwt=make_jwt(srv.key_pem, "OTHERKEYID", srv.team_id))) == (403, "InvalidProviderToken")
    assert reason(push(srv, jwt=make_jwt(srv.key_pem, srv.key_id, "OTHERTEAM1"))) == (403, "InvalidProviderToken")
    assert reason(push(srv, jwt=make_jwt(srv.key_pem, srv.key_id, srv.team_id, alg="HS256"))) == \
        (403, "InvalidProviderToken")
    assert reason(push(srv, jwt=srv.jwt(iat=int(time.time()) - 3700))) == (403, "ExpiredProviderToken")
    assert reason(push(srv, jwt=srv.jwt(iat=int(time.time() * 1000)))) == (403, "InvalidProviderToken")  # ms
    assert reason(push(srv, jwt=srv.jwt(iat=int(time.time()) - 3000))) == (200, None)
    assert reason(push(srv, drop=["authorization"])) == (403, "MissingProviderToken")
    assert reason(push(srv, jwt="not-a-jwt")) == (403, "InvalidProviderToken")


def test_public_key_only(tmp_path):
    key = generate_p8()
    from cryptography.hazmat.primitives import serialization
    pub = serialization.load_pem_private_key(key, None).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    with APNsServer(key=pub, team_id="T1", key_id="K1", bundle_id="a.b") as srv:
        assert reason(push(srv, jwt=make_jwt(key, "K1", "T1"))) == (200, None)


def test_header_checks(apns_server):
    srv = apns_server
    cases = [
        (dict(drop=["apns-topic"]), (400, "MissingTopic")),
        (dict(apns_topic="com.other.app"), (400, "TopicDisallowed")),
        (dict(apns_topic=srv.bundle_id + ".voip"), (400, "DeviceTokenNotForTopic")),
        (dict(apns_push_type="banner"), (400, "InvalidPushType")),
        (dict(drop=["apns-push-type"]), (400, "InvalidPushType")),
        (dict(apns_priority="7"), (400, "BadPriority")),
        (dict(apns_push_type="background", payload={"aps": {"content-available": 1}}), (400, "BadPriority")),
        (dict(apns_push_type="background", apns_priority="5", payload={"aps": {"content-available": 1}}),
         (200, None)),
        (dict(apns_expiration="tomorrow"), (400, "BadExpirationDate")),
        (dict(apns_collapse_id="x" * 65), (400, "BadCollapseId")),
        (dict(apns_collapse_id="x" * 64), (200, None)),
        (dict(apns_id="not-a-uuid"), (400, "BadMessageId")),
        (dict(token="abc"), (400, "BadDeviceToken")),
        (dict(token="zz" * 32), (400, "BadDeviceToken")),
        (dict(token="ab" * 101), (400, "BadDeviceToken")),
        (dict(token="ab" * 100), (200, None)),
    ]
    client = H2Client(srv)
    for kwargs, want in cases:
        assert reason(push(srv, client, **kwargs)) == want, kwargs
    client.close()
    assert srv.connections == 1


def test_payload_checks(apns_server):
    srv = apns_server
    client = H2Client(srv)
    big = {"aps": {"alert": "x" * 4100}}
    assert reason(push(srv, client, payload=big)) == (413, "PayloadTooLarge")
    assert reason(push(srv, client, payload={"aps": {"alert": "x" * 4000}})) == (200, None)
    voip = dict(apns_push_type="voip", apns_topic=srv.bundle_id + ".voip")
    assert reason(push(srv, client, payload={"aps": {}, "x": "y" * 4500}, **voip)) == (200, None)
    assert reason(push(srv, client, payload=b"")) == (400, "PayloadEmpty")
    assert reason(push(srv, client, payload=b"{not json")) == (400, "BadPayload")
    assert reason(push(srv, client, payload=[1, 2])) == (400, "BadPayload")
    assert reason(push(srv, client, payload={"alert": "no aps"})) == (400, "BadPayload")
    client.close()


def test_live_activity(apns_server):
    srv = apns_server
    la = dict(apns_push_type="liveactivity", apns_topic=srv.bundle_id + ".push-type.liveactivity")
    now = int(time.time())
    update = {"aps": {"event": "update", "timestamp": now, "content-state": {"step": 2}}}
    start = {"aps": {"event": "start", "timestamp": now, "content-state": {"step": 1},
                     "attributes-type": "SessionAttributes", "attributes": {"session": "s1"},
                     "alert": {"title": "Session started"}}}
    client = H2Client(srv)
    assert reason(push(srv, client, payload=update, **la)) == (200, None)
    assert reason(push(srv, client, payload=start, **la)) == (200, None)
    assert reason(push(srv, client, payload={"aps": {"event": "end", "timestamp": now}}, **la)) == (200, None)
    # the app's topic without the live-activity suffix
    assert reason(push(srv, client, payload=update, apns_push_type="liveactivity")) == \
        (400, "DeviceTokenNotForTopic")
    bad = [{"event": "pause", "timestamp": now, "content-state": {}},
           {"event": "update", "timestamp": "now", "content-state": {}},
           {"event": "update", "timestamp": now},
           {"event": "update", "timestamp": now, "content-state": "x"},
           {"event": "start", "timestamp": now, "content-state": {}, "attributes": {}},
           {"event": "start", "timestamp": now, "content-state": {}, "attributes-type": "A"}]
    for aps in bad:
        assert reason(push(srv, client, payload={"aps": aps}, **la)) == (400, "BadPayload"), aps
    client.close()


def test_scripted_answers_then_200(apns_server):
    srv = apns_server
    srv.script(TOKEN, [(410, "Unregistered"), (429, "TooManyRequests"), (500, "InternalServerError"),
                       (403, "ExpiredProviderToken")])
    client = H2Client(srv)
    # an invalid request does not consume the script
    assert reason(push(srv, client, drop=["apns-topic"])) == (400, "MissingTopic")
    gone = push(srv, client)
    assert reason(gone) == (410, "Unregistered") and gone[2]["timestamp"] > 0
    assert gone[1]["content-type"] == "application/json" and gone[1]["apns-id"]
    assert [reason(push(srv, client))[1] for _ in range(4)] == \
        ["TooManyRequests", "InternalServerError", "ExpiredProviderToken", None]
    assert reason(push(srv, client, token="b2" * 32)) == (200, None)  # other tokens unaffected
    client.close()
    assert [r.status for r in srv.requests] == [400, 410, 429, 500, 403, 200, 200]
    assert len(srv.accepted()) == 2 and len(srv.rejected()) == 5


def test_many_streams_on_one_connection(apns_server):
    srv = apns_server
    client = H2Client(srv)
    h = {"authorization": f"bearer {srv.jwt()}", "apns-topic": srv.bundle_id, "apns-push-type": "alert"}
    sids = [client.send(f"/3/device/{i:064x}", h, json.dumps(ALERT).encode()) for i in range(300)]
    answers = client.wait(sids)
    assert all(a and a[0] == 200 for a in answers)
    assert len({a[1]["apns-id"] for a in answers}) == 300
    assert srv.connections == 1 and {r.conn_id for r in srv.requests} == {1}
    client.close()


def test_stall_reset_and_close_connections(apns_server):
    srv = apns_server
    stalled, reset = "c3" * 32, "d4" * 32
    srv.script(stalled, ["stall"])
    srv.script(reset, ["reset"])
    client = H2Client(srv)
    h = {"authorization": f"bearer {srv.jwt()}", "apns-topic": srv.bundle_id, "apns-push-type": "alert"}
    body = json.dumps(ALERT).encode()
    s1 = client.send(f"/3/device/{stalled}", h, body)
    s2 = client.send(f"/3/device/{reset}", h, body)
    s3 = client.send(f"/3/device/{TOKEN}", h, body)
    assert client.wait([s3])[0][0] == 200
    srv.wait_for(lambda reqs: len(reqs) == 3)
    assert s1 not in client.done and s2 not in client.done
    assert sorted(r.reason or "" for r in srv.requests) == ["", "reset", "stall"]
    srv.close_connections(goaway=True)
    client.wait([s1], timeout=2)
    assert client.terminated is not None and client.terminated.error_code == 0
    client.close()
    # abrupt: the socket is closed under the client
    client = H2Client(srv)
    assert reason(push(srv, client)) == (200, None)
    srv.close_connections(goaway=False)
    with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
        for _ in range(20):
            push(srv, client)
            time.sleep(0.01)
    client.close()
    assert srv.connections == 2


def test_http1_is_refused(apns_server):
    with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
        client = H2Client(apns_server, alpn=("http/1.1",))
        client.sock.sendall(b"POST /3/device/x HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.sock.recv(100) == b""
        raise ConnectionError("closed")


def test_wait_for_times_out(apns_server):
    with pytest.raises(TimeoutError):
        apns_server.wait_for(lambda reqs: len(reqs) > 0, timeout=0.05)
