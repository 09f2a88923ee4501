import BridgeCore

/// Approvals (EDGE-CASES "Multiple Approval Requests", "Approval Request
/// Timeout"; PRD US-2.1..2.4, US-5.4): queued per session, badge = count, the
/// Live Activity shows the newest, per-request timeout (settings, default 60 s)
/// -> resolves as timed out, its notification is cleared and the activity says
/// "Approval timed out - Claude continued". The first decision wins; any later
/// one (other device, double tap, after timeout) gets alreadyResolved/expired
/// and changes nothing.
public struct ApprovalRequest: Equatable, Sendable {
    public let requestId: String
    public let sessionId: String
    public let tool: ToolUse
    public let createdAt: Millis
    public let expiresAt: Millis
    /// The agent's permission updates that "Always allow" applies (Claude
    /// Code's `permission_suggestions`), opaque JSON objects as sent: at most
    /// `maxPermissionSuggestions`, each at most `maxPermissionSuggestionBytes`
    /// serialized. Empty: "Always allow" is not offered.
    public internal(set) var permissionSuggestions: [JSON] = []
    /// The push that announced it (cleared when it resolves).
    var notificationId: String?
    var bannerShown = false
}

extension ApprovalRequest {
    public static let maxPermissionSuggestions = 16
    public static let maxPermissionSuggestionBytes = 4096

    /// Why one suggestion cannot be kept (nil: it can): not an object, or too large.
    public static func problem(withSuggestion s: JSON) -> String? {
        guard case .object = s else { return "must be an object, not \(s.typeName)" }
        let n = s.encoded.count
        return n > maxPermissionSuggestionBytes ? "is \(n) bytes serialized, over \(maxPermissionSuggestionBytes)" : nil
    }

    /// The suggestions an approval keeps: the first 16 that are objects of at most 4 KB.
    public static func keepable(_ suggestions: [JSON]) -> [JSON] {
        Array(suggestions.lazy.filter { problem(withSuggestion: $0) == nil }.prefix(maxPermissionSuggestions))
    }
}

public enum ApprovalRespondStatus: String, Sendable, CaseIterable {
    case accepted
    /// Recorded offline, delivered later (the outbox keeps it; the engine never returns it itself).
    case queued
    case alreadyResolved, expired, unknown
}

public struct ApprovalRespondResult: Equatable, Sendable {
    public var status: ApprovalRespondStatus
    public var requestId: String
    public var sessionId: String?
    /// How the request ended (for accepted: this decision; otherwise the winner's).
    public var resolution: ApprovalResolution?
}

extension Engine {
    mutating func requestApproval(_ e: AgentEvent, requestId: String, tool: ToolUse, timeoutSeconds: Double?,
                                  permissionSuggestions: [JSON], now: Millis, into effects: inout [Effect]) {
        // A repeated request id (agent retry) is the same request: nothing new to say.
        if state.approvalIndex[requestId] != nil || state.resolvedApprovals[requestId] != nil { return }
        let timeout = timeoutSeconds ?? state.settings.approvalTimeoutSeconds
        var req = ApprovalRequest(requestId: requestId, sessionId: e.sessionId, tool: tool, createdAt: now,
                                  expiresAt: now + Millis.seconds(timeout),
                                  permissionSuggestions: ApprovalRequest.keepable(permissionSuggestions))
        state.approvalIndex[requestId] = e.sessionId
        state.pendingApprovalCount += 1
        state.deadlines.push(req.expiresAt, .approvalTimeout(requestId: requestId))
        let session = withSession(e.sessionId, now: now) { s -> Session in
            if s.run != .running { s.run = .running; if s.startedAt == nil { s.startedAt = now } }
            s.message = nil
            s.recomputeStatus()
            return s
        }
        let link = DeepLink.approval(sessionId: e.sessionId, requestId: requestId)
        if state.app.isBackground {
            // Background: actionable push (Approve / Deny).
            let id = "approval:\(requestId)"
            let n = makeNotification(id: id, title: strings["notification.approval.title"], body: approvalBody(tool),
                                     category: .approval, event: .approvalNeeded, sound: true,
                                     actions: approvalActions(), session: session, link: link,
                                     extra: ["requestId": requestId, "toolName": tool.name])
            if push(n, sentAt: e.sentAt, now: now, into: &effects) { req.notificationId = id }
        } else {
            // Foreground: in-app banner. The app is open, so details are shown (redacted).
            effects.append(.showBanner(Banner(
                id: "approval:\(requestId)", style: .approval, title: strings["notification.approval.title"],
                body: Privacy.inAppText("\(tool.name): \(tool.detail)", services: services), sessionId: e.sessionId,
                deepLink: link.url, actions: approvalActions())))
            req.bannerShown = true
        }
        state.sessions[e.sessionId]!.pendingApprovals.append(req)
        state.sessions[e.sessionId]!.recomputeStatus()
        effects.append(.sessionChanged(sessionId: e.sessionId))
        startActivity(e.sessionId, now: now, into: &effects)
        refreshActivity(e.sessionId, now: now, into: &effects)
    }

    mutating func respond(requestId: String, decision: ApprovalDecision, deviceId: String?, source: DecisionSource,
                          options: DecisionOptions = .none, now: Millis, into effects: inout [Effect]) -> ApprovalRespondResult {
        guard let sid = state.approvalIndex[requestId] else {
            if let r = state.resolvedApprovals[requestId] {
                return ApprovalRespondResult(status: r.resolution == .timedOut ? .expired : .alreadyResolved,
                                             requestId: requestId, sessionId: r.sessionId, resolution: r.resolution)
            }
            return ApprovalRespondResult(status: .unknown, requestId: requestId, sessionId: nil, resolution: nil)
        }
        let resolution: ApprovalResolution = decision == .allow ? .allow : .deny
        let hasSuggestions = state.sessions[sid]?.pendingApprovals.first { $0.requestId == requestId }?
            .permissionSuggestions.isEmpty == false
        let req = resolveApproval(requestId, sessionId: sid, as: resolution, by: deviceId,
                                  options: options.fitted(to: decision, hasSuggestions: hasSuggestions),
                                  now: now, into: &effects)
        if source == .notification {
            state.metrics.count(decision == .allow ? .approvalFromNotification : .denialFromNotification)
        }
        // PRD Flow 2: after "Approve" the lock screen shows what Claude now does.
        let op: String? = decision == .allow ? req.map { strings[OperationText.key(for: $0.tool)] } : nil
        if let op { withSession(sid, now: now) { s in s.operation = op } }
        deviceInteracted(sid, device: deviceId, source: source, now: now, into: &effects)
        refreshActivity(sid, now: now, into: &effects)
        return ApprovalRespondResult(status: .accepted, requestId: requestId, sessionId: sid, resolution: resolution)
    }

    /// Removes an open request and tells everyone how it ended; returns it.
    @discardableResult
    mutating func resolveApproval(_ requestId: String, sessionId sid: String, as resolution: ApprovalResolution,
                                  by: String?, options: DecisionOptions = .none, now: Millis,
                                  into effects: inout [Effect]) -> ApprovalRequest? {
        state.approvalIndex[requestId] = nil
        state.resolvedApprovals.set(requestId, (resolution, sid))
        guard let idx = state.sessions[sid]?.pendingApprovals.firstIndex(where: { $0.requestId == requestId }) else { return nil }
        let req = state.sessions[sid]!.pendingApprovals.remove(at: idx)
        state.pendingApprovalCount -= 1
        let kind: HistoryEntry.Kind
        switch resolution {
        case .allow: kind = .approved
        case .deny: kind = .denied
        case .timedOut: kind = .timedOut
        case .cancelled: kind = .cancelled
        }
        withSession(sid, now: now) { s in
            s.record(HistoryEntry(at: now, kind: kind, id: requestId, toolName: req.tool.name, by: by))
            s.lastActivityAt = now
            s.recomputeStatus()
        }
        // Clear it everywhere (US-5.4: approve on iPhone, it clears on iPad).
        effects.append(.clearNotifications(ids: ["approval:\(requestId)"]))
        effects.append(.approvalResolved(requestId: requestId, sessionId: sid, decision: resolution, by: by, options: options))
        effects.append(.sessionChanged(sessionId: sid))
        return req
    }

    /// The approval's time is up (our timer or the backend's `approval_timeout`).
    mutating func timeOutApproval(_ requestId: String, now: Millis, into effects: inout [Effect]) {
        guard let sid = state.approvalIndex[requestId] else { return }
        resolveApproval(requestId, sessionId: sid, as: .timedOut, by: nil, now: now, into: &effects)
        state.metrics.missedApproval()
        let text = strings["activity.approval_timed_out"]
        withSession(sid, now: now) { s in s.message = text }
        if !state.app.isBackground {
            effects.append(.showBanner(Banner(id: "approval-timeout:\(requestId)", style: .info, title: text, body: text,
                                              sessionId: sid, deepLink: DeepLink.session(id: sid).url, actions: [])))
        }
        refreshActivity(sid, now: now, into: &effects)
        terminalPromptRemains(sid, now: now, into: &effects)
    }

    /// Deadlines due at or before `now`, in time order.
    mutating func fireDueDeadlines(now: Millis, into effects: inout [Effect]) {
        while let top = state.deadlines.top, top.at <= now {
            state.deadlines.pop()
            switch top.kind {
            case .approvalTimeout(let rid):
                guard let sid = state.approvalIndex[rid],
                      state.sessions[sid]?.pendingApprovals.contains(where: { $0.requestId == rid && $0.expiresAt == top.at }) == true
                else { continue }
                timeOutApproval(rid, now: top.at, into: &effects)
            case .longTaskReminder(let sid):
                guard state.sessions[sid]?.nextReminderAt == top.at else { continue }
                longTaskReminder(sid, at: top.at, into: &effects)
            case .connectionRetry:
                connectionRetryDue(at: top.at, into: &effects)
            case .connectionLost(let since):
                connectionLostDue(since: since, at: top.at, into: &effects)
            }
        }
    }

    /// OVERVIEW "Long-Running Tasks (>1 hour)": convert the Live Activity to
    /// periodic push notifications, hourly while it keeps running.
    mutating func longTaskReminder(_ sid: String, at now: Millis, into effects: inout [Effect]) {
        guard let s0 = state.sessions[sid], s0.run == .running || s0.run == .waiting else {
            state.sessions[sid]?.nextReminderAt = nil
            return
        }
        let next = now + Engine.longTaskThreshold
        if s0.run == .waiting {
            // It waits for the person (who was told): no "still working", but
            // the hourly reminder goes on once it works again.
            state.sessions[sid]!.nextReminderAt = next
            state.deadlines.push(next, .longTaskReminder(sessionId: sid))
            return
        }
        withSession(sid, now: now) { s in s.longRunning = true; s.nextReminderAt = next }
        state.deadlines.push(next, .longTaskReminder(sessionId: sid))
        if state.activity?.sessionId == sid {
            endActivity(now: now, into: &effects)
            activityFollowUp(now: now, into: &effects)
        }
        let s = state.sessions[sid]!
        let body = strings.format("notification.long_task.body", elapsedText(s.elapsedSeconds(at: now) ?? 0),
                                  s.operation ?? strings["operation.working"])
        let n = makeNotification(id: nextId("long-task", sid), title: strings["notification.long_task.title"], body: body,
                                 category: .longTask, event: nil, level: .active, sound: false, actions: [],
                                 session: s, link: .session(id: sid))
        push(n, sentAt: nil, now: now, into: &effects)
    }
}
