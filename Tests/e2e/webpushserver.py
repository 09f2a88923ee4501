"""A local Web Push service for the e2e tests: checks what a real push service
checks (RFC 8030 TTL, RFC 8292 VAPID: an ES256 JWT whose signature verifies
with the `k` key, aud = the endpoint's origin, exp within 24 h, a mailto: or
https: sub; RFC 8291/8188 aes128gcm content coding) and decrypts each message
with the subscription's private key (the `http_ece` package, independent of
our C code), like a browser would.

    svc = WebPushService(); sub = svc.subscription("phone")   # PushSubscription JSON
    svc.script("phone", [410])                                # answers, then 201
    svc.wait_for(lambda m: m["plaintext"]["method"] == "notification.post")
    svc.close()
"""
import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
import os


def b64u_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def verify_vapid(header, origin, now=None):
    """Why the Authorization header fails RFC 8292, or None; and the claims."""
    now = now or time.time()
    if not header or not header.startswith("vapid "):
        return "no vapid Authorization", None
    parts = dict(p.strip().split("=", 1) for p in header[6:].split(","))
    t, k = parts.get("t"), parts.get("k")
    if not t or not k:
        return "vapid needs t= and k=", None
    try:
        pub = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64u_decode(k))
        h, c, s = t.split(".")
        sig = b64u_decode(s)
        if len(sig) != 64:
            return "signature is not r||s", None
        der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
        pub.verify(der, (h + "." + c).encode(), ec.ECDSA(hashes.SHA256()))
        header_j, claims = json.loads(b64u_decode(h)), json.loads(b64u_decode(c))
    except Exception as e:  # noqa: BLE001 - any failure is a bad token
        return "bad token: %r" % e, None
    if header_j.get("alg") != "ES256":
        return "alg must be ES256", claims
    if claims.get("aud") != origin:
        return "aud %r is not %r" % (claims.get("aud"), origin), claims
    if not isinstance(claims.get("exp"), int) or not now < claims["exp"] <= now + 86400 + 60:
        return "exp must be within 24 h", claims
    sub = claims.get("sub", "")
    if not (sub.startswith("mailto:") and "@" in sub or sub.startswith("https://")):
        return "sub must be mailto: or https:", claims
    return None, claims


class WebPushService:
    def __init__(self):
        self.messages = []          # accepted and refused, in order
        self.cond = threading.Condition()
        self.subs = {}              # name -> (private key, auth)
        self.scripts = {}
        svc = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                svc._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.origin = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def subscription(self, name):
        key = ec.generate_private_key(ec.SECP256R1())
        auth = os.urandom(16)
        self.subs[name] = (key, auth)
        pub = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        return {"endpoint": "%s/push/%s" % (self.origin, name), "expirationTime": None,
                "keys": {"p256dh": b64u(pub), "auth": b64u(auth)}}

    def script(self, name, statuses):
        with self.cond:
            self.scripts.setdefault(name, []).extend(statuses)

    def _refuse(self, h, status, why, record):
        record.update(status=status, error=why)
        body = json.dumps({"error": why}).encode()
        h.send_response(status)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _handle(self, h):
        body = h.rfile.read(int(h.headers.get("Content-Length", "0")))
        name = h.path.rsplit("/", 1)[-1]
        record = {"name": name, "at": time.monotonic(), "headers": {k.lower(): v for k, v in h.headers.items()},
                  "size": len(body)}
        try:
            self._check(h, name, body, record)
        finally:
            with self.cond:
                self.messages.append(record)
                self.cond.notify_all()

    def _check(self, h, name, body, record):
        if name not in self.subs:
            return self._refuse(h, 404, "no such subscription", record)
        why, claims = verify_vapid(h.headers.get("Authorization"), self.origin)
        record["claims"] = claims
        if why:
            return self._refuse(h, 403, why, record)
        if h.headers.get("Content-Encoding") != "aes128gcm":
            return self._refuse(h, 400, "Content-Encoding must be aes128gcm", record)
        if not (h.headers.get("TTL") or "").isdigit():
            return self._refuse(h, 400, "TTL header required", record)
        if len(body) > 4096:
            return self._refuse(h, 413, "payload over 4096 bytes", record)
        key, auth = self.subs[name]
        try:
            plain = http_ece.decrypt(body, private_key=key, auth_secret=auth, version="aes128gcm")
            record["plaintext"] = json.loads(plain)
        except Exception as e:  # noqa: BLE001
            return self._refuse(h, 400, "cannot decrypt: %r" % e, record)
        with self.cond:
            queued = self.scripts.get(name) or []
            status = queued.pop(0) if queued else 201
        if status != 201:
            return self._refuse(h, status, "scripted", record)
        record["status"] = 201
        h.send_response(201)
        h.send_header("Location", "%s/message/%d" % (self.origin, len(self.messages)))
        h.send_header("Content-Length", "0")
        h.end_headers()

    def accepted(self):
        with self.cond:
            return [m for m in self.messages if m.get("status") == 201]

    def wait_for(self, predicate, timeout=10):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.messages:
                    if m.get("status") == 201 and predicate(m):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no matching Web Push message; got %r" % self.messages[-5:])
                self.cond.wait(left)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
