import BridgeCore
import BridgeEngine
#if canImport(Glibc)
import Glibc
#endif

extension ServerEnvironment {
    /// Startup, in this order, before any client is served (EDGE-CASES
    /// "App Killed During Processing"):
    /// 1. open the store (it holds the state directory's lock); paired
    ///    devices and the audit log come from it; the http hooks' token is
    ///    read or created beside it;
    /// 2. the outbox: deliveries in flight before the restart are queued
    ///    again (their link is gone), old history is pruned;
    /// 3. the engine comes back from its snapshot;
    /// 4. from here on the pipeline records snapshots, queued decisions and
    ///    waiting hooks;
    /// 5. deadlines that passed while down fire now (what they send is held
    ///    for the first client), and the approvals of the previous run's
    ///    hooks are cancelled (nobody waits for them any more);
    /// 6. sessions finished and untouched for a week are forgotten (then hourly);
    /// 7. what came back is kept for `initialize`'s `recovered`, and all of
    ///    it is committed.
    public func start() throws {
        let dir = stateDirectory()
        let store = try openStore(dir)
        // Beside the store, whose open made the directory private.
        hookToken = try dir.map { try HookToken.loadOrCreate(directory: $0) } ?? HookToken.random()
        let wallClock = { [unowned scheduler] in scheduler.wallClockMs }
        devices = try DeviceRegistry(store: store, now: wallClock)
        audit = AuditLog(store: options.ephemeral ? nil : store, log: log, now: wallClock)
        let outboxReport = try startOutbox(store)
        try startPush(store, directory: dir)
        var (report, restored) = try restoreEngine(store)
        if !options.ephemeral {
            let writer = SnapshotWriter(store: store, host: engine, log: log)
            snapshots = writer
            store.beforeCommit = { [weak writer] in writer?.write() }
            waiters.store = store
        }
        decisions = try OfflineDecisions(store: store, host: engine, log: log)
        if restored {
            engine.apply(.tick)
            waiters.cancelRestored(host: engine)
            report.queuedDecisions = engine.engine.state.connection.queuedDecisions.count
            report.pendingApprovals = engine.engine.pendingApprovals.count
        }
        report.sessions -= sweepSessions()
        var r = outboxReport
        r["restored"] = .bool(restored)
        r["sessions"] = .int(Int64(report.sessions))
        r["processingSessions"] = .array(report.processingSessions.map { .string($0) })
        r["pendingApprovals"] = .int(Int64(report.pendingApprovals))
        r["expiredApprovals"] = .int(Int64(report.expiredApprovals))
        r["pendingQuestions"] = .int(Int64(report.pendingQuestions))
        r["queuedDecisions"] = .int(Int64(report.queuedDecisions))
        r["unreadable"] = .int(Int64(report.unreadable))
        recovered = .object(r)
        // The first client starts on a committed state: nothing of startup
        // holds its replies back.
        if let err = store.endTurn() { throw err }
    }

    /// Opens the durable store from the options. A StoreError here fails
    /// server start with its message ("cannot serve: state directory ... is
    /// in use ... (pid N)").
    private func openStore(_ dir: String?) throws -> Store {
        let s = try Store(directory: dir)
        try s.attach(to: loop)
        attach(s)
        log.info("durable state: \(dir.map { $0 + "/codingbridge.db" } ?? "in memory (--ephemeral)")")
        return s
    }

    /// The state directory from the options; nil with --ephemeral.
    private func stateDirectory() -> String? {
        if options.ephemeral { return nil }
        if let d = options.stateDirectory { return d }
        var envVars: [String: String] = [:]
        for name in ["XDG_STATE_HOME", "HOME"] { if let v = getenv(name) { envVars[name] = String(cString: v) } }
        return Store.defaultDirectory(environment: envVars)
    }

    /// The outbox after a restart; its part of the `recovered` report.
    private func startOutbox(_ store: Store) throws -> [String: JSON] {
        let delivery = OutboxDelivery(store: store, scheduler: scheduler, router: router, log: log)
        outbox = delivery
        inbox = AgentInbox(store: store, delivery: delivery, loop: loop, log: log, resumeCommand: options.resumeCommand,
                           durable: !options.ephemeral)
        let requeued = try store.requeueInflight(nowMs: delivery.nowMs)
        try store.commit()
        delivery.prune()
        return ["queuedMessages": .int(Int64(try store.count())), "requeuedDeliveries": .int(Int64(requeued)),
                "drafts": .int(Int64(try store.draftCount()))]
    }

    /// The engine's documents, restored; whether there were any.
    private func restoreEngine(_ store: Store) throws -> (RecoveryReport, Bool) {
        let entries = try store.entries(namespace: SnapshotWriter.namespace)
        guard !entries.isEmpty else { return (RecoveryReport(), false) }
        var sessions: [JSON] = []
        var global: JSON?
        var unreadable = 0
        for (key, value) in entries {
            guard case .json(let doc) = value else { unreadable += 1; continue }
            if key == SnapshotWriter.globalKey { global = doc } else if key.hasPrefix(SnapshotWriter.sessionPrefix) { sessions.append(doc) }
        }
        let now = engine.now
        var report = engine.withEngine { $0.restore(EngineSnapshot(sessions: sessions, global: global), now: now) }
        report.unreadable += unreadable
        let rules = engine.engine.settings.customRedactionRules
        if !rules.isEmpty {
            do { try engine.validateRules(rules); engine.installCompiledRules() } catch {
                log.error("recovered custom redaction rules do not compile, using the built-in catalog: \(error)")
            }
        }
        // Recovery attempted / succeeded feed metrics.get's recoveryRate.
        engine.recordAppMetric(.backgroundRecoveryAttempted, count: 1)
        if report.unreadable == 0 { engine.recordAppMetric(.backgroundRecoverySucceeded, count: 1) }
        if report.unreadable > 0 { log.warn("recovery: \(report.unreadable) unreadable engine document(s) skipped") }
        log.info("recovered \(report.sessions) session(s), \(report.pendingApprovals) pending and \(report.expiredApprovals) expired approval(s)")
        return (report, true)
    }

    /// Forgets sessions finished and untouched for 7 days, now and then
    /// hourly; how many went now.
    @discardableResult
    func sweepSessions() -> Int {
        let host = engine
        let gone = host.withEngine { $0.evictSessions(lastActivityBefore: host.now - Engine.sessionRetentionMs) }
        if !gone.isEmpty {
            log.info("forgot \(gone.count) session(s) finished and untouched for 7 days")
            snapshots?.forget(gone)
        }
        scheduler.schedule(afterMs: 3_600_000) { [weak self] in self?.sweepSessions() }
        return gone.count
    }
}
