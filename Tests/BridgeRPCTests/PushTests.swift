import BridgeCore
@testable import BridgeEngine
@testable import BridgeRPC
import Testing

/// The push payloads (pure) and the queue's reaction to each kind of
/// answer, with a sender that answers as scripted instead of a network.
@Suite struct PushTests {
    static func notification(body: String, category: NotificationCategory = .approval) -> NotificationRequest {
        NotificationRequest(id: "n-1", title: "Approval Needed", body: body, category: category, actions: [],
                            interruptionLevel: .timeSensitive, sound: true, threadId: "s1", badge: 2,
                            deepLink: "codingbridge://approval/s1/r1", userInfo: ["sessionId": "s1", "summary": body])
    }

    static let reg: PushRegistration = {
        var r = PushRegistration(id: "apns-0000000000000001", deviceId: "iphone", platform: .apns, kind: .alert,
                                 environment: .production, createdMs: 0)
        r.token = String(repeating: "ab", count: 32)
        return r
    }()

    @Test func categoriesAreTheIdentifiersTheAppRegisters() {
        #expect(PushPayloads.categoryId(.approval) == "APPROVAL")
        #expect(PushPayloads.categoryId(.taskComplete) == "TASK_COMPLETE")
        #expect(PushPayloads.categoryId(.decisionNotSent) == "DECISION_NOT_SENT")
        #expect(PushPayloads.interruptionLevel(.timeSensitive) == "time-sensitive")
    }

    @Test func anAlertOverFourKilobytesIsShortenedBodyFirstNeverDropped() {
        let long = String(repeating: "é long text ", count: 800)
        let r = PushPayloads.apnsAlert(Self.notification(body: long), to: Self.reg, nowMs: 1_000)
        #expect(r.payload.encoded.count <= PushPayloads.apnsLimit)
        #expect(r.payload["aps"]?["alert"]?["title"]?.stringValue == "Approval Needed")
        let body = r.payload["aps"]?["alert"]?["body"]?.stringValue ?? ""
        #expect(!body.isEmpty && body.hasSuffix("…") && long.hasPrefix(String(body.dropLast())))
        #expect(r.priority == 10 && r.pushType == "alert" && r.collapseId == "n-1")
    }

    @Test func aShortAlertIsLeftAsItIs() {
        let r = PushPayloads.apnsAlert(Self.notification(body: "Bash: npm test"), to: Self.reg, nowMs: 1_000)
        #expect(r.payload["aps"]?["alert"]?["body"] == "Bash: npm test")
        #expect(r.payload["aps"]?["sound"] == "default" && r.payload["aps"]?["badge"] == 2)
    }

    @Test func collapseIdsAndTopicsFitTheirLimits() {
        let id = String(repeating: "x", count: 200)
        #expect(PushPayloads.collapseId(id).utf8.count == 64)
        #expect(PushPayloads.collapseId("short") == "short")
        #expect(PushPayloads.webPushTopic(id).count == 32)
    }

    @Test func apnsAnswersMapToWhatTheQueueDoes() {
        func resp(_ status: Int, _ reason: String = "") -> HTTP2Response {
            HTTP2Response(status: status, error: status == 0 ? "reset" : nil, body: Array("{\"reason\":\"\(reason)\"}".utf8),
                          headers: [(name: "apns-id", value: "ID-1")], httpVersion: 20, totalMs: 1)
        }
        #expect(APNsSender.outcome(resp(200)) == .delivered(id: "ID-1"))
        #expect(APNsSender.outcome(resp(410, "Unregistered")) == .registrationGone("Unregistered"))
        #expect(APNsSender.outcome(resp(400, "BadDeviceToken")) == .registrationGone("BadDeviceToken"))
        #expect(APNsSender.outcome(resp(400, "DeviceTokenNotForTopic")) == .registrationGone("DeviceTokenNotForTopic"))
        #expect(APNsSender.outcome(resp(403, "ExpiredProviderToken")) == .retry("ExpiredProviderToken"))
        #expect(APNsSender.outcome(resp(429, "TooManyRequests")) == .retry("429 TooManyRequests"))
        #expect(APNsSender.outcome(resp(503, "ServiceUnavailable")) == .retry("503 ServiceUnavailable"))
        #expect(APNsSender.outcome(resp(0)) == .retry("reset"))
        #expect(APNsSender.outcome(resp(413, "PayloadTooLarge")) == .rejected("413 PayloadTooLarge"))
    }

    @Test func webPushEndpointsAndSubjects() {
        #expect(WebPushSender.acceptable(endpoint: "https://fcm.googleapis.com/fcm/send/abc"))
        #expect(WebPushSender.acceptable(endpoint: "http://127.0.0.1:8080/push/1"))
        #expect(!WebPushSender.acceptable(endpoint: "http://push.example.com/x"))
        #expect(!WebPushSender.acceptable(endpoint: "https://user@evil.example/x"))
        #expect(!WebPushSender.acceptable(endpoint: "ftp://x"))
        #expect(!WebPushSender.acceptable(endpoint: "http://localhost.attacker.example/push"))
        #expect(!WebPushSender.acceptable(endpoint: "http://127.0.0.1.nip.io/push"))
        #expect(WebPushSender.acceptable(endpoint: "http://localhost:9000/push"))
        #expect(WebPushSender.acceptable(endpoint: "http://[::1]:9000/push"))
        #expect(PushSettings.isVAPIDSubject("mailto:ops@example.org"))
        #expect(!PushSettings.isVAPIDSubject("mailto:"))
        #expect(!PushSettings.isVAPIDSubject("mailto:ops@"))
        #expect(!PushSettings.isVAPIDSubject("http://example.org"))
        #expect(PushRegistration.origin(of: "https://push.example.net:443/wpush/v2/x?y") == "https://push.example.net:443")
    }

    /// A sender that answers each push with the next scripted outcome.
    final class ScriptedSender: PushSender {
        var answers: [PushOutcome]
        var sent: [(PushRequest, String)] = []
        init(_ answers: [PushOutcome]) { self.answers = answers }
        func send(_ r: PushRequest, to reg: PushRegistration, pushId: String, completion: @escaping (PushOutcome) -> Void) {
            sent.append((r, pushId))
            completion(answers.isEmpty ? .delivered(id: nil) : answers.removeFirst())
        }
    }

    @Test func theQueueRetriesWithBackoffDropsDeadTokensAndSendsEachPushOnce() throws {
        let dir = TempStateDir("cb-push")
        let server = try makeStoreServer(dir)
        let env = server.env
        let push = try #require(env.push)
        let store = try #require(env.store)
        try push.registry.add(Self.reg, nowMs: 0)
        let sender = ScriptedSender([.retry("503"), .delivered(id: "A"), .registrationGone("Unregistered")])
        push.queue.senders[.apns] = sender
        let now = env.scheduler.wallClockMs
        try push.queue.enqueue(PushPayloads.apnsAlert(Self.notification(body: "one"), to: Self.reg, nowMs: now))
        #expect(sender.sent.isEmpty, "nothing leaves before its commit")
        store.flush()
        #expect(sender.sent.count == 1 && push.queue.count == 1)
        _ = try env.scheduler.advance(byMs: 60_000)
        store.flush()
        #expect(sender.sent.count == 2 && push.queue.count == 0)
        #expect(sender.sent.count == 2 && sender.sent[0].1 == sender.sent[1].1, "a retry keeps its apns-id")
        try push.queue.enqueue(PushPayloads.apnsClear(ids: ["n-1"], to: Self.reg, nowMs: now))
        store.flush()
        #expect(push.registry.all.isEmpty && push.queue.count == 0)
        #expect(push.registry.takeRemovedNotes("iphone").first?["reason"] == "Unregistered")
        #expect(push.metrics.json["apns"]?["sent"] == 1 && push.metrics.json["apns"]?["retried"] == 1)
    }

    @Test func aPushPastItsExpiryIsNotSent() throws {
        let dir = TempStateDir("cb-push")
        let server = try makeStoreServer(dir)
        let push = try #require(server.env.push)
        try push.registry.add(Self.reg, nowMs: 0)
        let sender = ScriptedSender([])
        push.queue.senders[.apns] = sender
        let old = server.env.scheduler.wallClockMs - 2 * PushPayloads.alertLifetimeSec * 1000
        try push.queue.enqueue(PushPayloads.apnsAlert(Self.notification(body: "stale"), to: Self.reg, nowMs: old))
        server.env.store?.flush()
        #expect(sender.sent.isEmpty && push.queue.count == 0)
    }
}
