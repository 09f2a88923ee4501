import BridgeCore

/// Device pairing, listing and revocation, and the audit log (see
/// rpc-spec/parts/devices.json). Pairing codes are issued to local clients
/// only; listing and revoking are open to authenticated devices too (a
/// phone may revoke a lost tablet). Application errors: -32001
/// unauthorized, -32011 unknown device.
extension MethodTable {
    func registerDevices(_ env: ServerEnvironment) {
        guard let devices = env.devices, let audit = env.audit else { return }

        on("device.pairingCode") { p, ctx in
            guard ctx.isTrusted else {
                throw RPCError.unauthorized("pairing codes are issued to local clients only", method: "device.pairingCode")
            }
            let c = try devices.issueCode(name: try Self.deviceName(p))
            return ["code": .string(c.code), "expiresAt": .int(c.expiresMs)]
        }

        on("device.pair") { p, ctx in
            let host = ctx.address.map(FailureLimiter.host) ?? "local"
            let now = env.scheduler.nowMs
            if env.failures.isLimited(host, nowMs: now) { throw RPCError.unauthorized("rate limited") }
            let code: String = try p.required("code")
            let name = try Self.deviceName(p)
            let paired: (DeviceRecord, token: String)
            do { paired = try devices.pair(code: code, name: name) } catch let e as RPCError where e.code == RPCError.unauthorizedCode {
                env.failures.record(host, nowMs: now)
                throw e
            }
            let d = paired.0
            audit.record("device.pair", device: d.id, caller: ctx, detail: ["name": .string(d.name)])
            env.log.info("paired device \(d.id) (\(d.name)) from \(ctx.address ?? "a local client")")
            return ["deviceId": .string(d.id), "name": .string(d.name), "token": .string(paired.token)]
        }

        registerDeviceAdmin(env, devices, audit)
        registerAudit(audit)
    }

    /// What a local client or a paired device may do about devices.
    private func registerDeviceAdmin(_ env: ServerEnvironment, _ devices: DeviceRegistry, _ audit: AuditLog) {
        on("device.list") { _, _ in
            let connected = Set(env.router.all.compactMap(\.pairedDevice))
            let push = env.push?.registry.all ?? []
            let paired = Set(devices.all.map(\.id))
            return ["devices": .array(devices.all.map { d in
                ["deviceId": .string(d.id), "name": .string(d.name), "createdAt": .int(d.createdMs),
                 "lastSeenAt": d.lastSeenMs.map { .int($0) } ?? .null, "revoked": .bool(d.revokedMs != nil),
                 "revokedAt": d.revokedMs.map { .int($0) } ?? .null, "connected": .bool(connected.contains(d.id)),
                 "push": .array(push.filter { $0.deviceId == d.id }.map(\.json))]
            }),
            // Local clients (a unix-socket app, a test) register under their initialize deviceId.
            "localPush": .array(push.filter { !paired.contains($0.deviceId) }.map(\.json))]
        }

        // Async so the revoking device's own reply leaves before its connection closes.
        onAsync("device.revoke") { p, ctx, reply in
            let id = try p.nonEmpty("deviceId")
            let wasActive = devices.isActive(id)
            let d = try devices.revoke(id)
            if wasActive {
                audit.record("device.revoke", device: ctx.deviceID, caller: ctx,
                             detail: ["revokedDeviceId": .string(id), "name": .string(d.name)])
                env.log.info("revoked device \(id) (\(d.name))")
            }
            let open = env.router.all.filter { $0.pairedDevice == id }
            reply(.success(["deviceId": .string(id), "revokedAt": .int(d.revokedMs ?? 0),
                            "closedConnections": .int(Int64(open.count))]))
            // In this turn, right after the reply (and the commit that holds the revocation).
            env.barrier.release { _ in for c in open { c.io.close() } }
        }
    }

    private func registerAudit(_ audit: AuditLog) {
        on("audit.list") { p, _ in
            let after: Int64 = try p.optional("afterId") ?? 0
            let limit: Int = try p.optional("limit") ?? 100
            guard (1...1000).contains(limit), after >= 0 else {
                throw RPCError.invalidParams("invalid params: 'limit' must be in 1...1000 and 'afterId' >= 0",
                                             data: ["param": (after >= 0 ? "limit" : "afterId"),
                                                    "expected": (after >= 0 ? "integer 1...1000" : "integer >= 0"),
                                                    "got": .int(after >= 0 ? Int64(limit) : after)])
            }
            let entries = try audit.entries(afterId: after, limit: limit)
            return ["entries": .array(entries.map(AuditLog.json)),
                    "nextAfterId": .int(entries.last?.id ?? after)]
        }
    }

    /// The optional `name` param: 1...100 characters.
    private static func deviceName(_ p: Params) throws -> String? {
        guard let n: String = try p.optional("name") else { return nil }
        guard (1...100).contains(n.count) else {
            throw RPCError.invalidParams("invalid params: 'name' must be 1...100 characters",
                                         data: ["param": "name", "expected": "string of 1...100 characters",
                                                "got": .int(Int64(n.count))])
        }
        return n
    }
}
