import BridgeCore
import BridgeEngine

/// The person's decisions on approvals (PRD US-5.4, EDGE-CASES "Offline
/// decision"): applied at once while the backend link is up; while it is
/// down, queued in the engine and kept durably as an outbox row, sent in
/// order on reconnect. A queued decision whose request ended meanwhile fails
/// its row, and the person is told.
final class OfflineDecisions {
    static let kind = "approval.respond"

    private let store: Store
    private unowned let host: EngineHost
    private let log: Logger
    /// requestId -> outbox row of a decision made offline.
    private var queuedRows: [String: Int64] = [:]

    init(store: Store, host: EngineHost, log: Logger) throws {
        self.store = store
        self.host = host
        self.log = log
        for m in try store.messages(statuses: OutboxStatus.pending, limit: 1000) where m.kind == Self.kind {
            if let rid = m.payload["requestId"]?.stringValue { queuedRows[rid] = m.id }
        }
    }

    /// `approval.respond`: the engine's answer (accepted, queued,
    /// alreadyResolved, expired, unknown).
    func respond(_ rid: String, _ decision: ApprovalDecision, device: String?, source: DecisionSource,
                 options: DecisionOptions = .none) throws -> ApprovalRespondResult {
        guard !host.engine.connectivity.connected else {
            return try reply(host.apply(.approvalResponse(requestId: rid, decision: decision, deviceId: device, source: source,
                                                          options: options)))
        }
        let r = try reply(host.apply(.approvalQueued(requestId: rid, decision: decision, deviceId: device, source: source,
                                                     options: options)))
        guard r.status == .queued, let sid = r.sessionId else { return r }
        let expires = host.engine.pendingApprovals.first { $0.requestId == rid }?.expiresAt
        // What the engine queued (options fitted to the decision) is what the backend gets.
        let o = host.engine.connectivity.queuedDecisions.first { $0.requestId == rid }?.options ?? options
        var payload: [String: JSON] = ["requestId": .string(rid), "decision": .string(decision.rawValue),
                                       "deviceId": device.json, "source": .string(source.rawValue),
                                       "alwaysAllow": .bool(o.alwaysAllow), "interrupt": .bool(o.interrupt)]
        if let m = o.message { payload["message"] = .string(m) }
        let row = try StoreRPCError.call {
            try store.enqueue(sessionId: sid, kind: Self.kind,
                              payload: .object(payload),
                              idempotencyKey: "approval:\(rid)", maxAttempts: Backoff.delivery.maxAttempts ?? 12,
                              nowMs: host.now, expiresMs: expires)
        }
        queuedRows[rid] = row.id
        return r
    }

    private func reply(_ t: Engine.Transition) throws -> ApprovalRespondResult {
        guard case .approval(let r) = t.reply else { throw RPCError.internalError("engine gave no approval reply") }
        return r
    }

    /// Pipeline step 2: decisions whose request ended while offline fail
    /// their outbox rows; nothing is sent for them.
    func settle(_ event: EngineEvent, engine: Engine, now: Int64) {
        for rid in engine.droppedDecisions {
            guard let id = queuedRows.removeValue(forKey: rid) else { continue }
            do { try store.fail(id: id, error: "request expired before the connection came back", retryAtMs: nil, nowMs: now) } catch {
                log.error("offline decision \(rid) not marked failed: \(error)")
            }
        }
        if case .connection(.connected) = event { queuedRows.removeAll() }
    }
}
