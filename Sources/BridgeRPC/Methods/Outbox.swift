import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

// The outbox, drafts and connection state over JSON-RPC. Every reply that
// reports a write is sent only after the loop turn's transaction committed
// (Store.afterCommit), so "queued" means on disk; reads also run after the
// commit so they never show writes that might still roll back.

extension ServerEnvironment {
    /// Opens the durable store from the options once (every area may call
    /// this; the first call opens). A StoreError here fails server start with
    /// its message ("cannot serve: state directory ... is in use ... (pid N)").
    public func openStore() throws -> Store {
        if let store { return store }
        let dir: String?
        if options.ephemeral {
            dir = nil
        } else if let d = options.stateDirectory {
            dir = d
        } else {
            var envVars: [String: String] = [:]
            for name in ["XDG_STATE_HOME", "HOME"] { if let v = getenv(name) { envVars[name] = String(cString: v) } }
            dir = Store.defaultDirectory(environment: envVars)
        }
        let s = try Store(directory: dir)
        try s.attach(to: loop)
        store = s
        Log.info("durable state: \(dir.map { $0 + "/codingbridge.db" } ?? "in memory (--ephemeral)")")
        onExit.append { [unowned s] in s.flush() }
        return s
    }
}

/// Application errors of the store methods (-32050...-32053).
enum StoreRPCError {
    static let unavailable = -32050
    static let unknownMessage = -32051
    static let finished = -32052
    static let idempotencyConflict = -32053

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

/// Delivery policy: which queued messages go to the client and when.
final class OutboxDelivery {
    let env: ServerEnvironment
    let store: Store
    var connected = false
    /// A delivered message must be acked (or failed) within this time, else
    /// it counts as a failed attempt and is retried after the backoff.
    let ackTimeoutMs: Int64 = 30_000
    let backoff = Backoff.delivery
    let maxAttempts = Backoff.delivery.maxAttempts ?? 12
    private var wakeup: TimeoutScheduler.Handle?
    private var pumpQueued = false
    /// Finished messages (delivered, failed, expired) are kept this long for
    /// `outbox.list` and idempotent retries, then deleted, so a daemon's
    /// database does not grow with every message it ever sent.
    static let historyRetentionMs: Int64 = 7 * 24 * 3_600_000
    static let pruneEveryMs: UInt64 = 3_600_000
    /// Rows deleted per loop turn: a big backlog goes in slices, not one stall.
    static let pruneBatch = 10_000
    private var pruneTimer: TimeoutScheduler.Handle?

    init(env: ServerEnvironment, store: Store) {
        self.env = env
        self.store = store
    }

    var nowMs: Int64 { env.scheduler.wallClockMs }

    /// Runs a delivery pass after this turn's commit (once per turn).
    func schedulePump() {
        guard connected, !pumpQueued else { return }
        pumpQueued = true
        store.afterCommit { [weak self] _ in
            self?.pumpQueued = false
            self?.pump()
        }
    }

    /// The retry time after attempt `attempts` of message `id` failed; nil: give up.
    func retryAt(id: Int64, attempts: Int, maxAttempts: Int) -> Int64? {
        guard attempts < maxAttempts, let d = backoff.delayMs(attempt: attempts, seed: UInt64(bitPattern: id)) else {
            return nil
        }
        return nowMs + Int64(clamping: d)
    }

    func pump() {
        guard connected else { return }
        let now = nowMs
        var notes: [(String, JSON)] = []
        do {
            let batch = 256
            let due = try store.takeDue(nowMs: now, ackDeadlineMs: now + ackTimeoutMs, limit: batch)
            for m in due {
                switch m.status {
                case .expired:
                    notes.append(("outbox.undeliverable", undeliverable(m, status: "expired", error: "expired before delivery")))
                case .inflight where m.nextAttemptMs <= now:
                    // Delivered earlier, never acked: a failed attempt.
                    let err = "no ack within \(ackTimeoutMs) ms"
                    let at = retryAt(id: m.id, attempts: m.attempts, maxAttempts: m.maxAttempts)
                    try store.fail(id: m.id, error: err, retryAtMs: at, nowMs: now)
                    if at == nil { notes.append(("outbox.undeliverable", undeliverable(m, status: "failed", error: err))) }
                case .inflight:
                    notes.append(("outbox.deliver", ["id": .int(m.id), "sessionId": .string(m.sessionId), "kind": .string(m.kind),
                                                     "payload": m.payload, "attempt": .int(Int64(m.attempts))]))
                default: break
                }
            }
            if due.count >= batch { schedulePump() }
        } catch {
            Log.error("outbox delivery: \(error)")
        }
        // Only what is committed goes out: after a crash the client may see
        // a delivery twice (at-least-once, same id), never one we forgot.
        if !notes.isEmpty {
            store.afterCommit { [env] err in
                if let err { Log.error("outbox delivery not recorded, will retry: \(err)"); return }
                for (m, p) in notes { env.broadcast(m, p) }
            }
        }
        armWakeup()
    }

    private func undeliverable(_ m: OutboxMessage, status: String, error: String) -> JSON {
        ["id": .int(m.id), "sessionId": .string(m.sessionId), "kind": .string(m.kind), "status": .string(status),
         "attempts": .int(Int64(m.attempts)), "error": .string(error)]
    }

    /// Deletes finished messages older than the retention, a slice per turn,
    /// then again in an hour.
    func prune() {
        pruneTimer = nil
        var more = false
        do {
            more = try store.pruneFinished(beforeMs: nowMs - Self.historyRetentionMs, limit: Self.pruneBatch) == Self.pruneBatch
        } catch {
            Log.error("outbox history not pruned, will retry: \(error)")
        }
        pruneTimer = env.scheduler.schedule(afterMs: more ? 0 : Self.pruneEveryMs) { [weak self] in self?.prune() }
    }

    /// One scheduler timeout at the next due time (manual clock in tests).
    func armWakeup() {
        if let w = wakeup { _ = env.scheduler.cancel(w); wakeup = nil }
        guard connected, let due = try? store.nextDueMs() else { return }
        let delay = UInt64(max(0, due - nowMs))
        wakeup = env.scheduler.schedule(afterMs: delay) { [weak self] in
            self?.wakeup = nil
            self?.pump()
        }
    }

    func setConnected(_ up: Bool) throws {
        connected = up
        if up {
            schedulePump()
        } else {
            if let w = wakeup { _ = env.scheduler.cancel(w); wakeup = nil }
            // Deliveries handed to a link that dropped cannot be acked: send
            // them again (same id, same attempt count) after reconnecting.
            try store.requeueInflight(nowMs: nowMs)
        }
    }
}

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

extension MethodTable {
    func registerOutbox(_ env: ServerEnvironment) throws {
        let store = try env.openStore()
        let delivery = OutboxDelivery(env: env, store: store)
        // The process restarted: deliveries in flight before are lost with
        // the old connection.
        let requeued = try store.requeueInflight(nowMs: delivery.nowMs)
        try store.commit()
        delivery.prune()
        let queuedAtStart = try store.count()
        let draftsAtStart = try store.draftCount()
        let previous = env.recovered
        env.recovered = {
            var r = previous().objectValue ?? [:]
            r["queuedMessages"] = .int(Int64(queuedAtStart))
            r["requeuedDeliveries"] = .int(Int64(requeued))
            r["drafts"] = .int(Int64(draftsAtStart))
            return .object(r)
        }

        /// Replies once the turn's writes are committed; `result` runs after
        /// the commit too (reads see only durable state).
        /// `andSnapshot`: also wait for the commit of the engine snapshot
        /// written after this turn's (see Continuity.swift).
        func afterCommit(_ reply: @escaping RPCReply, andSnapshot: Bool = false, _ result: @escaping () throws -> JSON) {
            (andSnapshot ? store.afterFollowingCommit : store.afterCommit) { err in
                if let err { return reply(.failure(StoreRPCError.from(err))) }
                do { reply(.success(try result())) } catch { reply(.failure(StoreRPCError.from(error))) }
            }
        }

        func nonEmpty(_ p: Params, _ key: String) throws -> String {
            let s: String = try p.required(key)
            guard !s.isEmpty else {
                throw RPCError.invalidParams("invalid params: '\(key)' must not be empty",
                                             data: ["param": .string(key), "expected": "non-empty string", "got": "empty string"])
            }
            return s
        }

        func messageId(_ p: Params) throws -> Int64 {
            let id: Int64 = try p.required("id")
            guard id > 0 else {
                throw RPCError.invalidParams("invalid params: 'id' must be a positive integer",
                                             data: ["param": "id", "expected": "positive integer", "got": .int(id)])
            }
            return id
        }

        onAsync("message.send") { p, ctx, reply in
            let sessionId = try nonEmpty(p, "sessionId")
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
            let r: (id: Int64, existed: Bool)
            do {
                r = try store.enqueue(sessionId: sessionId, kind: "message", payload: ["text": .string(text)],
                                      idempotencyKey: key, maxAttempts: delivery.maxAttempts, nowMs: now,
                                      expiresMs: ttl.map { now + $0 })
            } catch { throw StoreRPCError.from(error) }
            delivery.schedulePump()
            // The person continues the session from this device (hand-off);
            // if that changed the session, the reply also waits for the
            // commit of its snapshot (written after this turn's commit).
            let changed = !r.existed && !env.engine.apply(.userMessage(sessionId: sessionId, deviceId: device)).effects.isEmpty
            afterCommit(reply, andSnapshot: changed) {
                guard let m = try store.message(id: r.id) else { throw RPCError.internalError("message \(r.id) vanished") }
                if r.existed && (m.sessionId != sessionId || m.payload["text"]?.stringValue != text) {
                    throw RPCError.application(StoreRPCError.idempotencyConflict, "Idempotency key reused for a different message",
                                               data: ["idempotencyKey": .string(key ?? ""), "id": .int(m.id),
                                                      "reason": "a message with this key but another session or text was already accepted"])
                }
                return ["id": .int(r.id), "status": .string(m.status.rawValue), "duplicate": .bool(r.existed)]
            }
        }

        onAsync("outbox.list") { p, _, reply in
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
            afterCommit(reply) {
                // One more than asked tells whether another page exists.
                let rows = try store.messages(sessionId: sessionId, statuses: statuses, afterId: afterId, limit: limit + 1)
                let page = Array(rows.prefix(limit))
                return ["messages": .array(page.map(messageJSON)),
                        "nextAfterId": rows.count > limit ? .int(page.last!.id) : .null]
            }
        }

        onAsync("outbox.ack") { p, _, reply in
            let id = try messageId(p)
            do { try store.ack(id: id, nowMs: delivery.nowMs) } catch { throw StoreRPCError.from(error).withId(id) }
            delivery.schedulePump() // the session's next message may go now
            afterCommit(reply) { ["id": .int(id), "status": "delivered"] }
        }

        onAsync("outbox.fail") { p, _, reply in
            let id = try messageId(p)
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
            afterCommit(reply) {
                guard let now = try store.message(id: id) else { throw RPCError.internalError("message \(id) vanished") }
                return ["id": .int(id), "status": .string(now.status.rawValue), "attempts": .int(Int64(now.attempts)),
                        "nextAttemptAt": now.status == .queued ? .int(now.nextAttemptMs) : .null]
            }
        }

        onAsync("draft.save") { p, _, reply in
            let sessionId = try nonEmpty(p, "sessionId")
            let text: String = try p.required("text")
            let now = delivery.nowMs
            do { try store.saveDraft(sessionId: sessionId, text: text, nowMs: now) } catch { throw StoreRPCError.from(error) }
            afterCommit(reply) { ["sessionId": .string(sessionId), "savedAt": .int(now)] }
        }

        onAsync("draft.get") { p, _, reply in
            let sessionId = try nonEmpty(p, "sessionId")
            afterCommit(reply) {
                let d = try store.draft(sessionId: sessionId)
                return ["sessionId": .string(sessionId), "text": d.map { .string($0.text) } ?? .null,
                        "savedAt": d.map { .int($0.savedMs) } ?? .null]
            }
        }

        onAsync("draft.clear") { p, _, reply in
            let sessionId = try nonEmpty(p, "sessionId")
            let removed: Bool
            do { removed = try store.clearDraft(sessionId: sessionId) } catch { throw StoreRPCError.from(error) }
            afterCommit(reply) { ["sessionId": .string(sessionId), "cleared": .bool(removed)] }
        }

        onAsync("connection.update") { p, _, reply in
            let state = try p.oneOf("state", ["connected", "disconnected", "failed"])
            do { try delivery.setConnected(state == "connected") } catch { throw StoreRPCError.from(error) }
            for h in env.onConnectionUpdate { h(state) }
            afterCommit(reply) { ["state": .string(state), "pending": .int(Int64(try store.count()))] }
        }
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
