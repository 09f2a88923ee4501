import BridgeCore

/// Durable engine state (EDGE-CASES 3 and 5, "App Killed During Processing",
/// "Background Task Expiration"): what a restarted process needs to carry on.
/// One JSON document per session (rewritten only when that session changed)
/// plus one small `global` document (settings, app state, metrics, the
/// backend link and decisions made offline, missed-notification memory).
/// Pure: the host decides where the documents live (the store's key-value area).
public struct EngineSnapshot: Sendable {
    public var sessions: [JSON]
    public var global: JSON?
    public init(sessions: [JSON], global: JSON?) {
        self.sessions = sessions
        self.global = global
    }
}

/// What `restore` brought back (reported by `initialize` as `recovered`).
public struct RecoveryReport: Equatable, Sendable {
    public var sessions = 0
    /// Sessions whose task was running when the process stopped ("Claude was
    /// working when the app closed").
    public var processingSessions: [String] = []
    /// Approvals still open (deadline in the future).
    public var pendingApprovals = 0
    /// Approvals whose deadline passed while the process was down: the next
    /// tick resolves them as timed out, with the usual effects.
    public var expiredApprovals = 0
    public var pendingQuestions = 0
    public var queuedDecisions = 0
    /// Documents that could not be read (skipped, logged by the host).
    public var unreadable = 0
    public init() {}
}

private func opt(_ s: String?) -> JSON { s.map { .string($0) } ?? .null }
private func opt(_ v: Millis?) -> JSON { v.map { .int($0) } ?? .null }

/// Every number a snapshot holds is a time (ms since the epoch), a count or a
/// sequence number: never negative, never near the int64 limits. A document
/// from a damaged or foreign database is read within [0, 2^53], so arithmetic
/// on restored values cannot trap at every start (a crash loop).
fileprivate func plausible(_ v: Int64) -> Int64 { min(max(v, 0), 1 << 53) }

extension JSON {
    fileprivate func str(_ k: String) -> String? { self[k]?.stringValue }
    fileprivate func int(_ k: String) -> Int64? { self[k]?.intValue.map(plausible) }
    fileprivate func bool(_ k: String) -> Bool? { self[k]?.boolValue }
    fileprivate func arr(_ k: String) -> [JSON] { self[k]?.arrayValue ?? [] }
}

struct SnapshotError: Error { let what: String }

enum SnapshotCoding {
    static func tool(_ t: ToolUse) -> JSON {
        ["name": .string(t.name), "command": opt(t.command), "filePath": opt(t.filePath), "pattern": opt(t.pattern),
         "url": opt(t.url), "description": opt(t.description)]
    }
    static func tool(_ j: JSON) throws -> ToolUse {
        guard let n = j.str("name") else { throw SnapshotError(what: "tool.name") }
        return ToolUse(name: n, command: j.str("command"), filePath: j.str("filePath"), pattern: j.str("pattern"),
                       url: j.str("url"), description: j.str("description"))
    }

    static func session(_ s: Session) -> JSON {
        var o: [String: JSON] = [
            "v": 1, "id": .string(s.id), "projectName": opt(s.projectName), "projectPath": opt(s.projectPath),
            "operation": opt(s.operation), "startedAt": opt(s.startedAt), "lastActivityAt": .int(s.lastActivityAt),
            "activeDevice": opt(s.activeDevice), "message": opt(s.message), "run": .int(Int64(s.run.rawValue)),
            "nextReminderAt": opt(s.nextReminderAt), "longRunning": .bool(s.longRunning),
        ]
        if let p = s.progress {
            o["progress"] = ["completed": .int(Int64(p.completed)), "total": .int(Int64(p.total)), "current": opt(p.current)]
        }
        if !s.todos.isEmpty {
            o["todos"] = .array(s.todos.map {
                ["content": .string($0.content), "status": .string($0.status.rawValue), "activeForm": opt($0.activeForm), "id": opt($0.id)]
            })
        }
        if let id = s.inputNotification { o["inputNotification"] = .string(id) }
        if let t = s.terminalPrompt {
            o["terminalPrompt"] = ["reason": .string(t.reason.rawValue), "message": opt(t.message)]
        }
        o["approvals"] = .array(s.pendingApprovals.map { a in
            var o: [String: JSON] = ["requestId": .string(a.requestId), "tool": tool(a.tool), "createdAt": .int(a.createdAt),
                                     "expiresAt": .int(a.expiresAt), "notificationId": opt(a.notificationId),
                                     "bannerShown": .bool(a.bannerShown)]
            if !a.permissionSuggestions.isEmpty { o["permissionSuggestions"] = .array(a.permissionSuggestions) }
            return .object(o)
        })
        o["questions"] = .array(s.pendingQuestions.map { q in
            ["questionId": .string(q.questionId), "createdAt": .int(q.createdAt), "notificationId": opt(q.notificationId),
             "bannerShown": .bool(q.bannerShown),
             "questions": .array(q.questions.map { x in
                 ["question": .string(x.question), "header": opt(x.header), "multiSelect": .bool(x.multiSelect),
                  "options": .array(x.options.map { ["label": .string($0.label), "description": opt($0.description)] })]
             })]
        })
        o["history"] = .array(s.history.map {
            ["at": .int($0.at), "kind": .string($0.kind.rawValue), "id": .string($0.id), "toolName": opt($0.toolName),
             "by": opt($0.by)]
        })
        return .object(o)
    }

    static func session(_ j: JSON) throws -> Session {
        guard let id = j.str("id"), let last = j.int("lastActivityAt") else { throw SnapshotError(what: "session id") }
        var s = Session(id: id, now: last)
        s.projectName = j.str("projectName")
        s.projectPath = j.str("projectPath")
        s.operation = j.str("operation")
        s.startedAt = j.int("startedAt")
        s.activeDevice = j.str("activeDevice")
        s.message = j.str("message")
        s.run = Session.Run(rawValue: UInt8(clamping: j.int("run") ?? 0)) ?? .idle
        s.nextReminderAt = j.int("nextReminderAt")
        s.longRunning = j.bool("longRunning") ?? false
        if let p = j["progress"], let c = p.int("completed"), let t = p.int("total") {
            s.progress = TodoProgress(completed: Int(c), total: Int(t), current: p.str("current"))
        }
        s.todos = j.arr("todos").compactMap { t in
            guard let c = t.str("content"), let st = t.str("status").flatMap(Todo.State.init(rawValue:)) else { return nil }
            return Todo(content: c, status: st, activeForm: t.str("activeForm"), id: t.str("id"))
        }
        s.inputNotification = j.str("inputNotification")
        if let t = j["terminalPrompt"], let r = t.str("reason").flatMap(NeedsInput.Reason.init(rawValue:)) {
            s.terminalPrompt = NeedsInput(reason: r, message: t.str("message"))
        }
        for a in j.arr("approvals") {
            guard let rid = a.str("requestId"), let t = a["tool"], let c = a.int("createdAt"), let e = a.int("expiresAt")
            else { throw SnapshotError(what: "approval in session \(id)") }
            var r = ApprovalRequest(requestId: rid, sessionId: id, tool: try tool(t), createdAt: c, expiresAt: e)
            r.notificationId = a.str("notificationId")
            r.bannerShown = a.bool("bannerShown") ?? false
            // Read with the limits of a new request: a damaged document cannot grow them.
            r.permissionSuggestions = ApprovalRequest.keepable(a.arr("permissionSuggestions"))
            s.pendingApprovals.append(r)
        }
        for q in j.arr("questions") {
            guard let qid = q.str("questionId"), let c = q.int("createdAt") else { throw SnapshotError(what: "question in session \(id)") }
            let qs = try q.arr("questions").map { x -> Question in
                guard let text = x.str("question") else { throw SnapshotError(what: "question text") }
                return Question(question: text, header: x.str("header"),
                                options: x.arr("options").compactMap { o in o.str("label").map { .init(label: $0, description: o.str("description")) } },
                                multiSelect: x.bool("multiSelect") ?? false)
            }
            var r = QuestionRequest(questionId: qid, sessionId: id, questions: qs, createdAt: c)
            r.notificationId = q.str("notificationId")
            r.bannerShown = q.bool("bannerShown") ?? false
            s.pendingQuestions.append(r)
        }
        for h in j.arr("history") {
            guard let at = h.int("at"), let k = h.str("kind").flatMap(HistoryEntry.Kind.init(rawValue:)), let hid = h.str("id")
            else { continue }
            s.history.append(HistoryEntry(at: at, kind: k, id: hid, toolName: h.str("toolName"), by: h.str("by")))
        }
        s.recomputeStatus()
        return s
    }
}

extension Engine {
    /// The document of one session (nil: no such session).
    public func snapshot(session id: String) -> JSON? { state.sessions[id].map(SnapshotCoding.session) }

    /// Everything that is not a session.
    public func snapshotGlobal() -> JSON {
        let a = state.app
        var counters: [String: JSON] = [:]
        for m in BackgroundMetric.allCases where state.metrics[m] > 0 { counters[m.rawValue] = .int(Int64(state.metrics[m])) }
        let c = state.connection
        return [
            "v": 1,
            "settings": state.settings.json,
            "app": ["phase": .string(a.phase.rawValue), "lowPowerMode": .bool(a.lowPowerMode),
                    "networkConnected": .bool(a.networkConnected), "networkType": .string(a.networkType.rawValue),
                    "notificationPermission": .string(a.notificationPermission.rawValue),
                    "liveActivitiesPermitted": .bool(a.liveActivitiesPermitted), "device": opt(a.device)],
            "missedWhileAway": .int(Int64(state.missedWhileAway)),
            "missedByCategory": .object(Dictionary(uniqueKeysWithValues: state.missedByCategory.map { ($0.key.rawValue, .int(Int64($0.value))) })),
            "lowPowerNotified": .bool(state.lowPowerNotified),
            "seq": .int(Int64(bitPattern: state.seq)),
            "activity": state.activity.map { ["sessionId": .string($0.sessionId), "startedAt": .int($0.startedAt),
                                              "device": opt($0.device)] } ?? .null,
            "metrics": ["counters": .object(counters), "missedApprovals": .int(Int64(state.metrics.missedApprovals)),
                        "latency": ["count": .int(Int64(state.metrics.latencyCount)), "totalMs": .int(state.metrics.latencyTotalMs),
                                    "maxMs": .int(state.metrics.latencyMaxMs),
                                    "implausible": .int(Int64(state.metrics.implausibleSentAt))]],
            "connection": ["connected": .bool(c.connected), "offlineSince": opt(c.offlineSince),
                           "lostNotified": .bool(c.lostNotified), "attempt": .int(Int64(c.attempt)),
                           "nextRetryAt": opt(c.nextRetryAt),
                           "queuedDecisions": .array(c.queuedDecisions.map {
                               ["requestId": .string($0.requestId), "sessionId": .string($0.sessionId),
                                "decision": .string($0.decision.rawValue), "deviceId": opt($0.deviceId),
                                "source": .string($0.source.rawValue), "queuedAt": .int($0.queuedAt),
                                "alwaysAllow": .bool($0.options.alwaysAllow), "message": opt($0.options.message),
                                "interrupt": .bool($0.options.interrupt)]
                           })],
        ]
    }

    /// Replaces the state with a snapshot taken by an earlier process. Call
    /// `apply(.tick, now:)` afterwards: approvals whose deadline passed while
    /// the process was down then resolve as timed out, with the usual effects.
    /// Unreadable session documents are skipped and counted.
    public mutating func restore(_ snap: EngineSnapshot, now: Millis) -> RecoveryReport {
        var report = RecoveryReport()
        state = EngineState()
        if let g = snap.global {
            restoreGlobal(g)
            if let c = g["connection"], c.bool("connected") == false { restoreConnection(c, now: now) }
        }
        for doc in snap.sessions {
            guard let s = try? SnapshotCoding.session(doc) else { report.unreadable += 1; continue }
            index(s, now: now, into: &report)
        }
        report.processingSessions.sort()
        indexEndedRequests()
        // Queued decisions whose request is gone are settled on the next apply.
        report.queuedDecisions = state.connection.queuedDecisions.count
        if let a = snap.global?["activity"], let sid = a.str("sessionId"), let s = state.sessions[sid] {
            let c = activityContent(for: s, device: a.str("device"), now: now)
            state.activity = LiveActivity(sessionId: sid, startedAt: a.int("startedAt") ?? now, device: c.device, content: c)
        }
        // The badge the device shows is whatever was last sent; resend it.
        state.badge = -1
        if !state.connection.connected { resumeRetries(now: now) }
        return report
    }

    private mutating func restoreGlobal(_ g: JSON) {
        if let s = g["settings"] { state.settings = Settings(json: s); strings = Strings(locale: state.settings.locale) }
        if let a = g["app"] {
            if let v = a.str("phase").flatMap(AppState.Phase.init(rawValue:)) { state.app.phase = v }
            if let v = a.bool("lowPowerMode") { state.app.lowPowerMode = v }
            if let v = a.bool("networkConnected") { state.app.networkConnected = v }
            if let v = a.str("networkType").flatMap(AppState.ConnectionType.init(rawValue:)) { state.app.networkType = v }
            if let v = a.str("notificationPermission").flatMap(AppState.NotificationPermission.init(rawValue:)) {
                state.app.notificationPermission = v
            }
            if let v = a.bool("liveActivitiesPermitted") { state.app.liveActivitiesPermitted = v }
            state.app.device = a.str("device")
        }
        state.missedWhileAway = Int(g.int("missedWhileAway") ?? 0)
        for (k, v) in g["missedByCategory"]?.objectValue ?? [:] {
            if let c = NotificationCategory(rawValue: k), let n = v.intValue, n > 0 { state.missedByCategory[c] = Int(plausible(n)) }
        }
        state.lowPowerNotified = g.bool("lowPowerNotified") ?? false
        state.seq = UInt64(g.int("seq") ?? 0)
        guard let m = g["metrics"] else { return }
        for (k, v) in m["counters"]?.objectValue ?? [:] {
            if let b = BackgroundMetric(rawValue: k), let n = v.intValue { state.metrics.count(b, by: Int(plausible(n))) }
        }
        state.metrics.restoreMissedApprovals(Int(m.int("missedApprovals") ?? 0))
        if let l = m["latency"] {
            state.metrics.restoreLatency(count: Int(l.int("count") ?? 0), totalMs: l.int("totalMs") ?? 0,
                                         maxMs: l.int("maxMs") ?? 0, implausible: Int(l.int("implausible") ?? 0))
        }
    }

    private mutating func restoreConnection(_ c: JSON, now: Millis) {
        state.connection.connected = false
        state.connection.offlineSince = c.int("offlineSince") ?? now
        state.connection.lostNotified = c.bool("lostNotified") ?? false
        state.connection.attempt = Int(c.int("attempt") ?? 0)
        state.connection.nextRetryAt = c.int("nextRetryAt")
        state.connection.queuedDecisions = c.arr("queuedDecisions").compactMap { q in
            guard let rid = q.str("requestId"), let sid = q.str("sessionId"),
                  let d = q.str("decision").flatMap(ApprovalDecision.init(rawValue:)) else { return nil }
            return QueuedDecision(requestId: rid, sessionId: sid, decision: d, deviceId: q.str("deviceId"),
                                  source: q.str("source").flatMap(DecisionSource.init(rawValue:)) ?? .app,
                                  queuedAt: q.int("queuedAt") ?? now,
                                  options: DecisionOptions(alwaysAllow: q.bool("alwaysAllow") ?? false, message: q.str("message"),
                                                           interrupt: q.bool("interrupt") ?? false))
        }
    }

    /// A restored session, its open requests and deadlines.
    private mutating func index(_ s: Session, now: Millis, into report: inout RecoveryReport) {
        state.sessions[s.id] = s
        report.sessions += 1
        if s.run == .running { report.processingSessions.append(s.id) }
        for a in s.pendingApprovals {
            state.approvalIndex[a.requestId] = s.id
            state.pendingApprovalCount += 1
            state.deadlines.push(a.expiresAt, .approvalTimeout(requestId: a.requestId))
            if a.expiresAt <= now { report.expiredApprovals += 1 } else { report.pendingApprovals += 1 }
        }
        for q in s.pendingQuestions { state.questionIndex[q.questionId] = s.id }
        report.pendingQuestions += s.pendingQuestions.count
        if let r = s.nextReminderAt { state.deadlines.push(r, .longTaskReminder(sessionId: s.id)) }
    }

    /// How recent requests ended, so a late answer after the restart still
    /// gets expired/alreadyResolved instead of unknown.
    private mutating func indexEndedRequests() {
        var ended: [(at: Millis, id: String, r: ApprovalResolution, sid: String)] = []
        for s in state.sessions.values {
            for h in s.history {
                let r: ApprovalResolution
                switch h.kind {
                case .approved: r = .allow
                case .denied: r = .deny
                case .timedOut: r = .timedOut
                case .cancelled: r = .cancelled
                case .answered, .questionCancelled: state.answeredQuestions.set(h.id, s.id); continue
                }
                ended.append((h.at, h.id, r, s.id))
            }
        }
        for e in ended.sorted(by: { $0.at < $1.at }) { state.resolvedApprovals.set(e.id, (e.r, e.sid)) }
    }

    /// The retry schedule goes on where it stopped: the next attempt at its
    /// planned time, or at once if that passed while down, so the attempt
    /// limit ("Connection Lost" in the foreground) still counts the attempts
    /// made before the restart.
    private mutating func resumeRetries(now: Millis) {
        if let at = state.connection.nextRetryAt {
            armRetry(at: max(now, at))
        } else {
            scheduleRetry(now: now)
        }
        if let since = state.connection.offlineSince {
            state.deadlines.push(max(now, since + Engine.connectionLostAfterMs), .connectionLost(since: since))
        }
    }
}
