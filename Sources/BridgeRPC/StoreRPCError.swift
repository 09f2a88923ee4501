import BridgeCore

/// Application errors of the store methods (-32050...-32053).
enum StoreRPCError {
    static let unavailable = -32050
    static let unknownMessage = -32051
    static let finished = -32052
    static let idempotencyConflict = -32053

    /// A store call whose failure becomes one of these errors.
    static func call<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw from(error) }
    }

    static func from(_ e: Error) -> RPCError {
        if let r = e as? RPCError { return r }
        guard let e = e as? StoreError else { return .internalError(String(describing: e)) }
        switch e.kind {
        case .notFound:
            return .application(unknownMessage, "Unknown outbox message", data: ["reason": .string(e.message)])
        case .invalidState:
            return .application(finished, "Outbox message already finished", data: ["reason": .string(e.message)])
        default:
            // Disk full, read-only, I/O, damaged file: nothing of this call
            // was stored; the client may retry (with the same idempotency key).
            return .application(unavailable, "Durable store unavailable",
                                data: ["kind": .string(e.kind.rawValue), "reason": .string(e.message)])
        }
    }
}
