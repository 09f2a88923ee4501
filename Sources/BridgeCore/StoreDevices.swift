import CBridge

/// A paired device as stored: its token's SHA-256 (hex), never the token.
/// Times are Unix milliseconds.
public struct DeviceRecord: Equatable, Sendable {
    public var id: String
    public var name: String
    public var tokenHash: String
    public var createdMs: Int64
    public var lastSeenMs: Int64?
    public var revokedMs: Int64?
    public init(id: String, name: String, tokenHash: String, createdMs: Int64,
                lastSeenMs: Int64? = nil, revokedMs: Int64? = nil) {
        self.id = id
        self.name = name
        self.tokenHash = tokenHash
        self.createdMs = createdMs
        self.lastSeenMs = lastSeenMs
        self.revokedMs = revokedMs
    }
}

/// One audit log entry: who (device, connection kind, source address) did
/// what (kind, detail) and when.
public struct AuditEntry: Equatable, Sendable {
    public var id: Int64
    public var timeMs: Int64
    public var kind: String
    public var deviceId: String?
    /// stdio, socket, webSocket, memory, http; nil when no connection caused it.
    public var connection: String?
    /// The peer's address for a network client; nil for local ones.
    public var address: String?
    public var detail: JSON
    public init(id: Int64 = 0, timeMs: Int64, kind: String, deviceId: String?, connection: String?,
                address: String?, detail: JSON) {
        self.id = id
        self.timeMs = timeMs
        self.kind = kind
        self.deviceId = deviceId
        self.connection = connection
        self.address = address
        self.detail = detail
    }
}

extension Store {
    /// Inserts `d` or replaces the device with its id (joins the turn's commit).
    public func putDevice(_ d: DeviceRecord) throws {
        var c = cb_device_t()
        c.created_ms = d.createdMs
        c.last_seen_ms = d.lastSeenMs ?? 0
        c.revoked_ms = d.revokedMs ?? 0
        let rc = d.id.withCString { id in
            d.name.withCString { name in
                d.tokenHash.withCString { hash in
                    c.id = id
                    c.name = name
                    c.token_hash = hash
                    return cb_device_put(handle, &c)
                }
            }
        }
        try check(rc)
    }

    /// Every device, in pairing order.
    public func devices() throws -> [DeviceRecord] {
        var out: [DeviceRecord] = []
        let rc = withUnsafeMutablePointer(to: &out) { p in
            cb_device_list(handle, { d, data in
                let r = d!.pointee
                data!.assumingMemoryBound(to: [DeviceRecord].self).pointee.append(DeviceRecord(
                    id: String(cString: r.id), name: String(cString: r.name), tokenHash: String(cString: r.token_hash),
                    createdMs: r.created_ms, lastSeenMs: r.last_seen_ms > 0 ? r.last_seen_ms : nil,
                    revokedMs: r.revoked_ms > 0 ? r.revoked_ms : nil))
                return 0
            }, p)
        }
        try check(rc)
        return out
    }

    /// Appends `e` (its id is ignored) and returns the new entry's id.
    @discardableResult
    public func appendAudit(_ e: AuditEntry) throws -> Int64 {
        var id: Int64 = 0
        let detail = e.detail.serialized()
        let rc = withOptionalCStrings(e.deviceId, e.connection, e.address) { dev, conn, addr in
            e.kind.withCString { kind in
                detail.withCString { det in
                    var c = cb_audit_entry_t(id: 0, time_ms: e.timeMs, kind: kind, device_id: dev, conn_kind: conn,
                                             address: addr, detail: det)
                    return cb_audit_append(handle, &c, &id)
                }
            }
        }
        try check(rc)
        return id
    }

    /// Up to `limit` entries after `afterId`, in id order.
    public func auditEntries(afterId: Int64, limit: Int) throws -> [AuditEntry] {
        var out: [AuditEntry] = []
        let rc = withUnsafeMutablePointer(to: &out) { p in
            cb_audit_list(handle, afterId, Int32(clamping: limit), { e, data in
                let r = e!.pointee
                let opt = { (s: UnsafePointer<CChar>?) in s.map { String(cString: $0) } }
                data!.assumingMemoryBound(to: [AuditEntry].self).pointee.append(AuditEntry(
                    id: r.id, timeMs: r.time_ms, kind: String(cString: r.kind), deviceId: opt(r.device_id),
                    connection: opt(r.conn_kind), address: opt(r.address),
                    detail: JSON.parse(String(cString: r.detail)) ?? .object([:])))
                return 0
            }, p)
        }
        try check(rc)
        return out
    }
}

/// Three optional strings as C strings (NULL for nil) for the call's duration.
private func withOptionalCStrings<R>(_ a: String?, _ b: String?, _ c: String?,
                                     _ body: (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> R) -> R {
    withOptionalCString(a) { pa in withOptionalCString(b) { pb in withOptionalCString(c) { pc in body(pa, pb, pc) } } }
}
