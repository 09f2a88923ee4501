import BridgeCore
import BridgeEngine

/// The pipeline's push step: the engine's effects reach connected clients
/// through the router; for each device that is not connected, or whose app
/// said it is in the background, they become pushes (APNs alerts, clearing
/// background pushes, Live Activity updates, Web Push) in the durable queue.
final class PushService {
    let registry: PushRegistry
    let queue: PushQueue
    let metrics: PushMetrics
    private let router: NotificationRouter
    private let scheduler: TimeoutScheduler
    private let log: Logger
    /// The last app phase each device reported (app.update).
    private var phases: [String: AppState.Phase] = [:]
    /// Live Activity progress at most once per `coalesceMs` per token; the
    /// latest state always goes in the end.
    let coalesceMs: Int64
    private var lastActivityPush: [String: Int64] = [:]
    private var pendingActivity: [String: (PushRequest, TimeoutScheduler.Handle)] = [:]
    /// The Web Push application server key (`push.vapidPublicKey`).
    var vapidPublicKey: String?
    var webPushEnabled = false
    var apnsEnabled = false

    init(registry: PushRegistry, queue: PushQueue, router: NotificationRouter, scheduler: TimeoutScheduler,
         log: Logger, coalesceMs: Int64 = 5_000) {
        self.registry = registry
        self.queue = queue
        self.metrics = queue.metrics
        self.router = router
        self.scheduler = scheduler
        self.log = log
        self.coalesceMs = coalesceMs
    }

    func appPhase(_ phase: AppState.Phase, device: String?) {
        guard let device else { return }
        phases[device] = phase
    }

    /// A device that can be pushed to lost its last connection without
    /// saying it went to the background (the app was killed, the phone
    /// lost its network): for it, and for the engine's notifications (unless
    /// another device is in the foreground), it is in the background now.
    func deviceLeft(_ device: String, host: EngineHost) {
        guard phases[device] != .background, !registry.forDevice(device).isEmpty,
              !router.all.contains(where: { $0.deviceID == device && $0.io.isOpen }) else { return }
        phases[device] = .background
        let foreground = router.all.contains { c in c.io.isOpen && c.deviceID.map { phases[$0] == .foreground } == true }
        guard !foreground, host.engine.app.phase != .background else { return }
        log.debug("push: \(device) left without going to the background; the app counts as in the background")
        var u = AppUpdate()
        u.phase = .background
        u.deviceId = device
        host.apply(.app(u))
    }

    /// Not connected, or its app said it is in the background: only a push reaches it.
    func isAway(_ device: String) -> Bool {
        if let p = phases[device], p == .background { return true }
        return !router.all.contains { $0.deviceID == device && $0.receivesNotifications && $0.io.isOpen }
    }

    /// The pushes of one apply's effects. `payload` is what the clients get
    /// for the same effect (Web Push carries it as it is).
    func route(_ effects: [Effect], payload: (Effect) -> JSON) {
        let regs = registry.all.filter { !$0.ended && isAway($0.deviceId) }
        guard !regs.isEmpty else { return }
        let now = scheduler.wallClockMs
        for e in effects {
            switch e {
            case .postNotification(let n):
                for r in regs where r.kind == .alert {
                    enqueue(r.platform == .apns ? PushPayloads.apnsAlert(n, to: r, nowMs: now)
                            : PushPayloads.webPush(method: e.method, params: payload(e), urgent: n.interruptionLevel == .timeSensitive,
                                                   collapse: n.id, to: r, nowMs: now))
                }
            case .clearNotifications(let ids):
                for r in regs where r.kind == .alert {
                    if r.platform == .webpush {
                        enqueue(PushPayloads.webPush(method: e.method, params: payload(e), urgent: false, collapse: nil, to: r, nowMs: now))
                        continue
                    }
                    for part in stride(from: 0, to: ids.count, by: PushPayloads.clearBatch) {
                        enqueue(PushPayloads.apnsClear(ids: Array(ids[part..<min(ids.count, part + PushPayloads.clearBatch)]), to: r, nowMs: now))
                    }
                }
            case .startActivity(let c): activity(c, .start, regs, now)
            case .updateActivity(let c): activity(c, .update, regs, now)
            case .endActivity(let c): activity(c, .end, regs, now)
            default: break
            }
        }
    }

    /// A Live Activity's token gets its pushes; a device without one for the
    /// session but with a push-to-start token gets the start.
    private func activity(_ c: ActivityContent, _ event: PushPayloads.ActivityEvent, _ regs: [PushRegistration], _ now: Int64) {
        // Looked up again: an end earlier in the same apply ended a token.
        let tokens = regs.filter {
            $0.platform == .apns && $0.kind == .liveActivity && $0.activityId == c.sessionId && registry.byId[$0.id]?.ended == false
        }
        for r in tokens {
            // An update token's activity exists already: a session starting again is an update.
            let req = PushPayloads.liveActivity(c, event: event == .start ? .update : event, to: r, nowMs: now)
            if event == .update && req.priority < 10 { coalesce(req, now) } else { sendNow(req, now) }
            if event == .end { markEnded(r) }
        }
        guard event == .start else { return }
        let covered = Set(tokens.map(\.deviceId))
        for r in regs where r.platform == .apns && r.kind == .pushToStart && !covered.contains(r.deviceId) {
            enqueue(PushPayloads.liveActivity(c, event: .start, to: r, nowMs: now))
        }
    }

    private func sendNow(_ req: PushRequest, _ now: Int64) {
        if let p = pendingActivity.removeValue(forKey: req.registrationId) { _ = scheduler.cancel(p.1) }
        lastActivityPush[req.registrationId] = now
        // Only the latest state matters: what is still queued for the token goes.
        queue.dropJobs(for: req.registrationId)
        enqueue(req)
    }

    private func coalesce(_ req: PushRequest, _ now: Int64) {
        let id = req.registrationId
        guard let last = lastActivityPush[id], now &- last < coalesceMs || pendingActivity[id] != nil else {
            return sendNow(req, now)
        }
        if let p = pendingActivity[id] {
            pendingActivity[id] = (req, p.1)
            return
        }
        let due = last &+ coalesceMs &- now
        let h = scheduler.schedule(afterMs: UInt64(max(0, due))) { [weak self] in
            guard let self, let p = self.pendingActivity.removeValue(forKey: id) else { return }
            self.sendNow(p.0, self.scheduler.wallClockMs)
        }
        pendingActivity[id] = (req, h)
    }

    private func markEnded(_ r: PushRegistration) {
        do { try registry.markEnded(r.id, nowMs: scheduler.wallClockMs) } catch {
            log.error("push: cannot record the end of Live Activity token \(r.id): \(error)")
        }
        lastActivityPush[r.id] = nil
    }

    private func enqueue(_ r: PushRequest) {
        do { try queue.enqueue(r) } catch { log.error("push to \(r.registrationId) not queued: \(error)") }
    }

    /// Tells a device that just initialized which of its registrations a
    /// push service refused since it last connected.
    func deviceConnected(_ c: Connection) {
        guard let d = c.deviceID else { return }
        for note in registry.takeRemovedNotes(d) { router.send("push.unregistered", note, to: .connection(c.id)) }
    }
}
