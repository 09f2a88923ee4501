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
        return isLoopback(hostPort: String(origin.dropFirst("http://".count)))
    }

    /// "localhost", "[::1]" or a numeric 127.x.y.z, with or without a port.
    static func isLoopback(hostPort: String) -> Bool {
        let host: Substring
        if hostPort.hasPrefix("[") {
            guard let end = hostPort.firstIndex(of: "]") else { return false }
            host = hostPort[hostPort.startIndex...end]
        } else {
            host = hostPort.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        }
        if host == "localhost" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { p in UInt8(p) != nil && !p.isEmpty }
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
        let body: [UInt8]
        do { body = try WebPushCrypto.encrypt(uaPublic: ua, authSecret: auth, plaintext: r.body) } catch {
            return completion(.registrationGone("the subscription's keys are unusable: \(error)"))
        }
        do {
            let ttl = max(0, r.expiresAtSec - nowMs() / 1000)
            var headers = [("authorization", "vapid t=\(try vapidToken(audience: audience)), k=\(publicKey)"),
                           ("content-encoding", "aes128gcm"), ("content-type", "application/octet-stream"),
                           ("ttl", String(ttl)), ("urgency", r.priority >= 10 ? "high" : "normal")]
            if let t = r.collapseId { headers.append(("topic", t)) }
            try client.post(url: endpoint, headers: headers, body: body, timeoutMs: 30_000) { resp in
                completion(Self.outcome(resp))
            }
        } catch {
            completion(.retry("cannot send: \(error)"))
        }
    }

    static func outcome(_ resp: HTTP2Response) -> PushOutcome {
        switch resp.status {
        case 200...299: return .delivered(id: resp.header("location"))
        case 0: return .retry(resp.error ?? "connection failed")
        case 404, 410: return .registrationGone("\(resp.status): subscription expired or unsubscribed")
        // The subscription was made for another application server key.
        case 401, 403: return .registrationGone("\(resp.status): the push service refused our VAPID key for it")
        case 429, 500...599: return .retry("\(resp.status)")
        default: return .rejected("\(resp.status) \(String(decoding: resp.body.prefix(200), as: UTF8.self))")
        }
    }
}
