import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// The durable push queue: a push is stored in this turn's commit and sent
/// only after it, deleted in the turn its 2xx arrives, retried with the
/// delivery backoff otherwise. A kill -9 loses none; one sent again after a
/// restart is one whose 2xx had not been read when the process died.
final class PushQueue {
    static let namespace = "push.queue"

    struct Job {
        var seq: Int64
        var request: PushRequest
        /// apns-id: one UUID per push, the same on every attempt.
        var pushId: String
        var attempts: Int
        var notBeforeMs: Int64
        /// Monotonic ns when the push was made, for the latency figures; not stored.
        var madeAtNs: UInt64 = 0

        /// The stored row, JSON text that `PushRequest.init(json:)` and the
        /// loader read back, written directly so the payload's one encoding is
        /// reused rather than encoded again.
        var storedBytes: [UInt8] {
            let r = request
            var out = [UInt8]()
            out.reserveCapacity(r.body.count + 320)
            func key(_ k: String, first: Bool = false) {
                if !first { out.append(0x2C) }
                out.append(0x22)
                out.append(contentsOf: k.utf8)
                out.append(contentsOf: "\":".utf8)
            }
            out.append(contentsOf: #"{"request":{"#.utf8)
            key("registrationId", first: true); JSON.string(r.registrationId).encode(into: &out)
            key("platform"); JSON.string(r.platform.rawValue).encode(into: &out)
            key("pushType"); JSON.string(r.pushType).encode(into: &out)
            key("priority"); out.append(contentsOf: String(r.priority).utf8)
            key("collapseId"); r.collapseId.json.encode(into: &out)
            key("expiresAtSec"); out.append(contentsOf: String(r.expiresAtSec).utf8)
            key("payload"); out.append(contentsOf: r.body) // as it was encoded once
            out.append(0x7D)
            key("pushId"); JSON.string(pushId).encode(into: &out)
            key("attempts"); out.append(contentsOf: String(attempts).utf8)
            key("notBeforeMs"); out.append(contentsOf: String(notBeforeMs).utf8)
            out.append(0x7D)
            return out
        }
    }

    private let store: Store
    private let scheduler: TimeoutScheduler
    private let log: Logger
    let registry: PushRegistry
    let metrics: PushMetrics
    var senders: [PushRegistration.Platform: PushSender] = [:]
    private(set) var jobs: [Int64: Job] = [:]
    private var inflight = Set<Int64>()
    /// Committed and due, oldest first (FIFO; sent entries before `readyHead`).
    private var ready: [Int64] = []
    private var readyHead = 0
    /// Stored in this turn: they become ready when it commits.
    private var fresh: [Int64] = []
    private var retryTimers: [Int64: TimeoutScheduler.Handle] = [:]
    private var nextSeq: Int64 = 1
    private var pumpQueued = false
    private var pumping = false
    /// Pushes handed to the services at once. More only queue up inside
    /// libcurl (one connection's streams), which makes a burst slower, not faster.
    static let maxInFlight = 128
    /// The delivery backoff, its delay held at the cap after its last
    /// attempt: a push is retried until it expires, never given up earlier.
    let backoff = Backoff.delivery

    init(store: Store, scheduler: TimeoutScheduler, registry: PushRegistry, metrics: PushMetrics, log: Logger) throws {
        self.store = store
        self.scheduler = scheduler
        self.registry = registry
        self.metrics = metrics
        self.log = log
        for (key, v) in try store.entries(namespace: Self.namespace) {
            guard let seq = Int64(key), case .bytes(let b) = v, let j = JSON.parse(String(decoding: b, as: UTF8.self)), let r = j["request"].flatMap(PushRequest.init(json:)),
                  let id = j["pushId"]?.stringValue else {
                log.warn("push queue: unreadable entry \(key) dropped")
                _ = try? store.delete(namespace: Self.namespace, key: key)
                continue
            }
            let attempts = Int(clamping: min(max(j["attempts"]?.intValue ?? 0, 0), 1000))
            jobs[seq] = Job(seq: seq, request: r, pushId: id, attempts: attempts, notBeforeMs: j["notBeforeMs"]?.intValue ?? 0,
                            madeAtNs: EventLoop.hrtimeNs)
            nextSeq = max(nextSeq, seq &+ 1)
        }
        let now = scheduler.wallClockMs
        for seq in jobs.keys.sorted() {
            guard let j = jobs[seq] else { continue }
            if j.notBeforeMs > now { retryLater(seq, afterMs: j.notBeforeMs - now) } else { ready.append(seq) }
        }
        if !jobs.isEmpty { log.info("push queue: \(jobs.count) push(es) from before the restart to send") }
    }

    var count: Int { jobs.count }

    /// Stores `r` in this turn; it leaves after the commit.
    func enqueue(_ r: PushRequest) throws {
        let seq = nextSeq
        nextSeq += 1
        let job = Job(seq: seq, request: r, pushId: Self.uuid(), attempts: 0, notBeforeMs: 0, madeAtNs: EventLoop.hrtimeNs)
        try put(job)
        jobs[seq] = job
        fresh.append(seq)
        schedulePump()
    }

    /// The jobs for `registrationId` go with it (a dead token takes nothing more).
    func dropJobs(for registrationId: String) {
        for (seq, j) in jobs where j.request.registrationId == registrationId && !inflight.contains(seq) {
            if let t = retryTimers.removeValue(forKey: seq) { _ = scheduler.cancel(t) }
            forget(seq)
        }
    }

    func start() { schedulePump() }

    private func key(_ seq: Int64) -> String {
        let s = String(seq)
        return String(repeating: "0", count: max(0, 19 - s.count)) + s
    }

    private func put(_ j: Job) throws {
        // JSON text stored as bytes: encoded here, the payload's encoding reused.
        try store.put(.bytes(j.storedBytes), namespace: Self.namespace, key: key(j.seq), nowMs: scheduler.wallClockMs)
    }

    private func forget(_ seq: Int64) {
        jobs[seq] = nil
        do { _ = try store.delete(namespace: Self.namespace, key: key(seq)) } catch {
            log.error("push queue: cannot remove push \(seq): \(error)")
        }
    }

    /// After this turn's commit, what it stored is ready and goes.
    private func schedulePump() {
        guard !pumpQueued else { return }
        pumpQueued = true
        store.afterCommit { [weak self] err in
            guard let self else { return }
            self.pumpQueued = false
            if let err {
                // The turn that stored them was rolled back: they never were.
                self.log.error("push queue: \(self.fresh.count) push(es) not stored: \(err)")
                for seq in self.fresh { self.jobs[seq] = nil }
                self.fresh = []
                return
            }
            self.ready.append(contentsOf: self.fresh)
            self.fresh = []
            self.pump()
        }
    }

    /// Sends ready pushes, oldest first, up to `maxInFlight` at once.
    func pump() {
        guard !pumping else { return }
        pumping = true
        defer { pumping = false }
        while inflight.count < Self.maxInFlight, readyHead < ready.count {
            let seq = ready[readyHead]
            readyHead += 1
            guard let j = jobs[seq], !inflight.contains(seq), retryTimers[seq] == nil else { continue }
            if isExpired(j, atMs: scheduler.wallClockMs) {
                log.info("push \(seq) to \(j.request.registrationId) expired before it could be sent")
                forget(seq)
                continue
            }
            send(j)
        }
        if readyHead > 4096, readyHead * 2 > ready.count {
            ready.removeFirst(readyHead)
            readyHead = 0
        }
    }

    private func retryLater(_ seq: Int64, afterMs ms: Int64) {
        retryTimers[seq] = scheduler.schedule(afterMs: UInt64(max(0, ms))) { [weak self] in
            guard let self else { return }
            self.retryTimers[seq] = nil
            self.ready.append(seq)
            self.pump()
        }
    }

    private func isExpired(_ j: Job, atMs ms: Int64) -> Bool { ms / 1000 > j.request.expiresAtSec }

    /// A Live Activity shows its latest state only: an older update that
    /// failed is not sent after a newer one.
    private func isSuperseded(_ j: Job) -> Bool {
        j.request.pushType == "liveactivity"
            && jobs.values.contains { $0.seq > j.seq && $0.request.registrationId == j.request.registrationId }
    }

    private func send(_ j: Job) {
        guard let reg = registry.byId[j.request.registrationId], let sender = senders[reg.platform],
              !reg.ended || j.request.payload["aps"]?["event"] == "end" else {
            log.debug("push \(j.seq): registration \(j.request.registrationId) gone, ended or its service not configured: dropped")
            return forget(j.seq)
        }
        inflight.insert(j.seq)
        sender.send(j.request, to: reg, pushId: j.pushId) { [weak self] outcome in
            self?.finished(j.seq, reg, outcome)
        }
    }

    private func finished(_ seq: Int64, _ reg: PushRegistration, _ outcome: PushOutcome) {
        inflight.remove(seq)
        guard var j = jobs[seq] else { return }
        let platform = reg.platform
        switch outcome {
        case .delivered(let id):
            metrics.sent(platform, latencyNs: EventLoop.hrtimeNs &- j.madeAtNs)
            log.debug("push \(seq) (\(j.request.pushType)) to \(reg.id) delivered\(id.map { ", id " + $0 } ?? "")")
            forget(seq)
        case .registrationGone(let why):
            metrics.failed(platform)
            log.info("push registration \(reg.id) of \(reg.deviceId) removed: \(why)")
            forget(seq)
            _ = try? registry.remove(reg.id, nowMs: scheduler.wallClockMs, reason: why)
            dropJobs(for: reg.id)
        case .rejected(let why):
            metrics.failed(platform)
            log.warn("push \(seq) (\(j.request.pushType)) to \(reg.id) refused: \(why); dropped")
            forget(seq)
        case .retry(let why):
            j.attempts += 1
            let d = backoff.delayMs(attempt: min(j.attempts, backoff.maxAttempts ?? 1), seed: UInt64(bitPattern: seq)) ?? backoff.capMs
            if isExpired(j, atMs: scheduler.wallClockMs + Int64(clamping: d)) || isSuperseded(j) {
                metrics.failed(platform)
                log.info("push \(seq) to \(reg.id) not sent (\(why)): expired or superseded by a newer state")
                return forget(seq)
            }
            metrics.retried(platform)
            j.notBeforeMs = scheduler.wallClockMs + Int64(clamping: d)
            log.debug("push \(seq) to \(reg.id): \(why); again in \(d) ms")
            jobs[seq] = j
            do { try put(j) } catch { log.error("push queue: cannot record a retry: \(error)") }
            retryLater(seq, afterMs: Int64(clamping: d))
        }
        pump()
    }

    /// A version 4 UUID, as apns-id wants it: 122 random bits drawn once per
    /// process, the low 64 counted up per push (unique without a draw each).
    static func uuid() -> String {
        uuidCounter &+= 1
        var b = uuidBase
        for i in 0..<8 { b[8 + i] ^= UInt8(truncatingIfNeeded: uuidCounter >> (8 * (7 - i))) }
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        return String(unsafeUninitializedCapacity: 36) { out in
            var n = 0
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 { out[n] = 0x2D; n += 1 }
                out[n] = uuidHex[Int(b[i] >> 4)]
                out[n + 1] = uuidHex[Int(b[i] & 15)]
                n += 2
            }
            return n
        }
    }

    private static let uuidHex: [UInt8] = Array("0123456789ABCDEF".utf8)

    private static let uuidBase: [UInt8] = (try? Secrets.randomBytes(16)) ?? (0..<16).map { _ in UInt8.random(in: 0...255) }
    private nonisolated(unsafe) static var uuidCounter: UInt64 = 0
}
