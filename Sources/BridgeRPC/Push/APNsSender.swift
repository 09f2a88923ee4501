import BridgeCore

/// How to reach APNs: token-based auth with a .p8 key.
public struct APNsConfig: Sendable {
    public var keyFile: String
    public var keyId: String
    public var teamId: String
    /// The app's bundle id (apns-topic).
    public var topic: String
    /// A base URL for both environments (a test server); nil: Apple's hosts.
    public var endpoint: String?
    /// Trust this CA (PEM) instead of the system's (a test server).
    public var caFile: String?
    public init(keyFile: String, keyId: String, teamId: String, topic: String) {
        self.keyFile = keyFile
        self.keyId = keyId
        self.teamId = teamId
        self.topic = topic
    }
}

/// APNs over HTTP/2: one long-lived connection per environment (the
/// HTTP2Client multiplexes every push on it), a provider token (ES256 JWT)
/// made once and reused for `refreshAfterSec` on the server's clock.
final class APNsSender: PushSender {
    /// Apple wants a new token no more often than every 20 minutes and no
    /// older than 60.
    static let refreshAfterSec: Int64 = 30 * 60
    let config: APNsConfig
    private let key: ES256Key
    private let nowMs: () -> Int64
    private let log: Logger
    private var clients: [PushRegistration.Environment: HTTP2Client] = [:]
    private let makeClient: () throws -> HTTP2Client
    private var token: (jwt: String, iat: Int64)?
    /// "bearer <jwt>" of the last token, and the device URL prefix per environment: made once, not per push.
    private var authorization: (jwt: String, value: String)?
    private var devicePrefix: [PushRegistration.Environment: String] = [:]
    private lazy var alertTopic = config.topic
    private lazy var activityTopic = config.topic + ".push-type.liveactivity"

    init(config: APNsConfig, key: ES256Key, nowMs: @escaping () -> Int64, log: Logger,
         makeClient: @escaping () throws -> HTTP2Client) {
        self.config = config
        self.key = key
        self.nowMs = nowMs
        self.log = log
        self.makeClient = makeClient
    }

    func baseURL(_ env: PushRegistration.Environment) -> String {
        if let e = config.endpoint { return e.hasSuffix("/") ? String(e.dropLast()) : e }
        return env == .production ? "https://api.push.apple.com" : "https://api.sandbox.push.apple.com"
    }

    /// The current provider token; `replacing` a token APNs called expired
    /// makes a new one, once: the other pushes that were in flight with it
    /// then use the new one instead of signing again (Apple answers too
    /// many new tokens with TooManyProviderTokenUpdates).
    func providerToken(replacing expired: String? = nil) throws -> String {
        let now = nowMs() / 1000
        if let t = token, expired != t.jwt, now - t.iat < Self.refreshAfterSec, now >= t.iat { return t.jwt }
        let jwt = try JWT.es256(key: key, header: ["alg": "ES256", "kid": .string(config.keyId)],
                                claims: ["iss": .string(config.teamId), "iat": .int(now)])
        token = (jwt, now)
        return jwt
    }

    private func client(_ env: PushRegistration.Environment) throws -> HTTP2Client {
        if let c = clients[env] { return c }
        let c = try makeClient()
        clients[env] = c
        return c
    }

    func send(_ r: PushRequest, to reg: PushRegistration, pushId: String, completion: @escaping (PushOutcome) -> Void) {
        attempt(r, reg, pushId, expired: nil, completion)
    }

    private func attempt(_ r: PushRequest, _ reg: PushRegistration, _ pushId: String, expired: String?,
                         _ completion: @escaping (PushOutcome) -> Void) {
        guard let device = reg.token else { return completion(.registrationGone("no device token")) }
        do {
            let jwt = try providerToken(replacing: expired)
            if authorization?.jwt != jwt { authorization = (jwt, "bearer " + jwt) }
            let prefix: String
            if let p = devicePrefix[reg.environment] { prefix = p } else {
                prefix = baseURL(reg.environment) + "/3/device/"
                devicePrefix[reg.environment] = prefix
            }
            var headers = [("authorization", authorization!.value), ("apns-id", pushId), ("apns-push-type", r.pushType),
                           ("apns-priority", String(r.priority)), ("apns-expiration", String(r.expiresAtSec)),
                           ("apns-topic", r.pushType == "liveactivity" ? activityTopic : alertTopic),
                           ("content-type", "application/json")]
            if let c = r.collapseId { headers.append(("apns-collapse-id", c)) }
            try client(reg.environment).post(url: prefix + device, headers: headers,
                                             body: r.body, timeoutMs: 30_000) { [weak self] resp in
                guard let self else { return }
                let outcome = Self.outcome(resp)
                if outcome == .retry("ExpiredProviderToken"), expired == nil {
                    // A token Apple calls expired (a clock step, a long sleep): a new one, one more try.
                    self.log.info("APNs: provider token expired; using a new one")
                    return self.attempt(r, reg, pushId, expired: jwt, completion)
                }
                completion(outcome)
            }
        } catch {
            completion(.retry("cannot send: \(error)"))
        }
    }

    /// What an APNs answer means for the queue.
    static func outcome(_ resp: HTTP2Response) -> PushOutcome {
        // The common answer: nothing to parse.
        if resp.status == 200 { return .delivered(id: resp.header("apns-id")) }
        let reason = JSON.parse(String(decoding: resp.body, as: UTF8.self))?["reason"]?.stringValue ?? ""
        switch resp.status {
        case 200: return .delivered(id: resp.header("apns-id"))
        case 0: return .retry(resp.error ?? "connection failed")
        case 410: return .registrationGone(reason.isEmpty ? "Unregistered" : reason)
        case 400 where reason == "BadDeviceToken" || reason == "DeviceTokenNotForTopic":
            return .registrationGone(reason)
        case 403 where reason == "ExpiredProviderToken": return .retry(reason)
        case 429, 500...599: return .retry("\(resp.status) \(reason)")
        case 403: return .retry("403 \(reason)")
        default: return .rejected("\(resp.status) \(reason)")
        }
    }
}
