import CBridge
import CUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which clock a scheduler runs on.
public enum ClockKind: String, Sendable {
    /// The loop's monotonic clock; timeouts fire from one uv timer.
    case system
    /// Time moves only through `advance(byMs:)` (tests, `serve --manual-clock`).
    case manual
}

/// Many timeouts on one loop wake-up (`cb_timeouts`, an indexed 4-ary heap;
/// a timerfd on Linux, one uv timer elsewhere): deadline order, ties
/// first-scheduled-first, never early, ms resolution.
/// The same code runs on the system clock or on a manual clock that a test
/// advances, crossing "60 seconds" or "1 hour" instantly and deterministically.
///
/// Memory: the C side keeps 44 bytes per pending timeout (plus array growth
/// slack) and no closures; the closures live here, in a side table indexed by
/// the C slot (16 bytes per slot plus whatever the closure captures, which
/// Swift allocates). `memoryBytes` reports both parts.
///
/// Loop thread only. Callbacks may schedule, cancel (even themselves: a
/// harmless no-op, the handle is already dead), reschedule and advance.
public final class TimeoutScheduler {
    /// A pending timeout. Dead once it fired or was cancelled; using a dead
    /// handle does nothing and reports false/nil.
    public struct Handle: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt64
        public var description: String { "timeout#\(rawValue & 0xFFFF_FFFF).\(rawValue >> 32)" }
    }

    public enum SchedulerError: Error, Equatable, CustomStringConvertible {
        case notManualClock
        public var description: String {
            "the clock can only be advanced on a manual-clock scheduler (serve --manual-clock)"
        }
    }

    public let clock: ClockKind
    /// Kept alive so the C timer can always be closed on it.
    public let loop: EventLoop?
    /// Manual clock: the wall-clock time (Unix ms) that `nowMs == 0` stands for.
    public let manualEpochMs: Int64
    private let c: OpaquePointer
    /// The side table: body of the timeout in C slot i at bodies[i]. Manual
    /// storage (no bounds or exclusivity checks): it is on every
    /// schedule/cancel/fire path and only this class touches it.
    @exclusivity(unchecked) private var bodies: UnsafeMutablePointer<(() -> Void)?> = .allocate(capacity: 0)
    @exclusivity(unchecked) private var bodiesCount = 0
    @exclusivity(unchecked) private var bodiesCapacity = 0

    /// Where a manual clock starts by default: 2026-01-01T00:00:00Z, so
    /// manual runs are reproducible.
    public static let defaultManualEpochMs: Int64 = 1_767_225_600_000

    /// A scheduler on `loop`. A manual clock starts at 0 ms and stands for
    /// wall-clock `manualEpochMs`.
    public init(loop: EventLoop, clock: ClockKind = .system, manualEpochMs: Int64 = TimeoutScheduler.defaultManualEpochMs) {
        self.loop = loop
        self.clock = clock
        self.manualEpochMs = manualEpochMs
        var p: OpaquePointer?
        let rc = cb_timeouts_new(loop.uv, clock == .manual ? CB_CLOCK_MANUAL : CB_CLOCK_SYSTEM, &p)
        precondition(rc == 0, "cb_timeouts_new: \(String(cString: cb_strerror(rc)))")
        c = p!
        cb_timeouts_set_data(c, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A manual-clock scheduler with no loop at all (pure tests).
    public init(manualEpochMs: Int64 = TimeoutScheduler.defaultManualEpochMs) {
        self.loop = nil
        self.clock = .manual
        self.manualEpochMs = manualEpochMs
        var p: OpaquePointer?
        let rc = cb_timeouts_new(nil, CB_CLOCK_MANUAL, &p)
        precondition(rc == 0, "cb_timeouts_new: \(String(cString: cb_strerror(rc)))")
        c = p!
        cb_timeouts_set_data(c, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        // Pending timeouts are dropped uncalled; a system timer is closed on
        // the loop (freed on its next turn).
        cb_timeouts_close(c)
        bodies.deinitialize(count: bodiesCount)
        bodies.deallocate()
    }

    /// Monotonic milliseconds on this scheduler's clock.
    public var nowMs: UInt64 { cb_timeouts_now(c) }

    /// Wall-clock Unix milliseconds: the real time, or on a manual clock
    /// `manualEpochMs + nowMs`. For timestamps clients see (expiresAt).
    public var wallClockMs: Int64 {
        switch clock {
        case .manual: return manualEpochMs &+ Int64(clamping: nowMs)
        case .system:
            var ts = timespec()
            clock_gettime(CLOCK_REALTIME, &ts)
            return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
        }
    }

    /// Runs `body` once, `ms` from now or later (never earlier).
    @discardableResult
    public func schedule(afterMs ms: UInt64, _ body: @escaping () -> Void) -> Handle {
        var id: cb_timeout_id = 0
        let rc = cb_timeouts_schedule(c, ms, timeoutTrampoline, nil, &id)
        return installed(rc, id, body)
    }

    /// Runs `body` once when the clock reaches `deadlineMs` (at once, on the
    /// next turn or advance, if already past). Periodic work that reschedules
    /// at `previousDeadline + period` never drifts.
    @discardableResult
    public func schedule(atMs deadlineMs: UInt64, _ body: @escaping () -> Void) -> Handle {
        var id: cb_timeout_id = 0
        let rc = cb_timeouts_schedule_at(c, deadlineMs, timeoutTrampoline, nil, &id)
        return installed(rc, id, body)
    }

    /// Receives the token of every timeout scheduled with `schedule(afterMs:token:)`.
    /// Set it once; tokens let hot paths (thousands of approvals or retries)
    /// schedule without allocating a closure per timeout: the C side keeps the
    /// token in its per-timeout data and Swift keeps nothing.
    public var onToken: ((UInt64) -> Void)?

    /// Calls `onToken(token)` once, `ms` from now or later. No allocation.
    @discardableResult
    public func schedule(afterMs ms: UInt64, token: UInt64) -> Handle {
        var id: cb_timeout_id = 0
        let rc = cb_timeouts_schedule(c, ms, tokenTrampoline, UnsafeMutableRawPointer(bitPattern: UInt(token)), &id)
        precondition(rc == 0, "cb_timeouts_schedule: \(String(cString: cb_strerror(rc)))")
        return Handle(rawValue: id)
    }

    /// Calls `onToken(token)` once when the clock reaches `deadlineMs`.
    @discardableResult
    public func schedule(atMs deadlineMs: UInt64, token: UInt64) -> Handle {
        var id: cb_timeout_id = 0
        let rc = cb_timeouts_schedule_at(c, deadlineMs, tokenTrampoline, UnsafeMutableRawPointer(bitPattern: UInt(token)), &id)
        precondition(rc == 0, "cb_timeouts_schedule: \(String(cString: cb_strerror(rc)))")
        return Handle(rawValue: id)
    }

    fileprivate func fireToken(_ token: UInt64) { onToken?(token) }

    private func installed(_ rc: Int32, _ id: cb_timeout_id, _ body: @escaping () -> Void) -> Handle {
        // Only allocation failure (or > 4G pending) can fail: like Array, trap.
        precondition(rc == 0, "cb_timeouts_schedule: \(String(cString: cb_strerror(rc)))")
        let slot = Int(truncatingIfNeeded: UInt32(truncatingIfNeeded: id))
        // The C side hands out slots densely from 0, so the table only ever
        // needs to grow to slot + 1.
        if slot >= bodiesCount { grow(to: slot + 1) }
        bodies[slot] = body
        return Handle(rawValue: id)
    }

    private func grow(to count: Int) {
        if count > bodiesCapacity {
            let cap = Swift.max(count, bodiesCapacity * 2, 64)
            let fresh = UnsafeMutablePointer<(() -> Void)?>.allocate(capacity: cap)
            fresh.moveInitialize(from: bodies, count: bodiesCount)
            bodies.deallocate()
            bodies = fresh
            bodiesCapacity = cap
        }
        (bodies + bodiesCount).initialize(repeating: nil, count: count - bodiesCount)
        bodiesCount = count
    }

    fileprivate func fire(_ id: cb_timeout_id) {
        let slot = Int(truncatingIfNeeded: UInt32(truncatingIfNeeded: id))
        // Take the body out before the call: it may schedule into this slot.
        let body = (bodies + slot).move()
        (bodies + slot).initialize(to: nil)
        body?()
    }

    /// Cancels a pending timeout. false if it already fired, was cancelled,
    /// or is the one currently running.
    @discardableResult
    public func cancel(_ h: Handle) -> Bool {
        guard cb_timeouts_cancel(c, h.rawValue) == 0 else { return false }
        // Token timeouts may sit in slots the table never grew to.
        let slot = Int(truncatingIfNeeded: UInt32(truncatingIfNeeded: h.rawValue))
        if slot < bodiesCount { bodies[slot] = nil }
        return true
    }

    /// Moves a pending timeout to `ms` from now (same handle and body); false if dead.
    @discardableResult
    public func reschedule(_ h: Handle, afterMs ms: UInt64) -> Bool {
        cb_timeouts_reschedule(c, h.rawValue, ms) == 0
    }

    /// Moves a pending timeout to an absolute deadline; false if dead.
    @discardableResult
    public func reschedule(_ h: Handle, atMs deadlineMs: UInt64) -> Bool {
        cb_timeouts_reschedule_at(c, h.rawValue, deadlineMs) == 0
    }

    /// The deadline of a pending timeout, nil if dead.
    public func deadline(of h: Handle) -> UInt64? {
        var d: UInt64 = 0
        return cb_timeouts_deadline(c, h.rawValue, &d) == 0 ? d : nil
    }

    public func isPending(_ h: Handle) -> Bool { cb_timeouts_deadline(c, h.rawValue, nil) == 0 }

    public var pendingCount: Int { cb_timeouts_pending(c) }

    public var nextDeadlineMs: UInt64? {
        var d: UInt64 = 0
        return cb_timeouts_next_deadline(c, &d) == 0 ? d : nil
    }

    /// Manual clock: moves time forward by `ms`, running every timeout due
    /// in deadline order (including ones their callbacks schedule within the
    /// window). Returns how many ran. Throws on a system clock.
    @discardableResult
    public func advance(byMs ms: UInt64) throws -> Int {
        guard clock == .manual else { throw SchedulerError.notManualClock }
        var fired = 0
        let rc = cb_timeouts_advance(c, ms, &fired)
        precondition(rc == 0, "cb_timeouts_advance: \(String(cString: cb_strerror(rc)))")
        return fired
    }

    /// Whether pending timeouts keep `EventLoop.run()` from returning
    /// (system clock; default true, like a uv timer).
    public var keepsLoopAlive: Bool = true {
        didSet { cb_timeouts_set_ref(c, keepsLoopAlive ? 1 : 0) }
    }

    /// Bytes held: the C heap and slot arrays, and this side table's slots.
    /// Closure contexts that capture values are allocated by Swift per closure
    /// and are not included (measure them with malloc statistics).
    public var memoryBytes: (c: Int, swiftTable: Int) {
        (cb_timeouts_memory(c), bodiesCapacity * MemoryLayout<(() -> Void)?>.stride)
    }
}

private let timeoutTrampoline: cb_timeout_fn = { t, id, _ in
    guard let t, let data = cb_timeouts_get_data(t) else { return }
    // Strong for the call: the body may drop the last other reference.
    let scheduler = Unmanaged<TimeoutScheduler>.fromOpaque(data).takeUnretainedValue()
    scheduler.fire(id)
}

private let tokenTrampoline: cb_timeout_fn = { t, _, data in
    guard let t, let owner = cb_timeouts_get_data(t) else { return }
    let scheduler = Unmanaged<TimeoutScheduler>.fromOpaque(owner).takeUnretainedValue()
    scheduler.fireToken(UInt64(UInt(bitPattern: data)))
}
