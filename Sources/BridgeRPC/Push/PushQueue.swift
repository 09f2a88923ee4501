import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// What a push service answered, as the queue acts on it.
enum PushOutcome: Equatable {
    /// 2xx: done; APNs' apns-id or the Web Push message URL.
    case delivered(id: String?)
    /// 429, 5xx, the connection lost: again after the backoff.
    case retry(String)
    /// The token or subscription is dead (410, BadDeviceToken, 404): the
    /// registration goes and the device is told when it next connects.
    case registrationGone(String)
    /// Refused for good (a payload the service rejects): dropped and logged.
    case rejected(String)
}

/// A push service client (APNs, Web Push), on the loop thread.
protocol PushSender: AnyObject {
    func send(_ r: PushRequest, to reg: PushRegistration, pushId: String, completion: @escaping (PushOutcome) -> Void)
}

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
        /// Loop time (ms) the push was made, for the latency figures; not stored.
        var madeAtNs: UInt64 = 0

        var stored: JSON {
            ["request": request.json, "pushId": .string(pushId), "attempts": .int(Int64(attempts)), "notBeforeMs": .int(notBeforeMs)]
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
    private var nextSeq: Int64 = 1
    private var pumpQueued = false
    private var wakeup: TimeoutScheduler.Handle?
    let backoff = Backoff.delivery
    let maxAttempts = 12

    init(store: Store, scheduler: TimeoutScheduler, registry: PushRegistry, metrics: PushMetrics, log: Logger) throws {
        self.store = store
        self.scheduler = scheduler
        self.registry = registry
        self.metrics = metrics
        self.log = log
        for (key, v) in try store.entries(namespace: Self.namespace) {
            guard let seq = Int64(key), case .json(let j) = v, let r = j["request"].flatMap(PushRequest.init(json:)),
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
        schedulePump()
    }

    /// The jobs for `registrationId` go with it (a dead token takes nothing more).
    func dropJobs(for registrationId: String) {
        for (seq, j) in jobs where j.request.registrationId == registrationId && !inflight.contains(seq) { forget(seq) }
    }

    func start() { schedulePump() }

    private func key(_ seq: Int64) -> String {
        let s = String(seq)
        return String(repeating: "0", count: max(0, 19 - s.count)) + s
    }

    private func put(_ j: Job) throws {
        try store.put(.json(j.stored), namespace: Self.namespace, key: key(j.seq), nowMs: scheduler.wallClockMs)
    }

    private func forget(_ seq: Int64) {
        jobs[seq] = nil
        do { _ = try store.delete(namespace: Self.namespace, key: key(seq)) } catch {
            log.error("push queue: cannot remove push \(seq): \(error)")
        }
    }

    private func schedulePump() {
        guard !pumpQueued else { return }
        pumpQueued = true
        store.afterCommit { [weak self] err in
            guard let self else { return }
            self.pumpQueued = false
            if let err { self.log.error("push queue: commit failed, pushes wait for the next one: \(err)"); return }
            self.pump()
        }
    }

    /// Sends every committed push that is due and not in flight; one wakeup
    /// for the earliest retry.
    func pump() {
        let now = scheduler.wallClockMs
        var next: Int64?
        for seq in jobs.keys.sorted() where !inflight.contains(seq) {
            guard let j = jobs[seq] else { continue }
            if j.notBeforeMs > now { next = min(next ?? j.notBeforeMs, j.notBeforeMs); continue }
            send(j)
        }
        if let w = wakeup { _ = scheduler.cancel(w); wakeup = nil }
        if let next {
            wakeup = scheduler.schedule(afterMs: UInt64(max(0, next - now))) { [weak self] in
                self?.wakeup = nil
                self?.pump()
            }
        }
    }

    private func send(_ j: Job) {
        guard let reg = registry.byId[j.request.registrationId], let sender = senders[reg.platform] else {
            log.debug("push \(j.seq): registration \(j.request.registrationId) gone or its service not configured: dropped")
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
            guard j.attempts < maxAttempts, let d = backoff.delayMs(attempt: j.attempts, seed: UInt64(bitPattern: seq)) else {
                metrics.failed(platform)
                log.warn("push \(seq) to \(reg.id) failed \(j.attempts) times (\(why)); given up")
                return forget(seq)
            }
            metrics.retried(platform)
            j.notBeforeMs = scheduler.wallClockMs + Int64(clamping: d)
            log.debug("push \(seq) to \(reg.id): \(why); again in \(d) ms")
            jobs[seq] = j
            do { try put(j) } catch { log.error("push queue: cannot record a retry: \(error)") }
        }
        schedulePump()
    }

    /// A random (version 4) UUID, as apns-id wants it.
    static func uuid() -> String {
        var b = (try? Secrets.randomBytes(16)) ?? (0..<16).map { _ in UInt8.random(in: 0...255) }
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        let hex = b.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
        let c = Array(hex)
        return [String(c[0..<8]), String(c[8..<12]), String(c[12..<16]), String(c[16..<20]), String(c[20..<32])]
            .joined(separator: "-").uppercased()
    }
}
