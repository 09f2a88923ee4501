/// The engine: (state, event, now) -> (state, effects). A value type with one
/// mutating entry point, `apply`; no clock, file, socket or lock. The host (the
/// RPC server, a test, the demo) feeds events with the time they happened and
/// performs the returned effects.
public struct Engine {
    public internal(set) var state = EngineState()
    public let services: EngineServices
    var strings: Strings

    public init(services: EngineServices, settings: Settings = Settings()) {
        self.services = services
        state.settings = settings
        strings = Strings(locale: settings.locale)
    }

    /// The engine's answer to one event.
    public struct Transition: Equatable {
        public var effects: [Effect] = []
        public var reply: Reply = .none
    }

    public enum Reply: Equatable {
        case none
        case approval(ApprovalRespondResult)
        case question(QuestionAnswerResult)
    }

    /// Applies one event at `now`. Deadlines due at or before `now` fire
    /// first, so an answer arriving at 60.0 s finds its approval already
    /// timed out even if the host's timer has not run yet.
    public mutating func apply(_ event: EngineEvent, now: Millis) -> Transition {
        var t = Transition()
        fireDueDeadlines(now: now, into: &t.effects)
        switch event {
        case .agent(let e): handleAgent(e, now: now, into: &t.effects)
        case .app(let u): handleApp(u, now: now, into: &t.effects)
        case .settings(let s): handleSettings(s, now: now, into: &t.effects)
        case let .approvalResponse(rid, decision, device, source, options):
            t.reply = .approval(respond(requestId: rid, decision: decision, deviceId: device, source: source,
                                        options: options, now: now, into: &t.effects))
        case let .questionAnswer(qid, answers, device):
            t.reply = .question(answer(questionId: qid, answers: answers, deviceId: device, now: now, into: &t.effects))
        case .tick: break
        case .connection(let c): handleConnection(c, now: now, into: &t.effects)
        case let .approvalQueued(rid, decision, device, source, options):
            t.reply = .approval(queueDecision(requestId: rid, decision: decision, deviceId: device, source: source,
                                              options: options, now: now, into: &t.effects))
        case let .userMessage(sid, device):
            if deviceInteracted(sid, device: device, now: now, into: &t.effects) {
                t.effects.append(.sessionChanged(sessionId: sid))
            }
        }
        if !state.lastDroppedDecisions.isEmpty { state.lastDroppedDecisions = [] }
        settleQueuedDecisions(now: now, into: &t.effects)
        syncBadge(into: &t.effects)
        let gate = self.gate
        for i in t.effects.indices { t.effects[i] = gate.pass(t.effects[i]) }
        return t
    }

    /// Something only the app can observe (a notification tapped, a Live
    /// Activity that failed to start, a recovery attempt): an Analytics
    /// counter. No effects, so not an event of `apply`.
    public mutating func recordAppMetric(_ m: BackgroundMetric, count: Int = 1) {
        state.metrics.count(m, by: max(0, count))
    }

    /// When the host must call `apply(.tick, now:)` next (nil: nothing pending).
    /// May be earlier than needed (a stale entry); a tick then does nothing.
    public var nextDeadline: Millis? { state.deadlines.top?.at }

    // MARK: - Queries

    public var settings: Settings { state.settings }
    public var app: AppState { state.app }
    public var metrics: Metrics { state.metrics }
    public func session(_ id: String) -> Session? { state.sessions[id] }

    /// The session an approval id belongs to, open or recently ended: an
    /// agent reusing it for another session gets an error from the host
    /// instead of a silently dropped request (a missed approval).
    public func owner(ofApproval id: String) -> String? {
        state.approvalIndex[id] ?? state.resolvedApprovals[id]?.sessionId
    }

    /// The same for a question id.
    public func owner(ofQuestion id: String) -> String? { state.questionIndex[id] ?? state.answeredQuestions[id] }

    /// Sessions, most recently active first.
    public var sessions: [Session] {
        state.sessions.values.sorted { $0.lastActivityAt != $1.lastActivityAt ? $0.lastActivityAt > $1.lastActivityAt : $0.id < $1.id }
    }

    /// Pending approvals over all sessions, oldest first.
    public var pendingApprovals: [ApprovalRequest] {
        state.sessions.values.flatMap(\.pendingApprovals).sorted { $0.createdAt != $1.createdAt ? $0.createdAt < $1.createdAt : $0.requestId < $1.requestId }
    }

    /// Sessions untouched this long, and done with, are forgotten.
    public static let sessionRetentionMs: Millis = 7 * 24 * 3_600_000

    /// Forgets sessions that are done with (not working, nothing pending, not
    /// on the Live Activity) and untouched since `cutoff`, so a daemon that
    /// sees thousands of sessions over months does not keep them all. Returns
    /// their ids, sorted (the host deletes their durable documents).
    public mutating func evictSessions(lastActivityBefore cutoff: Millis) -> [String] {
        let holder = state.activity?.sessionId
        let gone = state.sessions.values.filter { !$0.isActive && $0.lastActivityAt < cutoff && $0.id != holder }
            .map(\.id).sorted()
        for id in gone { state.sessions[id] = nil }
        return gone
    }

    // MARK: - Helpers shared by the rule files

    mutating func withSession<R>(_ id: String, now: Millis, _ body: (inout Session) -> R) -> R {
        // `[key, default:]` modifies in place; `sessions[id] == nil` would copy
        // the whole Session out just to compare (hot path: every agent event).
        return body(&state.sessions[id, default: Session(id: id, now: now)])
    }

    mutating func nextId(_ prefix: String, _ sessionId: String) -> String {
        state.seq &+= 1
        return "\(prefix):\(sessionId):\(state.seq)"
    }

    /// Badge = pending approvals (EDGE-CASES "Multiple Approval Requests").
    mutating func syncBadge(into effects: inout [Effect]) {
        let n = state.pendingApprovalCount
        if n != state.badge {
            state.badge = n
            effects.append(.updateBadge(count: n))
        }
    }

    /// What every effect passes before it leaves (LockScreenGate.swift).
    var gate: LockScreenGate { LockScreenGate(showDetails: state.settings.showNotificationDetails, redact: services.redact) }

    func elapsedText(_ seconds: Int) -> String { services.formatElapsed(seconds) }

    /// Name shown for a session: project name, else the path's last component, else the id.
    func displayName(_ s: Session) -> String {
        if let n = s.projectName, !n.isEmpty { return n }
        if let p = s.projectPath, let last = p.split(separator: "/").last { return String(last) }
        return s.id
    }
}

/// Everything the engine knows. Public for inspection (tests, queries).
public struct EngineState {
    public internal(set) var settings = Settings()
    public internal(set) var app = AppState()
    public internal(set) var sessions: [String: Session] = [:]
    /// The one Live Activity (EDGE-CASES "Single Active Session Priority").
    public internal(set) var activity: LiveActivity?
    public internal(set) var metrics = Metrics()
    /// Last badge count sent.
    public internal(set) var badge = 0
    /// Notifications that could not be shown while away (permission denied /
    /// background notifications off): a banner tells the person on return.
    public internal(set) var missedWhileAway = 0
    /// The same, by kind, so the banner says what was missed.
    public internal(set) var missedByCategory: [NotificationCategory: Int] = [:]
    var lowPowerNotified = false
    /// The backend link, retries and decisions made offline (Connectivity.swift).
    public internal(set) var connection = ConnectivityState()
    var lastDroppedDecisions: [String] = []
    var seq: UInt64 = 0
    var deadlines = DeadlineHeap()
    var pendingApprovalCount = 0
    /// requestId/questionId -> sessionId for open requests.
    var approvalIndex: [String: String] = [:]
    var questionIndex: [String: String] = [:]
    /// How recent requests ended, so a late answer gets alreadyResolved vs expired.
    var resolvedApprovals = RecentMap<(resolution: ApprovalResolution, sessionId: String)>(capacity: 4096)
    /// Ended questions and their session (answered or dropped alike).
    var answeredQuestions = RecentMap<String>(capacity: 4096)
}

/// A bounded map that forgets its oldest keys: a late answer for a request
/// resolved thousands of requests ago is "unknown", which is still truthful.
struct RecentMap<V> {
    private var values: [String: V] = [:]
    private var order: [String] = []
    private var head = 0
    let capacity: Int
    init(capacity: Int) { self.capacity = capacity }

    subscript(key: String) -> V? { values[key] }

    mutating func set(_ key: String, _ value: V) {
        if values.updateValue(value, forKey: key) != nil { return }
        order.append(key)
        if order.count - head > capacity {
            values[order[head]] = nil
            head += 1
            if head > capacity { order.removeFirst(head); head = 0 }
        }
    }
}
