import CBridge
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a store operation failed. `message` is written for a person: it names
/// the file or id and what to do about it.
public struct StoreError: Error, Equatable, CustomStringConvertible, Sendable {
    public enum Kind: String, Sendable {
        case locked, newerSchema, notADatabase, foreign, readOnly, diskFull, io, corrupt, directory
        case notFound, invalidState, aborted, `internal`
    }
    public let kind: Kind
    public let message: String
    public var description: String { message }

    init(fault: cb_store_fault_t, message: String) {
        switch fault {
        case CB_STORE_FAULT_LOCKED: kind = .locked
        case CB_STORE_FAULT_NEWER: kind = .newerSchema
        case CB_STORE_FAULT_NOTADB: kind = .notADatabase
        case CB_STORE_FAULT_FOREIGN: kind = .foreign
        case CB_STORE_FAULT_READONLY: kind = .readOnly
        case CB_STORE_FAULT_FULL: kind = .diskFull
        case CB_STORE_FAULT_IO: kind = .io
        case CB_STORE_FAULT_CORRUPT: kind = .corrupt
        case CB_STORE_FAULT_DIRECTORY: kind = .directory
        case CB_STORE_FAULT_NOTFOUND: kind = .notFound
        case CB_STORE_FAULT_STATE: kind = .invalidState
        case CB_STORE_FAULT_ABORTED: kind = .aborted
        default: kind = .internal
        }
        self.message = message
    }
}

public enum OutboxStatus: String, CaseIterable, Sendable {
    case queued, inflight, delivered, failed, expired
    init(raw: Int32) {
        switch raw {
        case 0: self = .queued
        case 1: self = .inflight
        case 2: self = .delivered
        case 3: self = .failed
        default: self = .expired
        }
    }
    var bit: UInt32 {
        switch self {
        case .queued: return 1 << 0
        case .inflight: return 1 << 1
        case .delivered: return 1 << 2
        case .failed: return 1 << 3
        case .expired: return 1 << 4
        }
    }
    /// Waiting for delivery or for the client's ack.
    public static let pending: Set<OutboxStatus> = [.queued, .inflight]
}

/// One outbox row. Times are milliseconds since the Unix epoch (they must
/// survive a restart, so not a monotonic clock).
public struct OutboxMessage: Equatable, Sendable {
    public var id: Int64
    public var sessionId: String
    public var kind: String
    /// The payload as stored (always a JSON value).
    public var payload: JSON
    public var idempotencyKey: String?
    public var status: OutboxStatus
    public var attempts: Int
    public var maxAttempts: Int
    public var createdMs: Int64
    public var nextAttemptMs: Int64
    public var expiresMs: Int64?
    public var lastError: String?

    init(_ m: UnsafePointer<cb_outbox_msg_t>) {
        let p = m.pointee
        id = p.id
        sessionId = String(cString: p.session_id)
        kind = String(cString: p.kind)
        payload = JSON.parse(String(cString: p.payload)) ?? .string(String(cString: p.payload))
        idempotencyKey = p.idem_key.map { String(cString: $0) }
        status = OutboxStatus(raw: p.status)
        attempts = Int(p.attempts)
        maxAttempts = Int(p.max_attempts)
        createdMs = p.created_ms
        nextAttemptMs = p.next_attempt_ms
        expiresMs = p.expires_ms > 0 ? p.expires_ms : nil
        lastError = p.last_error.map { String(cString: $0) }
    }
}

/// A value in the key-value area.
public enum StoredValue: Equatable, Sendable {
    case json(JSON)
    case bytes([UInt8])
}

/// The durable store: the outbox, drafts and a key-value area in one SQLite
/// database (WAL, synchronous=FULL). Owns the database and the state
/// directory's lock; `deinit` commits what is pending and closes.
///
/// Writes join the current turn's transaction. Call `commit()` yourself, or
/// `attach(to:)` the event loop so every loop turn ends with one commit
/// (one fsync for a whole burst) followed by the `afterCommit` callbacks:
/// that is where replies to clients go, so nothing is acknowledged before
/// it is durable.
public final class Store {
    let handle: OpaquePointer
    private var loop: EventLoop?
    private var afterCommitQueue: [(StoreError?) -> Void] = []
    /// Called when the wakeup set with `scheduleWakeup(inMs:)` fires.
    public var onWakeup: (() -> Void)?
    /// Called at the end of a pending turn right before its commit (and by
    /// `flush()`): writes coalesced over the turn go here and join the commit.
    public var beforeCommit: (() -> Void)?

    /// Opens the store in `directory` (created 0700 if missing; database file
    /// 0600), or in memory when `directory` is nil. Throws a StoreError whose
    /// message is fit to print at startup.
    public init(directory: String?) throws {
        var s: OpaquePointer?
        let rc = cb_store_open(directory, &s)
        guard let s else { throw StoreError(fault: CB_STORE_FAULT_INTERNAL, message: "out of memory opening the store") }
        if rc != 0 {
            let err = StoreError(fault: cb_store_fault(s), message: String(cString: cb_store_errmsg(s)))
            cb_store_close(s)
            throw err
        }
        handle = s
    }

    deinit {
        // Replies still waiting see the close's commit as their turn end.
        let rc = cb_store_commit(handle)
        let err = rc == 0 ? nil : lastError()
        let pending = afterCommitQueue
        afterCommitQueue = []
        cb_store_close(handle)
        for body in pending { body(err) }
    }

    /// `$XDG_STATE_HOME/codingbridge`, else `~/.local/state/codingbridge`.
    public static func defaultDirectory(environment: [String: String]) -> String {
        if let x = environment["XDG_STATE_HOME"], x.hasPrefix("/") { return x + "/codingbridge" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "/"
        return (home.hasSuffix("/") ? home : home + "/") + ".local/state/codingbridge"
    }

    /// The database file ("" in memory).
    public var path: String { String(cString: cb_store_path(handle)) }
    public var schemaVersion: Int { Int(cb_store_schema_version(handle)) }
    public static var supportedSchemaVersion: Int { Int(CB_STORE_SCHEMA_VERSION) }
    /// Writes waiting for the next commit.
    public var hasPendingWrites: Bool { cb_store_dirty(handle) != 0 }
    /// The end of this turn will commit and run `afterCommit` callbacks
    /// (writes are waiting, or someone asked for the turn end).
    public var hasPendingTurn: Bool { cb_store_turn_pending(handle) != 0 }
    /// Asks for the turn-end callbacks (`beforeCommit`, then the commit and
    /// `afterCommit`) even if nothing was written yet.
    public func requestTurnEnd() { cb_store_request_turn_end(handle) }
    /// Commits that wrote something (each one fsync).
    public var commitCount: UInt64 { cb_store_commit_count(handle) }

    private func lastError() -> StoreError {
        StoreError(fault: cb_store_fault(handle), message: String(cString: cb_store_errmsg(handle)))
    }

    @inline(__always)
    func check(_ rc: Int32) throws {
        if rc != 0 { throw lastError() }
    }

    // MARK: group commit

    /// Commits the turn's writes now (one fsync). On failure all of them were
    /// rolled back.
    public func commit() throws { try check(cb_store_commit(handle)) }

    /// Commits at the end of every turn of `loop`, then runs the `afterCommit`
    /// callbacks. The store keeps the loop alive as long as it lives.
    public func attach(to loop: EventLoop) throws {
        let me = Unmanaged.passUnretained(self).toOpaque()
        try check(cb_store_attach(handle, loop.uv, { rc, data in
            let store = Unmanaged<Store>.fromOpaque(data!).takeUnretainedValue()
            store.turnEnded(rc)
        }, { data in
            let store = Unmanaged<Store>.fromOpaque(data!).takeUnretainedValue()
            store.onWakeup?()
        }, me))
        cb_store_set_before_commit(handle) { data in
            Unmanaged<Store>.fromOpaque(data!).takeUnretainedValue().beforeCommit?()
        }
        self.loop = loop
    }

    /// Runs `body` once this turn's writes are committed (nil) or were rolled
    /// back (the error). Without an attached loop, runs at the next
    /// `endTurn()` / `flush()`.
    public func afterCommit(_ body: @escaping (StoreError?) -> Void) {
        afterCommitQueue.append(body)
        cb_store_request_turn_end(handle)
    }

    /// `endTurn()` without its result: `beforeCommit`, the commit, the
    /// waiting `afterCommit` callbacks (what the loop hook does at the end of
    /// a turn; tests without a loop call it).
    public func flush() { _ = endTurn() }

    /// Rolls back everything this turn wrote; its commit then fails with
    /// `reason`, so nothing of the turn is acknowledged.
    public func abortTurn(_ reason: String) { cb_store_abort_turn(handle, reason) }

    /// Ends the turn now, as the loop hook does: `beforeCommit`, the commit,
    /// the `afterCommit` callbacks. Returns the commit's error.
    @discardableResult
    public func endTurn() -> StoreError? {
        beforeCommit?()
        let rc = cb_store_end_turn(handle)
        let err = rc == 0 ? nil : lastError()
        turnEnded(rc)
        return err
    }

    private func turnEnded(_ rc: Int32) {
        let err = rc == 0 ? nil : lastError()
        // Callbacks may write again (a delivery after an ack): those writes
        // belong to the next turn, so take the queue first.
        let pending = afterCommitQueue
        afterCommitQueue = []
        for body in pending { body(err) }
    }

    /// Calls `onWakeup` after `ms` milliseconds (replacing an earlier
    /// wakeup); nil cancels. Needs `attach(to:)`.
    public func scheduleWakeup(inMs ms: Int64?) {
        cb_store_set_wakeup(handle, ms.map { max(0, $0) } ?? -1)
    }

    /// Fault injection for tests: the database may grow by `pages` more pages,
    /// then writes fail exactly as on a full disk.
    public func limitGrowth(pages: Int64) throws { try check(cb_store_limit_growth(handle, pages)) }

    // MARK: outbox

    /// Queues a message. With an `idempotencyKey` already used, nothing is
    /// written and the first message's id comes back with `existed: true`.
    public func enqueue(sessionId: String, kind: String, payload: JSON, idempotencyKey: String? = nil,
                        maxAttempts: Int = 12, nowMs: Int64, expiresMs: Int64? = nil) throws -> (id: Int64, existed: Bool) {
        var id: Int64 = 0
        var existed: Int32 = 0
        try check(cb_outbox_enqueue(handle, sessionId, kind, payload.serialized(), idempotencyKey,
                                    Int32(clamping: maxAttempts), nowMs, expiresMs ?? 0, &id, &existed))
        return (id, existed != 0)
    }

    /// The message with `id`, or nil when there is none.
    public func message(id: Int64) throws -> OutboxMessage? {
        var out: OutboxMessage?
        let rc = withUnsafeMutablePointer(to: &out) { p in
            cb_outbox_get(handle, id, { m, d in
                d!.assumingMemoryBound(to: OutboxMessage?.self).pointee = OutboxMessage(m!)
                return 0
            }, p)
        }
        if rc == CB_ENOTFOUND { return nil }
        try check(rc)
        return out
    }

    private func collect(_ body: (cb_outbox_visit_cb, UnsafeMutableRawPointer) -> Int32) throws -> [OutboxMessage] {
        var out: [OutboxMessage] = []
        let rc = withUnsafeMutablePointer(to: &out) { p in
            body({ m, d in
                d!.assumingMemoryBound(to: [OutboxMessage].self).pointee.append(OutboxMessage(m!))
                return 0
            }, p)
        }
        if rc < 0 { throw lastError() }
        return out
    }

    /// Messages in id order (which is send order, so FIFO per session).
    public func messages(sessionId: String? = nil, statuses: Set<OutboxStatus> = OutboxStatus.pending,
                         afterId: Int64 = 0, limit: Int = 0) throws -> [OutboxMessage] {
        let mask = statuses.reduce(UInt32(0)) { $0 | $1.bit }
        return try collect { cb, p in cb_outbox_list(handle, sessionId, mask, afterId, Int32(clamping: limit), cb, p) }
    }

    public func count(statuses: Set<OutboxStatus> = OutboxStatus.pending) throws -> Int {
        let n = cb_outbox_count(handle, statuses.reduce(UInt32(0)) { $0 | $1.bit })
        if n < 0 { throw lastError() }
        return Int(n)
    }

    /// Marks `id` delivered. Throws `.notFound` for an unknown id and
    /// `.invalidState` when it already finished (delivered, failed, expired).
    public func ack(id: Int64, nowMs: Int64) throws { try check(cb_outbox_ack(handle, id, nowMs)) }

    /// Records a failed attempt; `retryAtMs` nil means give up (status failed, at `nowMs`).
    public func fail(id: Int64, error: String, retryAtMs: Int64?, nowMs: Int64) throws {
        try check(cb_outbox_fail(handle, id, error, retryAtMs ?? -1, nowMs))
    }

    /// Messages due at `nowMs`, at most one per session (FIFO per session),
    /// now in flight until `ackDeadlineMs`; plus heads that just expired
    /// (status `.expired`) and in-flight heads whose ack is overdue (status
    /// `.inflight`, unchanged: call `fail` for them).
    public func takeDue(nowMs: Int64, ackDeadlineMs: Int64, limit: Int = 0) throws -> [OutboxMessage] {
        try collect { cb, p in cb_outbox_take_due(handle, nowMs, ackDeadlineMs, Int32(clamping: limit), cb, p) }
    }

    /// Messages of this kind go into an agent's session through its hooks
    /// (`takeSessionHead`); the client delivery (`takeDue`) leaves them alone.
    public static let agentMessageKind = CB_OUTBOX_AGENT_KIND

    /// The head of one session's queue when it is an agent message and due
    /// (or its ack is overdue): now inflight until `ackDeadlineMs`. Expired
    /// heads come back with status expired.
    public func takeSessionHead(_ sessionId: String, nowMs: Int64, ackDeadlineMs: Int64) throws -> [OutboxMessage] {
        try collect { cb, p in cb_outbox_take_session(handle, sessionId, nowMs, ackDeadlineMs, cb, p) }
    }

    /// When the next message becomes due (or expires), nil when none waits.
    public func nextDueMs() throws -> Int64? {
        let t = cb_outbox_next_due(handle)
        if t <= Int64(CB_E_BASE) { throw lastError() }
        return t < 0 ? nil : t
    }

    /// In-flight messages back to queued, due at `nowMs` (after a restart or a
    /// lost connection the client cannot ack them any more).
    @discardableResult
    public func requeueInflight(nowMs: Int64) throws -> Int {
        let n = cb_outbox_requeue_inflight(handle, nowMs)
        if n < 0 { throw lastError() }
        return Int(n)
    }

    /// Deletes up to `limit` messages that finished (delivered, failed,
    /// expired) before `beforeMs`; returns how many. Unfinished ones stay.
    @discardableResult
    public func pruneFinished(beforeMs: Int64, limit: Int = 0) throws -> Int {
        let n = cb_outbox_prune(handle, beforeMs, Int32(clamping: limit))
        if n < 0 { throw lastError() }
        return Int(n)
    }

    // MARK: drafts

    public func saveDraft(sessionId: String, text: String, nowMs: Int64) throws {
        // Explicit length: a draft may contain NUL characters.
        var t = text
        let rc = t.withUTF8 { buf in
            buf.withMemoryRebound(to: CChar.self) { b in
                b.baseAddress.map { cb_draft_save(handle, sessionId, $0, b.count, nowMs) }
                    ?? cb_draft_save(handle, sessionId, "", 0, nowMs)
            }
        }
        try check(rc)
    }

    public func draft(sessionId: String) throws -> (text: String, savedMs: Int64)? {
        var p: UnsafeMutablePointer<CChar>?
        var len = 0
        var saved: Int64 = 0
        let rc = cb_draft_get(handle, sessionId, &p, &len, &saved)
        if rc == CB_ENOTFOUND { return nil }
        try check(rc)
        defer { free(p) }
        let text = String(decoding: UnsafeRawBufferPointer(start: p, count: len), as: UTF8.self)
        return (text, saved)
    }

    /// True when a draft existed.
    @discardableResult
    public func clearDraft(sessionId: String) throws -> Bool {
        var removed: Int32 = 0
        try check(cb_draft_clear(handle, sessionId, &removed))
        return removed != 0
    }

    /// How many sessions have a draft (what a restart brings back).
    public func draftCount() throws -> Int {
        let n = cb_draft_count(handle)
        if n < 0 { throw lastError() }
        return Int(n)
    }

    // MARK: key-value area

    public func put(_ value: StoredValue, namespace: String, key: String, nowMs: Int64) throws {
        switch value {
        case .json(let j):
            var text = j.serialized()
            try text.withUTF8 { buf in
                try check(cb_kv_put(handle, namespace, key, buf.baseAddress, buf.count, 1, nowMs))
            }
        case .bytes(let b):
            try b.withUnsafeBytes { buf in
                try check(cb_kv_put(handle, namespace, key, buf.baseAddress, buf.count, 0, nowMs))
            }
        }
    }

    private static func decode(_ p: UnsafeRawPointer?, _ len: Int, _ isJSON: Bool) -> StoredValue {
        let buf = UnsafeRawBufferPointer(start: p, count: len)
        if isJSON, let j = JSON.parse(String(decoding: buf, as: UTF8.self)) { return .json(j) }
        return .bytes(Array(buf))
    }

    public func value(namespace: String, key: String) throws -> StoredValue? {
        var p: UnsafeMutableRawPointer?
        var len = 0
        var isJSON: Int32 = 0
        let rc = cb_kv_get(handle, namespace, key, &p, &len, &isJSON)
        if rc == CB_ENOTFOUND { return nil }
        try check(rc)
        defer { free(p) }
        return Store.decode(p, len, isJSON != 0)
    }

    @discardableResult
    public func delete(namespace: String, key: String) throws -> Bool {
        var removed: Int32 = 0
        try check(cb_kv_delete(handle, namespace, key, &removed))
        return removed != 0
    }

    /// Every entry of a namespace, in key order.
    public func entries(namespace: String) throws -> [(key: String, value: StoredValue)] {
        var out: [(key: String, value: StoredValue)] = []
        let rc = withUnsafeMutablePointer(to: &out) { p in
            cb_kv_list(handle, namespace, { k, v, len, isJSON, d in
                d!.assumingMemoryBound(to: [(key: String, value: StoredValue)].self).pointee
                    .append((String(cString: k!), Store.decode(v, len, isJSON != 0)))
                return 0
            }, p)
        }
        try check(rc)
        return out
    }

    /// Milliseconds since the Unix epoch (wall clock: persisted times must
    /// mean the same after a restart).
    public static func wallClockMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
