import BridgeCore

/// Connectivity to the backend (EDGE-CASES "Network Connectivity Loss",
/// PRD Epic 5): silent retries on an exponential backoff with jitter, a
/// "Connection Lost" notification only after 30 s offline in background or
/// after the attempt limit, decisions made offline kept in order and sent on
/// reconnect, or the person told when their request expired meanwhile.
///
/// Pure like the rest of the engine: the retry delays come from
/// `Backoff.delayMs(attempt:seed:)` with a seed taken from the time the link
/// went down, so a test (or a restarted server) computes the same schedule.
public enum ConnectionChange: String, Sendable, CaseIterable { case connected, disconnected, failed }

/// A decision made while offline, waiting for the link (the host also keeps it
/// durably in the store's outbox).
public struct QueuedDecision: Equatable, Sendable {
    public let requestId: String
    public let sessionId: String
    public let decision: ApprovalDecision
    public let deviceId: String?
    public let source: DecisionSource
    public let queuedAt: Millis
    /// Always allow, the deny message, interrupt: applied with the decision on reconnect.
    public var options: DecisionOptions = .none
}

public struct ConnectivityState: Equatable, Sendable {
    /// Assumed up until the host says otherwise.
    public internal(set) var connected = true
    public internal(set) var offlineSince: Millis?
    /// Retries announced (`connection.retry`) since the link went down.
    public internal(set) var attempt = 0
    public internal(set) var nextRetryAt: Millis?
    public internal(set) var lostNotified = false
    /// Decisions made offline, in the order made.
    public internal(set) var queuedDecisions: [QueuedDecision] = []
    public init() {}
}

extension Engine {
    /// Offline this long in background -> "Connection Lost".
    public static let connectionLostAfterMs: Millis = 30_000
    /// Failed retries before "Connection Lost" in any phase.
    public static let reconnectAttemptLimit = 5
    /// 1 s, 2 s, 4 s ... capped at 60 s, equal jitter.
    public static let reconnectBackoff = Backoff.connection
    static let connectionLostNotificationId = "connection-lost"

    /// The delay before retry `attempt` of the outage that began at `since`.
    public static func reconnectDelayMs(attempt: Int, since: Millis) -> Millis {
        Millis(reconnectBackoff.delayMs(attempt: attempt, seed: UInt64(bitPattern: Int64(since))) ?? reconnectBackoff.capMs)
    }

    mutating func handleConnection(_ change: ConnectionChange, now: Millis, into effects: inout [Effect]) {
        switch change {
        case .connected:
            guard !state.connection.connected else { return }
            let wasLost = state.connection.lostNotified
            let queued = state.connection.queuedDecisions
            state.connection = ConnectivityState()
            if wasLost { effects.append(.clearNotifications(ids: [Engine.connectionLostNotificationId])) }
            // Decisions made offline go now, in the order they were made; one
            // whose request ended meanwhile was already reported (settle).
            flush(queued, now: now, into: &effects)
        case .disconnected, .failed:
            if state.connection.connected {
                state.connection.connected = false
                state.connection.offlineSince = now
                state.connection.attempt = 0
                state.connection.lostNotified = false
                scheduleRetry(now: now)
                state.deadlines.push(now + Engine.connectionLostAfterMs, .connectionLost(since: now))
            } else if change == .failed, state.connection.attempt >= Engine.reconnectAttemptLimit {
                // The client reports the last allowed attempt failed.
                connectionLost(now: now, into: &effects)
            }
        }
    }

    /// Applies decisions made offline, in order. Not inlined: Swift 6's
    /// optimizer crashes (OSSA lifetime verification) when `respond` is
    /// inlined into `handleConnection` in release builds.
    @inline(never)
    mutating func flush(_ queued: [QueuedDecision], now: Millis, into effects: inout [Effect]) {
        for q in queued where state.approvalIndex[q.requestId] != nil {
            _ = respondOutOfLine(q.requestId, q.decision, q.deviceId, q.source, q.options, now: now, into: &effects)
        }
    }

    @inline(never)
    mutating func respondOutOfLine(_ rid: String, _ d: ApprovalDecision, _ device: String?, _ source: DecisionSource,
                                   _ options: DecisionOptions, now: Millis, into effects: inout [Effect]) -> ApprovalRespondResult {
        respond(requestId: rid, decision: d, deviceId: device, source: source, options: options, now: now, into: &effects)
    }

    /// Schedules retry `attempt + 1`.
    mutating func scheduleRetry(now: Millis) {
        guard let since = state.connection.offlineSince else { return }
        armRetry(at: now + Engine.reconnectDelayMs(attempt: state.connection.attempt + 1, since: since))
    }

    /// The next retry comes due at `at` (only the latest armed one fires).
    mutating func armRetry(at: Millis) {
        state.connection.nextRetryAt = at
        state.deadlines.push(at, .connectionRetry)
    }

    /// A retry is due: tell the host to try (`connection.retry`), schedule the next.
    mutating func connectionRetryDue(at: Millis, into effects: inout [Effect]) {
        guard !state.connection.connected, state.connection.nextRetryAt == at, let since = state.connection.offlineSince
        else { return }
        // Attempt N is due only after attempt N-1 (if any) had its time and
        // did not bring the link back: past the limit the person is told.
        if state.connection.attempt >= Engine.reconnectAttemptLimit { connectionLost(now: at, into: &effects) }
        state.connection.attempt += 1
        let n = state.connection.attempt
        effects.append(.connectionRetry(attempt: n, delayMs: Engine.reconnectDelayMs(attempt: n, since: since)))
        scheduleRetry(now: at)
    }

    /// 30 s offline: tell the person only when they are away from the app.
    mutating func connectionLostDue(since: Millis, at: Millis, into effects: inout [Effect]) {
        guard !state.connection.connected, state.connection.offlineSince == since, state.app.isBackground else { return }
        connectionLost(now: at, into: &effects)
    }

    /// Entering background while already offline for 30 s or more.
    mutating func connectivityCheckOnBackground(now: Millis, into effects: inout [Effect]) {
        guard !state.connection.connected, let since = state.connection.offlineSince,
              now - since >= Engine.connectionLostAfterMs else { return }
        connectionLost(now: now, into: &effects)
    }

    /// "Connection Lost", once per outage: a push when away, a banner in the app.
    mutating func connectionLost(now: Millis, into effects: inout [Effect]) {
        guard !state.connection.lostNotified else { return }
        state.connection.lostNotified = true
        let title = strings["notification.connection_lost.title"]
        let body = strings["notification.connection_lost.body"]
        if state.app.isBackground {
            // Tapping it opens the session the person was following, if any.
            let sid = mostRecentActiveSession() ?? sessions.first?.id
            let link = sid.map { DeepLink.session(id: $0) } ?? DeepLink.notificationSettings
            let n = NotificationRequest(
                id: Engine.connectionLostNotificationId, title: title, body: body, category: .connectionLost, actions: [],
                interruptionLevel: .active, sound: false, threadId: sid ?? "connection", badge: state.pendingApprovalCount,
                deepLink: link.url, userInfo: ["type": NotificationCategory.connectionLost.rawValue, "sessionId": sid ?? "",
                                               "deepLink": link.url])
            _ = push(n, sentAt: nil, now: now, into: &effects)
        } else {
            effects.append(.showBanner(Banner(id: Engine.connectionLostNotificationId, style: .alert, title: title, body: body,
                                              sessionId: nil, deepLink: nil, actions: [])))
        }
    }

    /// A decision while offline: kept (the host stores it durably), the person
    /// told it will be sent. A second decision for the same request changes nothing.
    mutating func queueDecision(requestId: String, decision: ApprovalDecision, deviceId: String?, source: DecisionSource,
                                options: DecisionOptions = .none, now: Millis,
                                into effects: inout [Effect]) -> ApprovalRespondResult {
        guard let sid = state.approvalIndex[requestId] else {
            // Unknown, resolved or expired: the same answers as online.
            return respondOutOfLine(requestId, decision, deviceId, source, options, now: now, into: &effects)
        }
        if let first = state.connection.queuedDecisions.first(where: { $0.requestId == requestId }) {
            return ApprovalRespondResult(status: .alreadyResolved, requestId: requestId, sessionId: sid,
                                         resolution: first.decision == .allow ? .allow : .deny)
        }
        let hasSuggestions = state.sessions[sid]?.pendingApprovals.first { $0.requestId == requestId }?
            .permissionSuggestions.isEmpty == false
        state.connection.queuedDecisions.append(QueuedDecision(
            requestId: requestId, sessionId: sid, decision: decision, deviceId: deviceId, source: source, queuedAt: now,
            options: options.fitted(to: decision, hasSuggestions: hasSuggestions)))
        let title = strings["banner.decision_queued.title"]
        let body = strings[decision == .allow ? "banner.decision_queued.allow" : "banner.decision_queued.deny"]
        effects.append(.showBanner(Banner(id: "decision-queued:\(requestId)", style: .info, title: title, body: body,
                                          sessionId: sid, deepLink: DeepLink.approval(sessionId: sid, requestId: requestId).url,
                                          actions: [])))
        return ApprovalRespondResult(status: .queued, requestId: requestId, sessionId: sid,
                                     resolution: decision == .allow ? .allow : .deny)
    }

    /// Queued decisions whose request ended while offline (timed out,
    /// cancelled): nothing will be sent; tell the person. Returns their ids.
    @discardableResult
    mutating func settleQueuedDecisions(now: Millis, into effects: inout [Effect]) -> [String] {
        guard !state.connection.queuedDecisions.isEmpty else { return [] }
        var dropped: [String] = []
        state.connection.queuedDecisions.removeAll { q in
            guard state.approvalIndex[q.requestId] == nil else { return false }
            dropped.append(q.requestId)
            return true
        }
        for rid in dropped {
            let sid = state.resolvedApprovals[rid]?.sessionId ?? ""
            let title = strings["notification.decision_expired.title"]
            let body = strings["notification.decision_expired.body"]
            let link = sid.isEmpty ? DeepLink.notificationSettings : DeepLink.session(id: sid)
            if state.app.isBackground, let s = state.sessions[sid] {
                let n = makeNotification(id: "decision-expired:\(rid)", title: title, body: body, category: .decisionNotSent,
                                         event: nil, level: .active, sound: true, actions: [], session: s, link: link,
                                         extra: ["requestId": rid])
                push(n, sentAt: nil, now: now, into: &effects)
            } else {
                effects.append(.showBanner(Banner(id: "decision-expired:\(rid)", style: .alert, title: title, body: body,
                                                  sessionId: sid.isEmpty ? nil : sid, deepLink: link.url, actions: [])))
            }
        }
        state.lastDroppedDecisions = dropped
        return dropped
    }

    /// Request ids whose queued decision was dropped by the last `apply`
    /// (the host marks their outbox rows failed: nothing is sent).
    public var droppedDecisions: [String] { state.lastDroppedDecisions }
    public var connectivity: ConnectivityState { state.connection }
}
