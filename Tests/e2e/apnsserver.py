"""A local APNs (Apple Push Notification service) for the end-to-end tests.

HTTP/2 only (TLS, ALPN "h2"; the `h2` package on asyncio, in a background
thread), with a throwaway CA and certificate for 127.0.0.1/localhost whose CA
file is `ca_file`. It checks what Apple checks and answers as Apple does:
200 with an `apns-id` header (the request's, else a generated UUID), or an
error status with `{"reason": "..."}` (410 adds "timestamp").

    from apnsserver import APNsServer, make_jwt, apns_server  # apns_server: a fixture

    srv = APNsServer(bundle_id="com.example.app", team_id="TEAM123456", key_id="KEY1234567")
    # srv.url "https://127.0.0.1:PORT", srv.ca_file, srv.key_file (the .p8 it generated),
    # srv.key_pem; or pass key=<PEM of the .p8 or of its public key, or a path>.
    srv.script(token, [(410, "Unregistered"), (429, "TooManyRequests"), "stall", "reset", "drop", "goaway"])
    srv.wait_for(lambda reqs: len(reqs) >= 3, timeout=5)   # -> the predicate's truthy result
    srv.requests / srv.accepted() / srv.rejected()        # Record copies, in arrival order
    srv.connections                                       # connections accepted so far
    srv.close_connections(goaway=True)                    # GOAWAY then close (False: abort)
    srv.stop()                                            # also: with APNsServer() as srv

Checks, in order: POST (405 MethodNotAllowed), /3/device/<token> (404 BadPath),
the provider token (403 MissingProviderToken / InvalidProviderToken /
ExpiredProviderToken: `authorization: bearer <JWT>`, ES256 over the configured
key, header kid == key_id, claims iss == team_id, integer iat not older than
3600 s nor more than 300 s ahead), a repeated header (400 DuplicateHeaders), the
token (400 BadDeviceToken: 64..200 hex digits), apns-push-type (400
InvalidPushType; required here, though Apple defaults it to alert), apns-topic
(400 MissingTopic; another team's app: TopicDisallowed; this app's topic for
another push type, e.g. a liveactivity push without ".push-type.liveactivity":
DeviceTokenNotForTopic), apns-priority (1, 5, 10; background needs 5: 400
BadPriority), apns-expiration (integer: BadExpirationDate), apns-collapse-id
(<= 64 bytes: BadCollapseId), apns-id (a UUID: BadMessageId), the payload
(4096 bytes, 5120 for voip: 413 PayloadTooLarge; empty: 400 PayloadEmpty; a
JSON object with an "aps" object, and for liveactivity aps.event in
start/update/end, integer aps.timestamp, aps.content-state an object (start,
update; optional for end), start with attributes-type and attributes: 400
BadPayload). Only a request that passes them all consumes its token's script.

Script entries: (status, reason) answers that; "stall" never answers; "reset"
resets the stream (RST_STREAM INTERNAL_ERROR); "drop" aborts the connection;
"goaway" sends GOAWAY and closes it (the request unanswered).
Every request is recorded (Record: mono, wall, method, path, token, headers,
body, payload, jwt, status, reason, apns_id, conn_id, stream_id, accepted), the
stalled, reset and dropped ones too (status 0, reason the entry).

`python3 apnsserver.py --serve` (the C driver Tests/chttp2/run.sh) prints
"PORT CA_FILE JWT TOPIC STALL_TOKEN DROP_TOKEN GOAWAY_TOKEN" and serves until
stdin closes; requests to these tokens get "stall", "drop" and "goaway".
"""
import asyncio
import base64
import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.x509.oid import NameOID

import ssl

import hpack.hpack


def _speed_up_hpack():
    """hpack decodes Huffman strings in pure Python, and nghttp2 (curl) never
    indexes `authorization`: the same provider token is decoded on every
    request, most of the server's time. Decoding is a pure function of the
    bytes, so remember recent results; and hpack's per-header debug logging
    goes (it costs even when disabled)."""
    if getattr(hpack.hpack, "_cb_cached", False):
        return
    decode, cache = hpack.hpack.decode_huffman, {}

    def cached(data):
        key = bytes(data)
        found = cache.get(key)
        if found is None:
            if len(cache) > 4096:
                cache.clear()
            found = cache[key] = decode(key)
        return found

    class _Quiet:
        def debug(self, *args, **kwargs):
            pass

    hpack.hpack.decode_huffman = cached
    hpack.hpack.log = _Quiet()
    hpack.hpack._cb_cached = True


_speed_up_hpack()

PUSH_TYPES = {"alert", "background", "liveactivity", "voip", "complication", "fileprovider",
              "mdm", "location", "pushtotalk"}
# The topic each push type must use, as a suffix of the bundle id (mdm uses
# the MDM certificate's topic: anything of this team's is accepted).
TOPIC_SUFFIX = {"alert": "", "background": "", "liveactivity": ".push-type.liveactivity", "voip": ".voip",
                "complication": ".complication", "fileprovider": ".pushkit.fileprovider",
                "location": ".location-query", "pushtotalk": ".voip-ptt"}
TOKEN_RE = re.compile(r"[0-9a-fA-F]{64,200}")
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
JWT_MAX_AGE_S = 3600
JWT_MAX_AHEAD_S = 300


# ---- keys, tokens and certificates ----

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def generate_p8():
    """A new APNs signing key: the PEM (PKCS#8) of an EC P-256 private key."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_jwt(key_pem, key_id, team_id, iat=None, alg="ES256", extra_claims=None):
    """An APNs provider token signed with the .p8 PEM `key_pem`."""
    key = serialization.load_pem_private_key(key_pem, None)
    header = {"alg": alg, "kid": key_id}
    claims = {"iss": team_id, "iat": int(time.time()) if iat is None else iat, **(extra_claims or {})}
    signing_input = (b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())).encode()
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return signing_input.decode() + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def _load_public_key(key):
    if isinstance(key, ec.EllipticCurvePublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.public_key()
    if isinstance(key, str) and not key.lstrip().startswith("-----"):
        with open(key, "rb") as f:
            key = f.read()
    data = key.encode() if isinstance(key, str) else key
    if b"PRIVATE KEY" in data:
        return serialization.load_pem_private_key(data, None).public_key()
    return serialization.load_pem_public_key(data)


def _make_certs(directory):
    """A CA and a leaf for 127.0.0.1, ::1 and localhost: (ca_file, cert_file, key_file)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "CodingBridge test APNs CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                       x509.IPAddress(ipaddress.ip_address("::1"))])
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(san, critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = [os.path.join(directory, n) for n in ("ca.pem", "cert.pem", "key.pem")]
    pem = serialization.Encoding.PEM
    for path, data in zip(paths, (ca.public_bytes(pem), leaf.public_bytes(pem),
                                  key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))):
        with open(path, "wb") as f:
            f.write(data)
    return tuple(paths)


# ---- what the server records ----

class Record:
    """One request as received and answered (status 0: stalled, reset or dropped)."""
    __slots__ = ("mono", "wall", "method", "path", "token", "headers", "body", "payload", "jwt", "status",
                 "reason", "apns_id", "conn_id", "stream_id")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    @property
    def accepted(self):
        return self.status == 200

    def __repr__(self):
        return f"Record({self.status} {self.reason or ''} {self.path} conn={self.conn_id} stream={self.stream_id})"


class Reject(Exception):
    def __init__(self, status, reason):
        super().__init__(f"{status} {reason}")
        self.status, self.reason = status, reason


# ---- the checks ----

class Checker:
    """Apple's checks on one request, given the server's configuration."""

    def __init__(self, public_key, team_id, key_id, bundle_id, clock):
        self.public_key, self.team_id, self.key_id, self.bundle_id = public_key, team_id, key_id, bundle_id
        self.clock = clock
        self._jwt_cache = {}  # token text -> claims or Reject (a signature is verified once)

    def jwt(self, headers):
        auth = headers.get("authorization")
        if not auth:
            raise Reject(403, "MissingProviderToken")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Reject(403, "InvalidProviderToken")
        token = token.strip()
        found = self._jwt_cache.get(token)
        if found is None:
            try:
                found = self._verify(token)
            except Reject as e:
                found = e
            if len(self._jwt_cache) > 10000:
                self._jwt_cache.clear()
            self._jwt_cache[token] = found
        if isinstance(found, Reject):
            raise found
        now = self.clock()
        if found["iat"] < now - JWT_MAX_AGE_S:
            raise Reject(403, "ExpiredProviderToken")
        if found["iat"] > now + JWT_MAX_AHEAD_S:
            raise Reject(403, "InvalidProviderToken")
        return found

    def _verify(self, token):
        try:
            h64, c64, s64 = token.split(".")
            header, claims, sig = json.loads(b64url_decode(h64)), json.loads(b64url_decode(c64)), b64url_decode(s64)
        except (ValueError, TypeError):
            raise Reject(403, "InvalidProviderToken")
        if not isinstance(header, dict) or not isinstance(claims, dict) or len(sig) != 64:
            raise Reject(403, "InvalidProviderToken")
        if header.get("alg") != "ES256" or header.get("kid") != self.key_id or claims.get("iss") != self.team_id:
            raise Reject(403, "InvalidProviderToken")
        if not isinstance(claims.get("iat"), int) or isinstance(claims.get("iat"), bool):
            raise Reject(403, "InvalidProviderToken")
        der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
        try:
            self.public_key.verify(der, f"{h64}.{c64}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise Reject(403, "InvalidProviderToken")
        return claims

    def headers(self, h):
        push_type = h.get("apns-push-type")
        if push_type not in PUSH_TYPES:
            raise Reject(400, "InvalidPushType")
        topic = h.get("apns-topic")
        if not topic:
            raise Reject(400, "MissingTopic")
        if not topic.startswith(self.bundle_id):
            raise Reject(400, "TopicDisallowed")
        if push_type != "mdm" and topic != self.bundle_id + TOPIC_SUFFIX[push_type]:
            raise Reject(400, "DeviceTokenNotForTopic")
        priority = h.get("apns-priority", "10")
        if priority not in ("1", "5", "10") or (push_type == "background" and priority != "5"):
            raise Reject(400, "BadPriority")
        if "apns-expiration" in h and not re.fullmatch(r"\d+", h["apns-expiration"]):
            raise Reject(400, "BadExpirationDate")
        if len(h.get("apns-collapse-id", "").encode()) > 64:
            raise Reject(400, "BadCollapseId")
        if "apns-id" in h and not UUID_RE.fullmatch(h["apns-id"]):
            raise Reject(400, "BadMessageId")
        return push_type

    @staticmethod
    def payload(body, push_type):
        if len(body) > (5120 if push_type == "voip" else 4096):
            raise Reject(413, "PayloadTooLarge")
        if not body:
            raise Reject(400, "PayloadEmpty")
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise Reject(400, "BadPayload")
        if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
            raise Reject(400, "BadPayload")
        if push_type == "liveactivity":
            Checker._live_activity(payload["aps"])
        return payload

    @staticmethod
    def _live_activity(aps):
        event = aps.get("event")
        ts = aps.get("timestamp")
        ok = event in ("start", "update", "end") and isinstance(ts, int) and not isinstance(ts, bool)
        state = aps.get("content-state")
        if ok and (event != "end" or state is not None):
            ok = isinstance(state, dict)
        if ok and event == "start":
            ok = isinstance(aps.get("attributes-type"), str) and isinstance(aps.get("attributes"), dict)
        if not ok:
            raise Reject(400, "BadPayload")


# ---- one HTTP/2 connection ----

class _Conn(asyncio.Protocol):
    def __init__(self, server):
        self.server = server
        self.id = 0
        self.h2 = None
        self.transport = None
        self.streams = {}   # stream id -> [headers list, body bytearray]
        self.pending = []   # (stream id, data) waiting for flow-control window

    def connection_made(self, transport):
        self.transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
            transport.abort()  # HTTP/2 only, as Apple
            return
        self.id = self.server._connection_opened(self)
        # The header checks h2 makes on every field cost 15 % of the server's
        # time; nghttp2 (curl) only sends well-formed headers anyway.
        cfg = h2.config.H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=False,
                                        normalize_inbound_headers=False, validate_outbound_headers=False,
                                        normalize_outbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.server.max_concurrent_streams,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536})
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(16 << 20)
        self.flush()

    def connection_lost(self, exc):
        self.server._connection_closed(self)

    def flush(self):
        data = self.h2.data_to_send()
        if data and not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data):
        if self.h2 is None:
            return
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.transport.close()
            return
        for ev in events:
            self._event(ev)
            if self.transport.is_closing():
                return
        self.flush()

    def _event(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            self.streams[ev.stream_id] = [ev.headers, bytearray()]
            if ev.stream_ended:
                self._request(ev.stream_id)
        elif isinstance(ev, h2.events.DataReceived):
            st = self.streams.get(ev.stream_id)
            if st is not None:
                st[1] += ev.data
            if ev.flow_controlled_length:
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            if ev.stream_id in self.streams:
                self._request(ev.stream_id)
        elif isinstance(ev, h2.events.StreamReset):
            self.streams.pop(ev.stream_id, None)
        elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self._send_pending()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.flush()
            self.transport.close()

    def _request(self, sid):
        raw_headers, body = self.streams.pop(sid)
        answer = self.server._handle(self, sid, raw_headers, bytes(body))
        if answer == "stall":
            return
        if answer == "reset":
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
            return
        if answer == "drop":
            self.transport.abort()
            return
        if answer == "goaway":
            self.goaway(True)
            return
        status, reason, apns_id = answer
        headers = [(b":status", str(status).encode()), (b"apns-id", apns_id.encode())]
        if reason is None:
            self.h2.send_headers(sid, headers, end_stream=True)
            return
        doc = {"reason": reason}
        if status == 410:
            doc["timestamp"] = int(time.time() * 1000)
        data = json.dumps(doc).encode()
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        self.h2.send_headers(sid, headers)
        self.pending.append((sid, data))
        self._send_pending()

    def _send_pending(self):
        waiting = []
        for sid, data in self.pending:
            try:
                if self.h2.local_flow_control_window(sid) >= len(data):
                    self.h2.send_data(sid, data, end_stream=True)
                else:
                    waiting.append((sid, data))
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                pass  # the client reset it meanwhile
        self.pending = waiting

    def goaway(self, graceful):
        if self.transport.is_closing():
            return
        if graceful:
            # As Apple: GOAWAY, then the TCP connection goes. (A TLS close
            # alone would wait for the client's close_notify, which curl
            # does not send, and leave the streams it promised hanging.)
            self.h2.close_connection(additional_data=b'{"reason":"Shutdown"}')
            self.flush()
            asyncio.get_running_loop().call_later(0.05, self.transport.abort)
        else:
            self.transport.abort()


# ---- the server ----

class APNsServer:
    def __init__(self, bundle_id="com.example.codingbridge", team_id="TEAM123456", key_id="KEY1234567",
                 key=None, host="127.0.0.1", port=0, clock=time.time, max_concurrent_streams=1000):
        """key: the .p8 PEM (bytes/str), its public key PEM, a key object or a
        path; None generates one (key_pem, key_file). clock: seconds since
        the epoch, for the iat checks (a test on a manual clock passes its own)."""
        self.bundle_id, self.team_id, self.key_id = bundle_id, team_id, key_id
        self.host = host
        self.max_concurrent_streams = max_concurrent_streams
        self.dir = tempfile.mkdtemp(prefix="cb-apns-")
        self.key_pem = None
        self.key_file = None
        if key is None:
            self.key_pem = generate_p8()
            self.key_file = os.path.join(self.dir, f"AuthKey_{key_id}.p8")
            with open(self.key_file, "wb") as f:
                f.write(self.key_pem)
            key = self.key_pem
        self.checker = Checker(_load_public_key(key), team_id, key_id, bundle_id, clock)
        self.ca_file, self.cert_file, self.cert_key_file = _make_certs(self.dir)
        self._cond = threading.Condition()
        self._records = []
        self._scripts = {}
        self._conns = set()
        self.connections = 0
        self._start(port)

    # -- lifecycle --

    def _start(self, port):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.cert_key_file)
        ctx.set_alpn_protocols(["h2"])
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def listen():
            self._server = await self.loop.create_server(lambda: _Conn(self), self.host, port, ssl=ctx,
                                                         backlog=1024)
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()

        def run():
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(listen())
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name="apns-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the APNs test server did not start")
        self.url = f"https://{self.host}:{self.port}"

    def stop(self):
        if not self._thread.is_alive():
            return
        self.close_connections(goaway=False)

        async def shutdown():
            self._server.close()
            await self._server.wait_closed()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
            shutil.rmtree(self.dir, ignore_errors=True)

    close = stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- what tests use --

    def jwt(self, iat=None):
        """A valid provider token for this server (only when it generated the key)."""
        return make_jwt(self.key_pem, self.key_id, self.team_id, iat=iat)

    def script(self, token, answers):
        """Answers for the next valid requests to `token`, in order; then 200."""
        with self._cond:
            self._scripts.setdefault(token.lower(), []).extend(answers)

    def close_connections(self, goaway=True):
        """Closes every client connection: GOAWAY (NO_ERROR) then close, or an abrupt abort."""
        done = threading.Event()

        def close_all():
            try:
                for c in list(self._conns):
                    c.goaway(goaway)
            finally:
                done.set()
        self.loop.call_soon_threadsafe(close_all)
        if not done.wait(5):
            raise TimeoutError("apns server: close_connections did not run")

    @property
    def requests(self):
        with self._cond:
            return list(self._records)

    def accepted(self):
        return [r for r in self.requests if r.status == 200]

    def rejected(self):
        return [r for r in self.requests if r.status != 200]

    def clear(self):
        with self._cond:
            self._records.clear()

    def wait_for(self, predicate, timeout=5.0):
        """Waits until predicate(list of Records) is truthy and returns it; TimeoutError after `timeout` s."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = predicate(list(self._records))
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"apns server: condition not met in {timeout} s; "
                                       f"{len(self._records)} requests: {self._records[-5:]}")
                self._cond.wait(left)

    # -- the loop thread --

    def _connection_opened(self, conn):
        with self._cond:
            self.connections += 1
            self._conns.add(conn)
            self._cond.notify_all()
            return self.connections

    def _connection_closed(self, conn):
        with self._cond:
            self._conns.discard(conn)

    def _handle(self, conn, sid, raw_headers, body):
        rec = Record(mono=time.monotonic(), wall=time.time(), conn_id=conn.id, stream_id=sid, body=body)
        answer = self._check(rec, raw_headers, body)
        with self._cond:
            self._records.append(rec)
            self._cond.notify_all()
        return answer

    def _check(self, rec, raw_headers, body):
        headers, duplicate = {}, False
        for name, value in raw_headers:
            name, value = name.decode("latin-1"), value.decode("latin-1")
            if name in headers and not name.startswith(":"):
                duplicate = True
            headers[name] = value
        rec.headers, rec.method, rec.path = headers, headers.get(":method"), headers.get(":path", "")
        rec.apns_id = headers.get("apns-id") or str(uuid.uuid4()).upper()
        try:
            answer = self._validate(rec, headers, duplicate, body)
        except Reject as e:
            answer = (e.status, e.reason)
        if isinstance(answer, str):
            rec.status, rec.reason = 0, answer
            return answer
        rec.status, rec.reason = answer
        return rec.status, rec.reason, rec.apns_id

    def _validate(self, rec, headers, duplicate, body):
        if rec.method != "POST":
            raise Reject(405, "MethodNotAllowed")
        m = re.fullmatch(r"/3/device/([^/?]*)", rec.path)
        if not m:
            raise Reject(404, "BadPath")
        rec.token = m.group(1)
        rec.jwt = self.checker.jwt(headers)
        if duplicate:
            raise Reject(400, "DuplicateHeaders")
        if not rec.token:
            raise Reject(400, "MissingDeviceToken")
        if not TOKEN_RE.fullmatch(rec.token):
            raise Reject(400, "BadDeviceToken")
        push_type = self.checker.headers(headers)
        rec.payload = self.checker.payload(body, push_type)
        with self._cond:
            queue = self._scripts.get(rec.token.lower())
            if queue:
                return queue.pop(0)
        return 200, None


def apns_server_fixture():
    """A pytest fixture: `from apnsserver import apns_server` in a test module."""
    import pytest

    @pytest.fixture
    def apns_server():
        srv = APNsServer()
        yield srv
        srv.stop()
    return apns_server


try:
    apns_server = apns_server_fixture()
except ImportError:  # no pytest: the --serve mode
    pass


def _serve():
    srv = APNsServer()
    tokens = {"stall": "ff" * 32, "drop": "ee" * 32, "goaway": "dd" * 32}
    for answer, token in tokens.items():
        srv.script(token, [answer] * 100000)
    print(srv.port, srv.ca_file, srv.jwt(), srv.bundle_id, *tokens.values(), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a kill still removes the temp dir
    try:
        sys.stdin.read()
    finally:
        srv.stop()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        sys.exit(__doc__)
