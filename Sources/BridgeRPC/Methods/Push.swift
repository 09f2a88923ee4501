import BridgeCore

/// Push registrations (see rpc-spec/parts/push.json): where a device that is
/// not connected can still be reached. A device registers and removes its
/// own; a local client may remove any.
extension MethodTable {
    func registerPush(_ env: ServerEnvironment) {
        guard let push = env.push else { return }

        on("push.register") { p, ctx in
            guard let device = ctx.deviceID else {
                throw RPCError.invalidParams("invalid params: the connection has no deviceId (send initialize first)")
            }
            var r = try Self.registration(p, device: device, nowMs: env.scheduler.wallClockMs)
            if r.platform == .webpush { r.kind = .alert }
            try push.registry.add(r, nowMs: env.scheduler.wallClockMs)
            env.log.info("push: \(device) registered \(r.platform.rawValue) \(r.kind.rawValue) \(r.id)")
            var out = r.json.objectValue ?? [:]
            out["enabled"] = .bool(r.platform == .apns ? push.apnsEnabled : push.webPushEnabled)
            return .object(out)
        }

        on("push.unregister") { p, ctx in
            let id = try p.nonEmpty("registrationId")
            if let r = push.registry.byId[id], r.deviceId != ctx.deviceID, !ctx.isTrusted {
                throw RPCError.unauthorized("a device may remove only its own push registrations", method: "push.unregister")
            }
            let gone = try push.registry.remove(id, nowMs: env.scheduler.wallClockMs)
            if gone != nil { push.queue.dropJobs(for: id) }
            return ["registrationId": .string(id), "removed": .bool(gone != nil)]
        }

        on("push.vapidPublicKey") { _, _ in
            ["publicKey": push.vapidPublicKey.json, "enabled": .bool(push.webPushEnabled)]
        }
    }

    private static func registration(_ p: Params, device: String, nowMs: Int64) throws -> PushRegistration {
        let platform = PushRegistration.Platform(rawValue: try p.oneOf("platform", ["apns", "webpush"]))!
        if platform == .webpush { return try webPushRegistration(p, device: device, nowMs: nowMs) }
        let kind = PushRegistration.Kind(rawValue: try p.oneOf("kind", PushRegistration.Kind.allCases.map(\.rawValue), default: "alert"))!
        let env = PushRegistration.Environment(rawValue: try p.oneOf("environment", ["production", "sandbox"], default: "production"))!
        let token = try p.nonEmpty("token").lowercased()
        guard (64...200).contains(token.count), token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else {
            throw RPCError.invalidParams("invalid params: 'token' must be the APNs device token in hex (64 to 200 hex digits)",
                                         data: ["param": "token", "expected": "hex string of 64...200 digits",
                                                "got": .string("string of \(token.count) characters")])
        }
        let activity: String? = try p.optional("activityId")
        if kind == .liveActivity && activity == nil {
            throw RPCError.invalidParams("invalid params: a liveActivity token needs 'activityId' (the session it shows)",
                                         data: ["param": "activityId", "expected": "Id", "got": "missing"])
        }
        var r = PushRegistration(id: PushRegistration.id(platform: .apns, kind: kind, address: token), deviceId: device,
                                 platform: .apns, kind: kind, environment: env, createdMs: nowMs)
        r.token = token
        r.activityId = kind == .liveActivity ? activity : nil
        return r
    }

    private static func webPushRegistration(_ p: Params, device: String, nowMs: Int64) throws -> PushRegistration {
        let sub: [String: JSON] = try p.required("subscription")
        func bad(_ param: String, _ expected: String) -> RPCError {
            RPCError.invalidParams("invalid params: 'subscription.\(param)' must be \(expected)",
                                   data: ["param": .string("subscription." + param), "expected": .string(expected)])
        }
        guard let endpoint = sub["endpoint"]?.stringValue, WebPushSender.acceptable(endpoint: endpoint) else {
            throw bad("endpoint", "an https URL (http only on loopback)")
        }
        guard let keys = sub["keys"]?.objectValue, let p256dh = keys["p256dh"]?.stringValue,
              let key = Base64URL.decode(p256dh), key.count == 65, key[0] == 4 else {
            throw bad("keys.p256dh", "the browser's P-256 public key, base64url (65 bytes uncompressed)")
        }
        guard let auth = keys["auth"]?.stringValue, Base64URL.decode(auth)?.count == 16 else {
            throw bad("keys.auth", "the 16-byte authentication secret, base64url")
        }
        var r = PushRegistration(id: PushRegistration.id(platform: .webpush, kind: .alert, address: endpoint), deviceId: device,
                                 platform: .webpush, kind: .alert, environment: .production, createdMs: nowMs)
        r.endpoint = endpoint
        r.p256dh = p256dh
        r.auth = auth
        return r
    }
}
