import BridgeCore

/// Delivery policy: which queued messages go to the client and when.
final class OutboxDelivery {
    let store: Store
    let scheduler: TimeoutScheduler
    let router: NotificationRouter
    let log: Logger
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

    init(store: Store, scheduler: TimeoutScheduler, router: NotificationRouter, log: Logger) {
        self.store = store
        self.scheduler = scheduler
        self.router = router
        self.log = log
    }

    var nowMs: Int64 { scheduler.wallClockMs }

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
            log.error("outbox delivery: \(error)")
        }
        // Only what is committed goes out: after a crash the client may see
        // a delivery twice (at-least-once, same id), never one we forgot.
        if !notes.isEmpty {
            store.afterCommit { [router, log] err in
                if let err { log.error("outbox delivery not recorded, will retry: \(err)"); return }
                for (m, p) in notes { router.send(m, p, to: .all) }
            }
        }
        armWakeup()
    }

    /// Tells every client that message `id` finished without delivery, after the commit that says so.
    func notifyUndeliverable(_ id: Int64) {
        guard let m = try? store.message(id: id) else { return }
        let note = undeliverable(m, status: m.status.rawValue, error: m.lastError ?? "not delivered")
        store.afterCommit { [router] _ in router.send("outbox.undeliverable", note, to: .all) }
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
            log.error("outbox history not pruned, will retry: \(error)")
        }
        pruneTimer = scheduler.schedule(afterMs: more ? 0 : Self.pruneEveryMs) { [weak self] in self?.prune() }
    }

    /// One scheduler timeout at the next due time (manual clock in tests).
    func armWakeup() {
        if let w = wakeup { _ = scheduler.cancel(w); wakeup = nil }
        guard connected, let due = try? store.nextDueMs() else { return }
        let delay = UInt64(max(0, due - nowMs))
        wakeup = scheduler.schedule(afterMs: delay) { [weak self] in
            self?.wakeup = nil
            self?.pump()
        }
    }

    func setConnected(_ up: Bool) throws {
        connected = up
        if up {
            schedulePump()
        } else {
            if let w = wakeup { _ = scheduler.cancel(w); wakeup = nil }
            // Deliveries handed to a link that dropped cannot be acked: send
            // them again (same id, same attempt count) after reconnecting.
            try store.requeueInflight(nowMs: nowMs)
        }
    }
}

