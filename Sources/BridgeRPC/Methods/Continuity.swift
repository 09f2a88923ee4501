import BridgeCore
import BridgeEngine

// Continuity (issue 7): the engine's state survives a restart, decisions made
// while the backend link is down are kept durably and sent in order on
// reconnect, and the retry policy runs on `connection.update`.
//
// Durable layout (the store's key-value area, namespace "engine"):
//   session:<id>  one document per session, rewritten only when it changed
//   global        settings, app state, metrics, link state, queued decisions
// Writes join the loop turn's transaction (one commit per turn for a burst),
// so a reply sent after the commit never claims state that could be lost.

/// Methods whose (sync) replies wait for the turn's commit: they change
/// engine state that the snapshot records.
let continuityDurableMethods: Set<String> = ["agent.event", "question.answer", "app.update", "settings.update",
                                             "agent.hook", "agent.streamJson", "agent.claudecodeui"]

extension MethodTable {
    /// Before any method is registered: replies of the engine's state-changing
    /// methods go out only after the snapshot they caused is committed.
    func prepareContinuity(_ env: ServerEnvironment) throws {
        // In memory (--ephemeral, the demo, in-process clients) nothing
        // survives a kill anyway: answer at once.
        guard !env.options.ephemeral else { return }
        let store = try env.openStore()
        // Two turn ends: the snapshot of this turn is written right after
        // its commit (coalesced per session) and committed by the next one.
        syncReplyDeferral = (continuityDurableMethods, { body in
            store.afterFollowingCommit { _ in body() }
        })
    }

    func registerContinuity(_ env: ServerEnvironment) throws {
        // The closures below are kept by the host and the environment, which
        // own the host and the store: unowned, so an in-process server is freed.
        unowned let store = try env.openStore()
        unowned let host = env.engine
        let ephemeral = env.options.ephemeral
        let ns = "engine"
        let sessionPrefix = "session:"

        // MARK: recovery

        var report = RecoveryReport()
        var restored = false
        let entries = try store.entries(namespace: ns)
        if !entries.isEmpty {
            var sessions: [JSON] = []
            var global: JSON?
            for (key, value) in entries {
                guard case .json(let doc) = value else { report.unreadable += 1; continue }
                if key == "global" { global = doc } else if key.hasPrefix(sessionPrefix) { sessions.append(doc) }
            }
            let now = host.now
            let skipped = report.unreadable
            report = host.withEngine { e -> RecoveryReport in e.restore(EngineSnapshot(sessions: sessions, global: global), now: now) }
            report.unreadable += skipped
            restored = true
            let rules = host.engine.settings.customRedactionRules
            if !rules.isEmpty {
                do { try host.validateRules(rules); host.installCompiledRules() } catch {
                    Log.error("recovered custom redaction rules do not compile, using the built-in catalog: \(error)")
                }
            }
            // Recovery attempted / succeeded feed metrics.get's recoveryRate.
            host.recordAppMetric(.backgroundRecoveryAttempted, count: 1)
            if report.unreadable == 0 { host.recordAppMetric(.backgroundRecoverySucceeded, count: 1) }
            if report.unreadable > 0 { Log.warn("recovery: \(report.unreadable) unreadable engine document(s) skipped") }
            Log.info("recovered \(report.sessions) session(s), \(report.pendingApprovals) pending and \(report.expiredApprovals) expired approval(s)")
        }

        // MARK: snapshot after every event (only what changed)

        /// requestId -> outbox id of a decision made offline.
        var queuedRows: [String: Int64] = [:]
        for m in (try? store.messages(statuses: OutboxStatus.pending, limit: 1000)) ?? [] where m.kind == "approval.respond" {
            if let rid = m.payload["requestId"]?.stringValue { queuedRows[rid] = m.id }
        }

        // Dirty sessions are collected per loop turn and written once, right
        // after the turn's commit (a burst of 1000 tool uses of one session is
        // one document write); the next turn end commits them. Replies that
        // report engine state wait for that second commit (afterDurable).
        var dirty = Set<String>()
        var globalDirty = false
        var flushQueued = false

        func flushSnapshot() {
            flushQueued = false
            let now = host.now
            do {
                for sid in dirty {
                    if let doc = host.engine.snapshot(session: sid) {
                        try store.put(.json(doc), namespace: ns, key: sessionPrefix + sid, nowMs: now)
                    }
                }
                if globalDirty { try store.put(.json(host.engine.snapshotGlobal()), namespace: ns, key: "global", nowMs: now) }
            } catch {
                Log.error("engine snapshot not written: \(error)")
            }
            dirty.removeAll(keepingCapacity: true)
            globalDirty = false
        }

        func persist(_ event: EngineEvent, _ t: Engine.Transition) {
            switch event {
            case .agent(let e): dirty.insert(e.sessionId)
            default: break
            }
            if case .approval(let r) = t.reply, let sid = r.sessionId { dirty.insert(sid) }
            if case .question(let r) = t.reply, let sid = r.sessionId { dirty.insert(sid) }
            for e in t.effects {
                switch e {
                case .approvalResolved(_, let sid, _, _), .questionAnswered(_, let sid, _, _), .sessionChanged(let sid):
                    dirty.insert(sid)
                case .postNotification(let n): dirty.insert(n.threadId)
                case .showBanner(let b): if let sid = b.sessionId { dirty.insert(sid) }
                case .startActivity(let c), .updateActivity(let c), .endActivity(let c): dirty.insert(c.sessionId)
                default: break
                }
            }
            if !t.effects.isEmpty { globalDirty = true }
            switch event {
            case .app, .settings, .connection, .approvalQueued: globalDirty = true
            default: break
            }
            if !flushQueued && (globalDirty || !dirty.isEmpty) {
                flushQueued = true
                store.afterCommit { _ in flushSnapshot() }
            }
        }

        /// Decisions whose request ended while offline: their outbox rows fail, nothing is sent.
        func settleOutbox(_ event: EngineEvent, _ t: Engine.Transition) {
            for rid in host.engine.droppedDecisions {
                guard let id = queuedRows.removeValue(forKey: rid) else { continue }
                do { try store.fail(id: id, error: "request expired before the connection came back", retryAtMs: nil, nowMs: host.now) } catch {
                    Log.error("offline decision \(rid) not marked failed: \(error)")
                }
            }
            if case .connection(.connected) = event { queuedRows.removeAll() }
        }
        // In memory (--ephemeral) a snapshot could never be read back: skip its cost.
        if !ephemeral {
            host.afterApply.append(persist)
            env.onExit.append { flushSnapshot(); store.flush() }
        }
        host.afterApply.append(settleOutbox)

        /// Runs `body` once this turn's writes are durable (now, if there are none).
        func afterDurable(_ body: @escaping (StoreError?) -> Void) {
            if ephemeral { return body(nil) }
            store.afterFollowingCommit(body)
        }

        // MARK: decisions (offline: queued)

        host.approvalResponder = { rid, decision, device, source, reply in
            guard !host.engine.connectivity.connected else {
                let t = host.apply(.approvalResponse(requestId: rid, decision: decision, deviceId: device, source: source))
                guard case .approval(let r) = t.reply else { throw RPCError.internalError("engine gave no approval reply") }
                afterDurable { _ in reply(.success(EngineCoding.approvalRespond(r))) }
                return true
            }
            let t = host.apply(.approvalQueued(requestId: rid, decision: decision, deviceId: device, source: source))
            guard case .approval(let r) = t.reply else { throw RPCError.internalError("engine gave no approval reply") }
            if r.status == .queued, let sid = r.sessionId {
                let expires = host.engine.pendingApprovals.first { $0.requestId == rid }?.expiresAt
                do {
                    let row = try store.enqueue(sessionId: sid, kind: "approval.respond",
                                                payload: ["requestId": .string(rid), "decision": .string(decision.rawValue),
                                                          "deviceId": device.json, "source": .string(source.rawValue)],
                                                idempotencyKey: "approval:\(rid)", maxAttempts: Backoff.delivery.maxAttempts ?? 12,
                                                nowMs: host.now, expiresMs: expires)
                    queuedRows[rid] = row.id
                } catch { throw StoreRPCError.from(error) }
            }
            // "queued" means on disk (outbox row and engine snapshot): answer after both commits.
            afterDurable { err in
                if let err { return reply(.failure(StoreRPCError.from(err))) }
                reply(.success(EngineCoding.approvalRespond(r)))
            }
            return true
        }

        // MARK: retry policy

        env.onConnectionUpdate.append { state in
            host.apply(.connection(ConnectionChange(rawValue: state) ?? .disconnected))
        }

        // Deadlines that passed while the process was down fire now; their
        // effects wait for the first client to initialize (RPCServer.held),
        // and the report below counts what is left.
        if restored {
            host.apply(.tick)
            for h in env.afterRecovery { h() }
            report.queuedDecisions = host.engine.state.connection.queuedDecisions.count
            report.pendingApprovals = host.engine.pendingApprovals.count
        }

        // MARK: forgetting finished sessions (hourly, and now for a restart)

        // The scheduler keeps the closure below until it runs: unowned, or the
        // environment that owns the scheduler could never be freed.
        unowned let scheduler = env.scheduler
        @discardableResult
        func sweepSessions() -> Int {
            let gone = host.withEngine { $0.evictSessions(lastActivityBefore: host.now - Engine.sessionRetentionMs) }
            if !gone.isEmpty {
                Log.info("forgot \(gone.count) session(s) finished and untouched for 7 days")
                if !ephemeral {
                    do { for sid in gone { try store.delete(namespace: ns, key: sessionPrefix + sid) } } catch {
                        Log.error("finished sessions not deleted from the store: \(error)")
                    }
                }
            }
            scheduler.schedule(afterMs: 3_600_000) { sweepSessions() }
            return gone.count
        }
        // A restart after a long pause forgets at once; `recovered` counts what is kept.
        report.sessions -= sweepSessions()

        let previous = env.recovered
        env.recovered = {
            var r = previous().objectValue ?? [:]
            r["restored"] = .bool(restored)
            r["sessions"] = .int(Int64(report.sessions))
            r["processingSessions"] = .array(report.processingSessions.map { .string($0) })
            r["pendingApprovals"] = .int(Int64(report.pendingApprovals))
            r["expiredApprovals"] = .int(Int64(report.expiredApprovals))
            r["pendingQuestions"] = .int(Int64(report.pendingQuestions))
            r["queuedDecisions"] = .int(Int64(report.queuedDecisions))
            r["unreadable"] = .int(Int64(report.unreadable))
            return .object(r)
        }
    }
}
