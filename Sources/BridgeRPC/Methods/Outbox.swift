import BridgeCore
import BridgeEngine

private func messageJSON(_ m: OutboxMessage) -> JSON {
    var o: [String: JSON] = [
        "id": .int(m.id), "sessionId": .string(m.sessionId), "kind": .string(m.kind), "payload": m.payload,
        "status": .string(m.status.rawValue), "attempts": .int(Int64(m.attempts)),
        "maxAttempts": .int(Int64(m.maxAttempts)), "createdAt": .int(m.createdMs),
        "nextAttemptAt": .int(m.nextAttemptMs),
    ]
    o["idempotencyKey"] = m.idempotencyKey.map { .string($0) } ?? .null
    o["expiresAt"] = m.expiresMs.map { .int($0) } ?? .null
    o["lastError"] = m.lastError.map { .string($0) } ?? .null
    return .object(o)
}

// The outbox, drafts and connection state over JSON-RPC. Replies report
// writes of this turn; the server releases them after its commit (so
// "queued" means on disk) and answers -32050 if that commit failed.
extension MethodTable {
    func registerOutbox(_ env: ServerEnvironment) {
        guard let store = env.store, let delivery = env.outbox else { return }
        registerMessageSend(env, store, delivery)
        registerOutboxQueue(store, delivery)
        registerDrafts(store, delivery)
        on("connection.update") { p, _ in
            let state = try p.oneOf("state", ["connected", "disconnected", "failed"])
            try StoreRPCError.call { try delivery.setConnected(state == "connected") }
            env.engine.apply(.connection(ConnectionChange(rawValue: state) ?? .disconnected))
            return ["state": .string(state), "pending": .int(Int64(try StoreRPCError.call { try store.count() }))]
        }
    }

    private func registerMessageSend(_ env: ServerEnvironment, _ store: Store, _ delivery: OutboxDelivery) {
        on("message.send") { p, ctx in
            let sessionId = try p.nonEmpty("sessionId")
            let device = try p.deviceId(or: ctx)
            let text: String = try p.required("text")
            let key: String? = try p.optional("idempotencyKey")
            if let key, key.isEmpty {
                throw RPCError.invalidParams("invalid params: 'idempotencyKey' must not be empty",
                                             data: ["param": "idempotencyKey", "expected": "non-empty string", "got": "empty string"])
            }
            let ttl: Int64? = try p.optional("ttlMs")
            if let ttl, ttl <= 0 {
                throw RPCError.invalidParams("invalid params: 'ttlMs' must be > 0",
                                             data: ["param": "ttlMs", "expected": "positive integer", "got": .int(ttl)])
            }
            let now = delivery.nowMs
            let r = try StoreRPCError.call {
                // A Claude Code session's hooks take its messages; others go to clients.
                try store.enqueue(sessionId: sessionId, kind: env.inbox?.owns(sessionId) == true ? AgentInbox.kind : "message",
                                  payload: ["text": .string(text)],
                                  idempotencyKey: key, maxAttempts: delivery.maxAttempts, nowMs: now,
                                  expiresMs: ttl.map { now.addingReportingOverflow($0).overflow ? .max : now + $0 })
            }
            delivery.schedulePump()
            if !r.existed { env.inbox?.queued(sessionId: sessionId) }
            // The person continues the session from this device (hand-off).
            if !r.existed { env.engine.apply(.userMessage(sessionId: sessionId, deviceId: device)) }
            guard let m = try StoreRPCError.call({ try store.message(id: r.id) }) else { throw RPCError.internalError("message \(r.id) vanished") }
            if r.existed && (m.sessionId != sessionId || m.payload["text"]?.stringValue != text) {
                throw RPCError.application(StoreRPCError.idempotencyConflict, "Idempotency key reused for a different message",
                                           data: ["idempotencyKey": .string(key ?? ""), "id": .int(m.id),
                                                  "reason": "a message with this key but another session or text was already accepted"])
            }
            return ["id": .int(r.id), "status": .string(m.status.rawValue), "duplicate": .bool(r.existed)]
        }
    }

    private func registerOutboxQueue(_ store: Store, _ delivery: OutboxDelivery) {
        on("outbox.list") { p, _ in
            let sessionId: String? = try p.optional("sessionId")
            let which = try p.oneOf("status", ["pending"] + OutboxStatus.allCases.map(\.rawValue) + ["all"], default: "pending")
            let afterId: Int64 = try p.optional("afterId") ?? 0
            let limit: Int = try p.optional("limit") ?? 100
            guard (1...1000).contains(limit) else {
                throw RPCError.invalidParams("invalid params: 'limit' must be in 1...1000",
                                             data: ["param": "limit", "expected": "integer 1...1000", "got": .int(Int64(limit))])
            }
            let statuses: Set<OutboxStatus> = which == "pending" ? OutboxStatus.pending
                : which == "all" ? Set(OutboxStatus.allCases) : [OutboxStatus(rawValue: which)!]
            // One more than asked tells whether another page exists.
            let rows = try StoreRPCError.call { try store.messages(sessionId: sessionId, statuses: statuses, afterId: afterId, limit: limit + 1) }
            let page = Array(rows.prefix(limit))
            return ["messages": .array(page.map(messageJSON)),
                    "nextAfterId": rows.count > limit ? .int(page.last!.id) : .null]
        }

        on("outbox.ack") { p, _ in
            let id = try OutboxParams.messageId(p)
            do { try store.ack(id: id, nowMs: delivery.nowMs) } catch { throw StoreRPCError.from(error).withId(id) }
            delivery.schedulePump() // the session's next message may go now
            return ["id": .int(id), "status": "delivered"]
        }

        on("outbox.fail") { p, _ in
            let id = try OutboxParams.messageId(p)
            let error: String = try p.required("error")
            let retry: Bool = try p.optional("retry") ?? true
            let m: OutboxMessage
            do {
                guard let found = try store.message(id: id) else {
                    throw RPCError.application(StoreRPCError.unknownMessage, "Unknown outbox message",
                                               data: ["id": .int(id), "reason": .string("no outbox message with id \(id)")])
                }
                m = found
                let at = retry ? delivery.retryAt(id: id, attempts: max(1, m.attempts), maxAttempts: m.maxAttempts) : nil
                try store.fail(id: id, error: error, retryAtMs: at, nowMs: delivery.nowMs)
            } catch let e as RPCError { throw e } catch { throw StoreRPCError.from(error).withId(id) }
            delivery.schedulePump()
            guard let now = try StoreRPCError.call({ try store.message(id: id) }) else { throw RPCError.internalError("message \(id) vanished") }
            return ["id": .int(id), "status": .string(now.status.rawValue), "attempts": .int(Int64(now.attempts)),
                    "nextAttemptAt": now.status == .queued ? .int(now.nextAttemptMs) : .null]
        }
    }

    private func registerDrafts(_ store: Store, _ delivery: OutboxDelivery) {
        on("draft.save") { p, _ in
            let sessionId = try p.nonEmpty("sessionId")
            let text: String = try p.required("text")
            let now = delivery.nowMs
            try StoreRPCError.call { try store.saveDraft(sessionId: sessionId, text: text, nowMs: now) }
            return ["sessionId": .string(sessionId), "savedAt": .int(now)]
        }

        on("draft.get") { p, _ in
            let sessionId = try p.nonEmpty("sessionId")
            let d = try StoreRPCError.call { try store.draft(sessionId: sessionId) }
            return ["sessionId": .string(sessionId), "text": d.map { .string($0.text) } ?? .null,
                    "savedAt": d.map { .int($0.savedMs) } ?? .null]
        }

        on("draft.clear") { p, _ in
            let sessionId = try p.nonEmpty("sessionId")
            let removed = try StoreRPCError.call { try store.clearDraft(sessionId: sessionId) }
            return ["sessionId": .string(sessionId), "cleared": .bool(removed)]
        }
    }
}

/// Params of the outbox methods, with -32602 errors that name the field.
enum OutboxParams {
    static func messageId(_ p: Params) throws -> Int64 {
        let id: Int64 = try p.required("id")
        guard id > 0 else {
            throw RPCError.invalidParams("invalid params: 'id' must be a positive integer",
                                         data: ["param": "id", "expected": "positive integer", "got": .int(id)])
        }
        return id
    }
}

private extension RPCError {
    /// Adds the message id to the error's data.
    func withId(_ id: Int64) -> RPCError {
        var e = self
        var d = e.data?.objectValue ?? [:]
        d["id"] = .int(id)
        e.data = .object(d)
        return e
    }
}
