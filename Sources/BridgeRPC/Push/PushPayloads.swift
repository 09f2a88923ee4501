import BridgeCore
import BridgeEngine

/// One push to send: what goes to APNs or a Web Push service for one
/// registration. Built once, when the effect happens, from text that already
/// passed the privacy setting, the redactor and the lock-screen budget
/// (`LockScreenGate`); stored in the push queue until the service took it.
struct PushRequest: Equatable {
    var registrationId: String
    var platform: PushRegistration.Platform
    /// apns-push-type: alert, background, liveactivity; "webpush" for Web Push.
    var pushType: String
    /// apns-priority (10 now, 5 when convenient); Web Push: 10 is Urgency high.
    var priority: Int
    var collapseId: String?
    /// Unix seconds after which the service may drop it (apns-expiration, Web Push TTL).
    var expiresAtSec: Int64
    /// What is sent: `body` is its JSON text, encoded once (measured, stored and sent as it is).
    let payload: JSON
    let body: [UInt8]

    init(registrationId: String, platform: PushRegistration.Platform, pushType: String, priority: Int,
         collapseId: String?, expiresAtSec: Int64, payload: JSON, body: [UInt8]? = nil) {
        self.body = body ?? payload.encoded
        self.registrationId = registrationId
        self.platform = platform
        self.pushType = pushType
        self.priority = priority
        self.collapseId = collapseId
        self.expiresAtSec = expiresAtSec
        self.payload = payload
    }

    init?(json j: JSON) {
        guard let r = j["registrationId"]?.stringValue, let p = j["platform"]?.stringValue.flatMap(PushRegistration.Platform.init),
              let t = j["pushType"]?.stringValue, let pr = j["priority"]?.intValue, let e = j["expiresAtSec"]?.intValue,
              let payload = j["payload"] else { return nil }
        self.init(registrationId: r, platform: p, pushType: t, priority: Int(clamping: pr),
                  collapseId: j["collapseId"]?.stringValue, expiresAtSec: e, payload: payload)
    }
}

/// The APNs and Web Push payloads of the engine's effects. Pure: the same
/// effect, registration and time give the same request.
enum PushPayloads {
    /// APNs refuses a payload over 4 KB; Web Push's single aes128gcm record
    /// leaves 3993 bytes of plaintext in 4096.
    static let apnsLimit = 4096
    static let webPushLimit = 3993
    /// The attributes type the iOS app's ActivityKit widget declares.
    static let activityAttributesType = "CodingBridgeAttributes"
    /// An alert nobody could act on within a day is not worth showing later.
    static let alertLifetimeSec: Int64 = 86_400

    /// UNNotificationCategory identifiers the app registers (Approve/Deny on APPROVAL).
    static func categoryId(_ c: NotificationCategory) -> String {
        categoryIds[c] ?? makeCategoryId(c)
    }

    private static let categoryIds: [NotificationCategory: String] =
        Dictionary(uniqueKeysWithValues: NotificationCategory.allCases.map { ($0, makeCategoryId($0)) })

    private static func makeCategoryId(_ c: NotificationCategory) -> String {
        var out = ""
        for ch in c.rawValue {
            if ch.isUppercase, !out.isEmpty { out.append("_") }
            out.append(contentsOf: ch.uppercased())
        }
        return out
    }

    static func interruptionLevel(_ l: InterruptionLevel) -> String {
        switch l {
        case .passive: return "passive"
        case .active: return "active"
        case .timeSensitive: return "time-sensitive"
        }
    }

    static func relevanceScore(_ l: InterruptionLevel) -> Double {
        switch l {
        case .passive: return 0.2
        case .active: return 0.5
        case .timeSensitive: return 1
        }
    }

    static func apnsAlert(_ n: NotificationRequest, to r: PushRegistration, nowMs: Int64) -> PushRequest {
        var aps: [String: JSON] = [
            "alert": ["title": .string(n.title), "body": .string(n.body)],
            "badge": .int(Int64(n.badge)), "thread-id": .string(n.threadId),
            "category": .string(categoryId(n.category)),
            "interruption-level": .string(interruptionLevel(n.interruptionLevel)),
            "relevance-score": .double(relevanceScore(n.interruptionLevel)),
        ]
        if n.sound { aps["sound"] = "default" }
        var body: [String: JSON] = ["aps": .object(aps), "notificationId": .string(n.id), "deepLink": .string(n.deepLink)]
        body["userInfo"] = .object(n.userInfo.mapValues { .string($0) })
        let (payload, bytes) = fitEncoded(.object(body), limit: apnsLimit,
                                          shrinking: [(["aps", "alert", "body"], 100), (["userInfo", "summary"], 0),
                                                      (["aps", "alert", "title"], 20), (["userInfo"], 0),
                                                      (["aps", "alert", "body"], 0)])
        return PushRequest(registrationId: r.id, platform: .apns, pushType: "alert", priority: 10,
                           collapseId: collapseId(n.id), expiresAtSec: nowMs / 1000 + alertLifetimeSec, payload: payload, body: bytes)
    }

    /// Ids per clearing push: 64 notification ids stay far inside 4 KB.
    static let clearBatch = 64

    /// A background push that removes delivered notifications on a device
    /// that did not make the decision (PRD US-5.4).
    static func apnsClear(ids: [String], to r: PushRegistration, nowMs: Int64) -> PushRequest {
        let payload: JSON = ["aps": ["content-available": 1], "clear": .array(ids.map { .string($0) })]
        return PushRequest(registrationId: r.id, platform: .apns, pushType: "background", priority: 5, collapseId: nil,
                           expiresAtSec: nowMs / 1000 + alertLifetimeSec, payload: payload)
    }

    enum ActivityEvent: String { case start, update, end }

    /// Priority 10 only when the person must look: approval, question,
    /// completion, error. Progress goes at 5 (and is coalesced).
    static func isUrgent(_ c: ActivityContent) -> Bool {
        switch c.status {
        case .awaitingApproval, .awaitingAnswer, .awaitingInput, .completed, .error: return true
        case .idle, .processing: return false
        }
    }

    static func liveActivity(_ c: ActivityContent, event: ActivityEvent, to r: PushRegistration, nowMs: Int64) -> PushRequest {
        let now = nowMs / 1000
        var aps: [String: JSON] = ["timestamp": .int(now), "event": .string(event.rawValue),
                                   "content-state": EngineCoding.activity(c),
                                   // Shown as out of date when nothing came for 15 minutes.
                                   "stale-date": .int(now + 900)]
        if event == .end { aps["dismissal-date"] = .int(now + 3600) }
        if r.kind == .pushToStart {
            aps["attributes-type"] = .string(activityAttributesType)
            aps["attributes"] = ["sessionId": .string(c.sessionId), "projectName": .string(c.projectName)]
            aps["alert"] = ["title": .string(c.projectName), "body": .string(c.statusText)]
        }
        let urgent = isUrgent(c)
        if urgent { aps["relevance-score"] = 1 }
        let (payload, bytes) = fitEncoded(["aps": .object(aps)], limit: apnsLimit,
                          shrinking: [(["aps", "content-state", "rendered", "lockScreen"], 0), (["aps", "content-state", "rendered", "expanded"], 0),
                                      (["aps", "content-state", "approval", "summary"], 0), (["aps", "content-state", "message"], 0),
                                      (["aps", "content-state", "operation"], 0), (["aps", "content-state", "projectPath"], 0)])
        return PushRequest(registrationId: r.id, platform: .apns, pushType: "liveactivity", priority: urgent ? 10 : 5,
                           collapseId: nil, expiresAtSec: now + 3600, payload: payload, body: bytes)
    }

    /// Web Push carries the same notification the app's WebSocket would get;
    /// the service worker shows it (or clears, for notification.clear).
    static func webPush(method: String, params: JSON, urgent: Bool, collapse: String?, to r: PushRegistration, nowMs: Int64) -> PushRequest {
        let (payload, bytes) = fitEncoded(["method": .string(method), "params": params], limit: webPushLimit,
                          shrinking: [(["params", "body"], 100), (["params", "userInfo", "summary"], 0),
                                      (["params", "title"], 20), (["params", "userInfo"], 0), (["params", "body"], 0)])
        return PushRequest(registrationId: r.id, platform: .webpush, pushType: "webpush", priority: urgent ? 10 : 5,
                           collapseId: collapse.map(webPushTopic), expiresAtSec: nowMs / 1000 + alertLifetimeSec, payload: payload, body: bytes)
    }

    /// apns-collapse-id is at most 64 bytes.
    static func collapseId(_ id: String) -> String {
        id.utf8.count <= 64 ? id : String(Secrets.sha256Hex(id).prefix(64))
    }

    /// RFC 8030 Topic: at most 32 characters of the URL-safe base64 alphabet.
    static func webPushTopic(_ id: String) -> String { String(Secrets.sha256Hex(id).prefix(32)) }
}
