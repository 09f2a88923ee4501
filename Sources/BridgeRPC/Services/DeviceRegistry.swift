import BridgeCore

/// Paired devices (durable, loaded at start) and the pairing codes waiting
/// to be used (memory only: a restart voids them, which only means asking
/// for a new one). Tokens are never kept: a device is found by its token's
/// SHA-256, compared in constant time.
final class DeviceRegistry {
    /// How long a pairing code stays valid.
    static let codeLifetimeMs: Int64 = 5 * 60_000

    private struct PendingCode {
        var name: String?
        var expiresMs: Int64
    }

    private let store: Store
    /// Wall-clock Unix ms on the server's clock (manual under --manual-clock).
    private let now: () -> Int64
    private(set) var devices: [String: DeviceRecord] = [:]
    private var codes: [String: PendingCode] = [:]

    init(store: Store, now: @escaping () -> Int64) throws {
        self.store = store
        self.now = now
        for d in try store.devices() { devices[d.id] = d }
    }

    /// Devices in pairing order.
    var all: [DeviceRecord] { devices.values.sorted { ($0.createdMs, $0.id) < ($1.createdMs, $1.id) } }

    /// A paired device that is not revoked.
    func isActive(_ id: String) -> Bool { devices[id].map { $0.revokedMs == nil } ?? false }

    /// A new single-use code; `name` is the default name of the device that uses it.
    func issueCode(name: String?) throws -> (code: String, expiresMs: Int64) {
        let t = now()
        codes = codes.filter { $0.value.expiresMs > t }
        let code = try Secrets.pairingCode()
        let expires = t + Self.codeLifetimeMs
        codes[Secrets.normalizePairingCode(code)!] = PendingCode(name: name, expiresMs: expires)
        return (code, expires)
    }

    /// Uses `typed` up (valid or expired, a code works at most once) and
    /// pairs a new device; the token is returned once and never stored.
    func pair(code typed: String, name: String?) throws -> (DeviceRecord, token: String) {
        guard let key = Secrets.normalizePairingCode(typed), let pending = codes.removeValue(forKey: key) else {
            throw RPCError.unauthorized("unknown or already used pairing code")
        }
        let t = now()
        guard pending.expiresMs > t else { throw RPCError.unauthorized("pairing code expired") }
        let token = try Secrets.token()
        let id = "dev-" + (try Secrets.randomBytes(8)).map { String($0, radix: 16).leftPadded(2) }.joined()
        let d = DeviceRecord(id: id, name: name ?? pending.name ?? "device", tokenHash: Secrets.sha256Hex(token), createdMs: t)
        try StoreRPCError.call { try store.putDevice(d) }
        devices[id] = d
        return (d, token)
    }

    /// The active device holding `token`, or why there is none.
    func authenticate(token: String) -> Result<DeviceRecord, RPCError> {
        let hash = Secrets.sha256Hex(token)
        // Every device is compared, so the time taken says nothing about which matched.
        var found: DeviceRecord?
        for d in devices.values where Secrets.constantTimeEqual(d.tokenHash, hash) { found = d }
        guard let d = found else { return .failure(.unauthorized("unknown token")) }
        guard d.revokedMs == nil else { return .failure(.unauthorized("device revoked")) }
        return .success(d)
    }

    /// Records that `id` authenticated now.
    func touch(_ id: String) throws {
        guard var d = devices[id] else { return }
        d.lastSeenMs = now()
        try StoreRPCError.call { try store.putDevice(d) }
        devices[id] = d
    }

    /// Revokes `id` (again: keeps the first revocation time).
    func revoke(_ id: String) throws -> DeviceRecord {
        guard var d = devices[id] else {
            throw RPCError.application(-32011, "Unknown device",
                                       data: ["deviceId": .string(id), "reason": "no paired device has this id"])
        }
        if d.revokedMs == nil {
            d.revokedMs = now()
            try StoreRPCError.call { try store.putDevice(d) }
            devices[id] = d
        }
        return d
    }
}

private extension String {
    func leftPadded(_ n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
