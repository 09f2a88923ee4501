import BridgeCore

/// Web Push (RFC 8030) with message encryption (RFC 8291, aes128gcm) and
/// VAPID (RFC 8292): the application server's key signs a JWT per push
/// service origin, reused until an hour before it expires.
final class WebPushSender: PushSender {
    /// A VAPID JWT may live at most 24 hours; ours live 12.
    static let tokenLifetimeSec: Int64 = 12 * 3600
    let key: ES256Key
    /// mailto: or https: (push services refuse placeholders).
    let subject: String
    private let publicKey: String
    private let nowMs: () -> Int64
    private let client: HTTP2Client
    private var tokens: [String: (jwt: String, exp: Int64)] = [:]

    init(key: ES256Key, subject: String, nowMs: @escaping () -> Int64, client: HTTP2Client) {
        self.key = key
        self.subject = subject
        self.publicKey = Base64URL.encode(key.publicKeyRaw)
        self.nowMs = nowMs
        self.client = client
    }

    /// https, or http to a loopback host (a local test service).
    static func acceptable(endpoint: String) -> Bool {
        guard endpoint.utf8.count <= 2048, let origin = PushRegistration.origin(of: endpoint) else { return false }
        if origin.hasPrefix("https://") { return true }
        guard origin.hasPrefix("http://") else { return false }
        let host = origin.dropFirst("http://".count)
        return host.hasPrefix("127.") || host.hasPrefix("localhost") || host.hasPrefix("[::1]")
    }

    static func acceptable(subject: String) -> Bool {
        (subject.hasPrefix("mailto:") && subject.contains("@") && !subject.hasSuffix("@")) || subject.hasPrefix("https://")
    }

    func vapidToken(audience: String) throws -> String {
        let now = nowMs() / 1000
        if let t = tokens[audience], t.exp - now > 3600 { return t.jwt }
        let exp = now + Self.tokenLifetimeSec
        let jwt = try JWT.es256(key: key, header: ["typ": "JWT", "alg": "ES256"],
                                claims: ["aud": .string(audience), "exp": .int(exp), "sub": .string(subject)])
        tokens[audience] = (jwt, exp)
        return jwt
    }

    func send(_ r: PushRequest, to reg: PushRegistration, pushId: String, completion: @escaping (PushOutcome) -> Void) {
        guard let endpoint = reg.endpoint, let audience = PushRegistration.origin(of: endpoint),
              let ua = reg.p256dh.flatMap(Base64URL.decode), let auth = reg.auth.flatMap(Base64URL.decode) else {
            return completion(.registrationGone("subscription incomplete"))
        }
        do {
            let body = try WebPushCrypto.encrypt(uaPublic: ua, authSecret: auth, plaintext: r.payload.encoded)
            let ttl = max(0, r.expiresAtSec - nowMs() / 1000)
            var headers = [("authorization", "vapid t=\(try vapidToken(audience: audience)), k=\(publicKey)"),
                           ("content-encoding", "aes128gcm"), ("content-type", "application/octet-stream"),
                           ("ttl", String(ttl)), ("urgency", r.priority >= 10 ? "high" : "normal")]
            if let t = r.collapseId { headers.append(("topic", t)) }
            try client.post(url: endpoint, headers: headers, body: body, timeoutMs: 30_000) { resp in
                completion(Self.outcome(resp))
            }
        } catch {
            completion(.rejected("cannot encrypt for this subscription: \(error)"))
        }
    }

    static func outcome(_ resp: HTTP2Response) -> PushOutcome {
        switch resp.status {
        case 200...299: return .delivered(id: resp.header("location"))
        case 0: return .retry(resp.error ?? "connection failed")
        case 404, 410: return .registrationGone("\(resp.status): subscription expired or unsubscribed")
        case 429, 500...599: return .retry("\(resp.status)")
        default: return .rejected("\(resp.status) \(String(decoding: resp.body.prefix(200), as: UTF8.self))")
        }
    }
}
