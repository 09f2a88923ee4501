import BridgeCore

/// Where a device can be reached when it is not connected: an APNs token
/// (an alert token, a Live Activity's update token, or a push-to-start
/// token) or a browser's Web Push subscription.
struct PushRegistration: Equatable {
    enum Platform: String, CaseIterable { case apns, webpush }
    enum Kind: String, CaseIterable { case alert, liveActivity, pushToStart }
    enum Environment: String, CaseIterable { case production, sandbox }

    var id: String
    var deviceId: String
    var platform: Platform
    var kind: Kind
    /// APNs: the device token (hex).
    var token: String?
    var environment: Environment
    /// liveActivity: the session whose Live Activity the token updates.
    var activityId: String?
    /// webpush: the push service's URL and the browser's keys (base64url).
    var endpoint: String?
    var p256dh: String?
    var auth: String?
    var createdMs: Int64
    /// A Live Activity token whose activity ended: it gets nothing more.
    var ended = false

    /// The same token or subscription registered again keeps its id.
    static func id(platform: Platform, kind: Kind, address: String) -> String {
        platform.rawValue + "-" + String(Secrets.sha256Hex(kind.rawValue + "\u{1}" + address).prefix(16))
    }

    var json: JSON {
        var o: [String: JSON] = ["registrationId": .string(id), "deviceId": .string(deviceId),
                                 "platform": .string(platform.rawValue), "kind": .string(kind.rawValue),
                                 "createdAt": .int(createdMs)]
        if kind == .liveActivity { o["ended"] = .bool(ended) }
        if platform == .apns {
            o["environment"] = .string(environment.rawValue)
            // The token itself is a credential for pushing to the phone: only its end is shown.
            o["token"] = .string("…" + String((token ?? "").suffix(8)))
            if let a = activityId { o["activityId"] = .string(a) }
        } else {
            o["endpoint"] = .string(Self.origin(of: endpoint ?? "") ?? "")
        }
        return .object(o)
    }

    /// What is stored: everything, the keys included.
    var stored: JSON {
        var o: [String: JSON] = ["id": .string(id), "deviceId": .string(deviceId), "platform": .string(platform.rawValue),
                                 "kind": .string(kind.rawValue), "environment": .string(environment.rawValue),
                                 "createdMs": .int(createdMs), "ended": .bool(ended)]
        for (k, v) in [("token", token), ("activityId", activityId), ("endpoint", endpoint), ("p256dh", p256dh), ("auth", auth)] {
            if let v { o[k] = .string(v) }
        }
        return .object(o)
    }

    init(id: String, deviceId: String, platform: Platform, kind: Kind, environment: Environment, createdMs: Int64) {
        self.id = id
        self.deviceId = deviceId
        self.platform = platform
        self.kind = kind
        self.environment = environment
        self.createdMs = createdMs
    }

    init?(stored j: JSON) {
        guard let id = j["id"]?.stringValue, let dev = j["deviceId"]?.stringValue,
              let p = j["platform"]?.stringValue.flatMap(Platform.init), let k = j["kind"]?.stringValue.flatMap(Kind.init),
              let e = j["environment"]?.stringValue.flatMap(Environment.init), let c = j["createdMs"]?.intValue else { return nil }
        self.init(id: id, deviceId: dev, platform: p, kind: k, environment: e, createdMs: c)
        token = j["token"]?.stringValue
        activityId = j["activityId"]?.stringValue
        endpoint = j["endpoint"]?.stringValue
        p256dh = j["p256dh"]?.stringValue
        auth = j["auth"]?.stringValue
        ended = j["ended"]?.boolValue ?? false
    }

    /// "https://push.example.net" of an endpoint URL (the VAPID audience).
    static func origin(of url: String) -> String? {
        let scheme: String
        if url.hasPrefix("https://") { scheme = "https://" } else if url.hasPrefix("http://") { scheme = "http://" } else { return nil }
        let host = url.dropFirst(scheme.count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !host.isEmpty, !host.contains("@"), !host.contains(where: { $0.isWhitespace }) else { return nil }
        return scheme + host
    }
}

/// The registrations (durable, in the store's key-value area), and for each
/// device the registrations removed because the push service refused them,
/// told to the device when it next connects (`push.unregistered`).
final class PushRegistry {
    static let namespace = "push.registration"
    static let removedNamespace = "push.removed"
    /// A device holds at most this many registrations (a Live Activity token
    /// per session adds up); the oldest go first.
    static let perDeviceLimit = 64

    private let store: Store
    private(set) var byId: [String: PushRegistration] = [:] { didSet { sortedCache = nil } }
    /// `all`, kept until the registrations change (route reads it on every apply).
    private var sortedCache: [PushRegistration]?

    init(store: Store) throws {
        self.store = store
        for (_, v) in try store.entries(namespace: Self.namespace) {
            if case .json(let j) = v, let r = PushRegistration(stored: j) { byId[r.id] = r }
        }
    }

    var all: [PushRegistration] {
        if let s = sortedCache { return s }
        let s = byId.values.sorted { ($0.createdMs, $0.id) < ($1.createdMs, $1.id) }
        sortedCache = s
        return s
    }
    func forDevice(_ id: String) -> [PushRegistration] { all.filter { $0.deviceId == id } }

    func add(_ r: PushRegistration, nowMs: Int64) throws {
        var r = r
        if let old = byId[r.id] { r.createdMs = old.deviceId == r.deviceId ? old.createdMs : r.createdMs }
        try StoreRPCError.call { try store.put(.json(r.stored), namespace: Self.namespace, key: r.id, nowMs: nowMs) }
        byId[r.id] = r
        let mine = forDevice(r.deviceId)
        for old in mine.prefix(max(0, mine.count - Self.perDeviceLimit)) { try remove(old.id, nowMs: nowMs) }
    }

    func markEnded(_ id: String, nowMs: Int64) throws {
        guard var r = byId[id], !r.ended else { return }
        r.ended = true
        try StoreRPCError.call { try store.put(.json(r.stored), namespace: Self.namespace, key: r.id, nowMs: nowMs) }
        byId[id] = r
    }

    @discardableResult
    func remove(_ id: String, nowMs: Int64, reason: String? = nil) throws -> PushRegistration? {
        guard let r = byId.removeValue(forKey: id) else { return nil }
        try StoreRPCError.call {
            _ = try store.delete(namespace: Self.namespace, key: id)
            if let reason {
                var notes = try removedNotes(r.deviceId)
                notes.append(["registrationId": .string(r.id), "platform": .string(r.platform.rawValue),
                              "kind": .string(r.kind.rawValue), "reason": .string(reason), "removedAt": .int(nowMs)])
                try store.put(.json(.array(Array(notes.suffix(Self.perDeviceLimit)))), namespace: Self.removedNamespace,
                               key: r.deviceId, nowMs: nowMs)
            }
        }
        return r
    }

    private func removedNotes(_ device: String) throws -> [JSON] {
        guard case .json(.array(let a))? = try store.value(namespace: Self.removedNamespace, key: device) else { return [] }
        return a
    }

    /// The removals `device` was not told about yet, once.
    func takeRemovedNotes(_ device: String) -> [JSON] {
        guard let notes = try? removedNotes(device), !notes.isEmpty else { return [] }
        _ = try? store.delete(namespace: Self.removedNamespace, key: device)
        return notes
    }
}
